"""Keep every chapter's first code cell identical: the setup cell.

The setup cell installs ``attn_utils`` from the repository when it is missing or is another version
than the one the book was built with (Colab, or an old copy): the tag ``v<version>`` of the version in
``pyproject.toml``, so that a reader runs the code the page shows. Publishing creates that tag: the
workflow that builds and deploys the book (``.github/workflows/pages.yml``) tags the commit it built
``v<version>`` and pushes the tag; when the tag already names another commit, it keeps it if that
commit's ``attn_utils`` and ``pyproject.toml`` equal the published one's and fails, asking for a
version bump, if not; so a published page and its tag's package agree by construction. The cell
runs the tag's install with pip's output captured; only where that fails (a copy of the book that
was never published has no tag) does it install the newest code (the default branch) instead, with
a one-line warning saying so, and no pip error on the page. It says what it installed. Then it seeds and picks
the device. The repository URL lives in one place, ``_config.yml`` (``repository.url``); this
script writes the cell into every notebook from that. The cell is tagged ``hide-input``: the
rendered book shows its one line of output and keeps the code folded (the reader can unfold it), so
each page opens with the chapter rather than with installation code.

    python -m tools.notebook_setup --check   # exit 1 and list notebooks whose cell differs
    python -m tools.notebook_setup --write   # rewrite the cell where it differs
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ROOT / "chapters"
MARKER = "# Setup (the same in every chapter)"
TAGS = ["hide-input"]

TEMPLATE = '''{marker}: install attn_utils where it is
# missing or is another version than the one this book was built with (e.g. on Colab),
# then fix the random seeds and pick the device (CUDA, then Apple MPS, then CPU; set the
# environment variable ATTN_UTILS_DEVICE to choose one).
import importlib.metadata
import subprocess
import sys

REPOSITORY = "{url}"
BOOK_VERSION = "{version}"  # the pages were built with this attn_utils: tag v{version}
try:
    installed = importlib.metadata.version("attn_utils")
except importlib.metadata.PackageNotFoundError:
    installed = None
if installed != BOOK_VERSION:
    pip = [sys.executable, "-m", "pip", "install", "-q", "--upgrade"]
    tagged = f"attn_utils @ git+{{REPOSITORY}}@v{{BOOK_VERSION}}"
    # Publishing the book tags the commit it was built from. A copy that was never
    # published has no tag: pip's error is kept back and the main branch installed.
    if subprocess.run(pip + [tagged], capture_output=True).returncode == 0:
        replaced = "" if installed is None else f" in place of version {{installed}}"
        print(
            f"installed attn_utils {{BOOK_VERSION}} (tag v{{BOOK_VERSION}} of {{REPOSITORY}})"
            + replaced
        )
    else:
        subprocess.run(pip + [f"attn_utils @ git+{{REPOSITORY}}"], check=True)
        print(
            f"WARNING: tag v{{BOOK_VERSION}} is not in {{REPOSITORY}}; installed its "
            "main branch instead, which may differ from this page"
        )

import attn_utils

attn_utils.set_seed(0)
device = attn_utils.get_device()
print("attn_utils", attn_utils.__version__, "on", device)'''


def package_version(pyproject: Path = ROOT / "pyproject.toml") -> str:
    """The ``version`` of ``[project]`` in ``pyproject.toml``: what the setup cell pins."""
    match = re.search(r'^version\s*=\s*"([^"]+)"', pyproject.read_text(encoding="utf-8"), re.MULTILINE)
    if not match:
        raise ValueError(f"{pyproject.name} has no 'version = \"...\"' entry")
    return match.group(1)


def repository_url(config: Path = ROOT / "_config.yml") -> str:
    """The ``repository: url:`` entry of the book's configuration."""
    text = config.read_text(encoding="utf-8")
    match = re.search(r"^repository:\s*\n(?:[ \t]+.*\n)*?[ \t]+url:\s*(\S+)", text, re.MULTILINE)
    if not match:
        raise ValueError(f"{config.name} has no 'repository: url:' entry")
    return match.group(1).strip("'\"")


def setup_cell_source(url: str | None = None, version: str | None = None) -> str:
    """The setup cell's code; ``url`` and ``version`` stand in for the book's own (tests run it against
    a local clone)."""
    return TEMPLATE.format(marker=MARKER, url=url or repository_url(), version=version or package_version())


def notebooks() -> list[Path]:
    return sorted(p for p in CHAPTERS.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def first_code_cell(nb: dict) -> dict | None:
    return next((c for c in nb["cells"] if c["cell_type"] == "code"), None)


def _source(cell: dict) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


def _lines(source: str) -> list[str]:
    """A cell's source as nbformat stores it on disk: one string a line, so that diffs read line by line."""
    return source.splitlines(keepends=True)


def check(paths: list[Path]) -> list[Path]:
    expected = setup_cell_source()
    bad = []
    for path in paths:
        cell = first_code_cell(json.loads(path.read_text(encoding="utf-8")))
        if cell is None or _source(cell) != expected or cell.get("metadata", {}).get("tags") != TAGS:
            bad.append(path)
    return bad


def write(paths: list[Path]) -> list[Path]:
    expected = setup_cell_source()
    changed = []
    for path in paths:
        nb = json.loads(path.read_text(encoding="utf-8"))
        cell = first_code_cell(nb)
        if cell is not None and _source(cell) == expected and cell.get("metadata", {}).get("tags") == TAGS:
            continue
        if cell is not None and _source(cell).startswith(MARKER):
            cell["source"] = _lines(expected)
            cell.setdefault("metadata", {})["tags"] = list(TAGS)
        else:  # no setup cell yet: insert one after the title cell
            new = {"cell_type": "code", "execution_count": None, "id": "setup", "metadata": {"tags": list(TAGS)},
                   "outputs": [], "source": _lines(expected)}
            nb["cells"].insert(1 if nb["cells"] and nb["cells"][0]["cell_type"] == "markdown" else 0, new)
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        changed.append(path)
    return changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--check", action="store_true")
    group.add_argument("--write", action="store_true")
    parser.add_argument("paths", nargs="*", type=Path)
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.paths] or notebooks()
    if args.check:
        bad = check(paths)
        for path in bad:
            print(f"{path.relative_to(ROOT)}: first code cell is not the setup cell, or not tagged {TAGS} "
                  "(run: python -m tools.notebook_setup --write)")
        return 1 if bad else 0
    for path in write(paths):
        print(f"updated {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
