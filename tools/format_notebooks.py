"""Format the chapters' code cells with ``ruff format`` (88 characters a line, ``chapters/ruff.toml``).

A coding exercise shows its solution cell's code again in its ``{solution}`` block, and a test holds
the two equal; formatting the cell alone would break that, so the block's copy is rewritten with the
cell. Lines that the formatter cannot shorten (long strings and comments) are left for
``ruff check`` (E501) to report.

    python -m tools.format_notebooks          # format every chapter
    python -m tools.format_notebooks --check  # exit 1 if any chapter would change
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import nbformat

from tools import editions
from tools.notebook_setup import ROOT, notebooks


def _solution_sources(path: Path) -> dict[str, str]:
    nb = nbformat.read(path, as_version=4)
    return {label: cells["solution"].source.strip() for label, cells in editions.coding_exercises(nb).items()}


def _sync_solution_blocks(path: Path, before: dict[str, str]) -> None:
    nb = nbformat.read(path, as_version=4)
    after = _solution_sources(path)
    changed = False
    for label, old in before.items():
        new = after[label]
        if new == old:
            continue
        blocks = [c for c in nb.cells if c.cell_type == "markdown" and f"{{solution}} {label}" in c.source]
        if len(blocks) != 1 or old not in blocks[0].source:
            raise SystemExit(f"{path.name}: the solution block of {label} does not show its solution cell's code")
        blocks[0].source = blocks[0].source.replace(old, new)
        changed = True
    if changed:
        nbformat.write(nb, path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("paths", nargs="*", type=Path)
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.paths] or notebooks()
    ruff = [sys.executable, "-m", "ruff", "format", "--config", str(ROOT / "chapters" / "ruff.toml")]
    if args.check:
        return subprocess.run([*ruff, "--check", *map(str, paths)]).returncode
    before = {path: _solution_sources(path) for path in paths}
    subprocess.run([*ruff, *map(str, paths)], check=True)
    for path in paths:
        _sync_solution_blocks(path, before[path])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
