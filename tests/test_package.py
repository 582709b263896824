"""The package's shape: no module reaches into another's private names, the top level holds exactly the
names the book uses (one list, the ``from .x import a as a`` lines of ``__init__``), and the chapter map
in ``attn_utils``'s docstring names every module, exercise checker and chapter."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import sys
import types
from pathlib import Path

import pytest

import attn_utils

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "attn_utils"
INIT = PACKAGE / "__init__.py"


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _python_files() -> list[Path]:
    files = []
    for folder in ("attn_utils", "tests", "benchmarks", "tools"):
        files += [p for p in sorted((ROOT / folder).rglob("*.py")) if "node_modules" not in p.parts]
    return files


def _resolve(path: Path, node: ast.ImportFrom) -> str | None:
    """The dotted module ``from X import ...`` reads, with relative imports resolved inside the repository."""
    if not node.level:
        return node.module
    package = list(path.relative_to(ROOT).with_suffix("").parts)[:-node.level]
    return ".".join(package + ([node.module] if node.module else []))


def _is_local_module(dotted: str) -> bool:
    """Is ``dotted`` (e.g. ``attn_utils.masking``) a module or package of this repository?"""
    base = ROOT.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def private_uses(path: Path) -> list[str]:
    """Every ``from X import _name`` and ``module._name`` of ``path`` that reads another module's private name."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    modules = set()  # names that the file binds to modules
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                modules.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(path, node)
            for alias in node.names:
                if _is_private(alias.name):
                    found.append(f"from {source} import {alias.name}")
                elif source and _is_local_module(f"{source}.{alias.name}"):
                    modules.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr) and isinstance(node.value, ast.Name) \
                and node.value.id in modules:
            found.append(f"{node.value.id}.{node.attr} (line {node.lineno})")
    return found


def test_no_module_uses_another_modules_private_names():
    offences = {str(p.relative_to(ROOT)): uses for p in _python_files() if (uses := private_uses(p))}
    assert not offences, f"private names used across modules (make them public, e.g. in attn_utils.checks): {offences}"


def test_the_private_name_check_catches_both_forms(tmp_path, monkeypatch):
    module = tmp_path / "attn_utils" / "example.py"
    module.parent.mkdir()
    module.write_text("from .masking import _hidden, __version__\nfrom . import seq2seq\nimport torch\n"
                      "seq2seq._private(torch._C, self._own, seq2seq.__name__)\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "attn_utils" / "seq2seq.py").write_text("")
    assert private_uses(module) == ["from attn_utils.masking import _hidden", "seq2seq._private (line 4)",
                                    "torch._C (line 4)"]


# ----------------------------------------------------------------------------------------------
# The top level: one list of names, each used by the book
# ----------------------------------------------------------------------------------------------

def exported_names() -> list[str]:
    """The names ``__init__`` re-exports, in its ``from .x import a as a`` lines."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    names = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                assert alias.asname == alias.name, (
                    f"attn_utils/__init__.py: write `from .{node.module} import {alias.name} as {alias.name}` "
                    f"(the explicit re-export form), got `import {alias.name}"
                    + (f" as {alias.asname}`" if alias.asname else "`"))
                names.append(alias.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            assert all(isinstance(t, ast.Name) and t.id != "__all__" for t in targets), \
                "attn_utils/__init__.py keeps its public names in the import lines only, not in __all__"
    return names


def test_the_import_lines_are_the_one_list_of_public_names():
    names = exported_names()
    assert len(names) == len(set(names)), f"imported twice: {sorted(n for n in names if names.count(n) > 1)}"
    public = {n for n, v in vars(attn_utils).items()
              if not n.startswith("_") and not isinstance(v, types.ModuleType)}
    assert public == set(names), f"public but not re-exported: {sorted(public - set(names))}"


def _book_text() -> str:
    """Every notebook cell, chapter page, benchmark and the README: where a reader meets ``attn_utils``."""
    parts = [(ROOT / "README.md").read_text(encoding="utf-8")]
    for path in sorted((ROOT / "chapters").rglob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            source = cell["source"]
            parts.append("".join(source) if isinstance(source, list) else source)
    parts += [p.read_text(encoding="utf-8") for p in sorted((ROOT / "chapters").rglob("*.md"))]
    parts += [p.read_text(encoding="utf-8") for p in sorted((ROOT / "benchmarks").glob("*.py"))]
    return "\n".join(parts)


def used_top_level_names(text: str) -> set[str]:
    """Names written ``attn_utils.name`` or imported with ``from attn_utils import ...``."""
    used = set(re.findall(r"\battn_utils\.(\w+)", text))
    for group in re.findall(r"^\s*from attn_utils import (\([^)]*\)|[^\n]*)", text, re.MULTILINE):
        used |= set(re.findall(r"\w+", re.sub(r"#[^\n]*", "", group))) - {"as"}
    return used


def test_used_names_are_found_in_both_forms():
    text = "from attn_utils import (\n    a,  # the first\n    b as c,\n)\nx = attn_utils.d(1)\n"
    assert used_top_level_names(text + "from attn_utils import e, f\n") == {"a", "b", "c", "d", "e", "f"}


def test_every_top_level_name_is_used_by_the_book():
    used = used_top_level_names(_book_text())
    unused = sorted(set(exported_names()) - used)
    assert not unused, (f"no notebook, chapter page, benchmark or README uses attn_utils.{unused}: take them off "
                        f"the top level (they stay importable from their modules)")


def test_every_top_level_name_the_book_uses_exists():
    missing = sorted(name for name in used_top_level_names(_book_text())
                     if not hasattr(attn_utils, name) and importlib.util.find_spec(f"attn_utils.{name}") is None)
    assert not missing, f"the book uses attn_utils.{missing}, which the package does not have"


# ----------------------------------------------------------------------------------------------
# The chapter map
# ----------------------------------------------------------------------------------------------

def _package_modules() -> list[str]:
    """Every module of the package as the map names it (``masking``, ``data.loader``), checkers apart."""
    modules = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__" or parts[0] == "exercises" or parts[-1].startswith("_"):
            continue
        modules.append(".".join(parts))
    return modules


def _checkers() -> list[str]:
    return [f"exercises.{p.stem}" for p in sorted((PACKAGE / "exercises").glob("ch[0-9][0-9]*.py"))]


def _chapter_labels() -> list[str]:
    """``1`` ... ``11``, with ``7a``, ``7b``, ... for the sections, from the notebooks and pages in ``_toc.yml``."""
    files = re.findall(r"file:\s*chapters/\S+/(\d\d)([a-z]?)_", (ROOT / "_toc.yml").read_text(encoding="utf-8"))
    return [f"{int(number)}{section}" for number, section in files]


@pytest.mark.parametrize("kind", ["module", "checker"])
def test_the_chapter_map_names_every_module_and_checker(kind):
    named = set(re.findall(r"``([\w.]+)``", attn_utils.__doc__))
    expected = _package_modules() if kind == "module" else _checkers()
    assert expected, f"found no {kind} to look for"
    missing = [m for m in expected if m not in named]
    assert not missing, f"the chapter map in attn_utils/__init__.py's docstring does not name: {missing}"


def test_the_chapter_map_has_a_row_per_chapter_and_section():
    rows = set(re.findall(r"^(\d+[a-z]?)\s", attn_utils.__doc__, re.MULTILINE))
    labels = _chapter_labels()
    assert {"1", "7a", "11b"} <= set(labels)
    missing = [label for label in labels if label not in rows]
    assert not missing, f"the chapter map has no row for chapter(s) {missing}"
    assert re.search(r"^shared", attn_utils.__doc__, re.MULTILINE), "the chapter map has no shared-infrastructure row"
