"""The chapters follow the course's conventions (CONTRIBUTING.md). nbval runs them; this checks their form."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tools import notebook_setup

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = notebook_setup.notebooks()
IDS = [str(p.relative_to(ROOT)) for p in NOTEBOOKS]
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|tmp|root|home)/")


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _text(cell: dict) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


def _toc_files() -> list[str]:
    return re.findall(r"^\s*-?\s*file:\s*(\S+)", (ROOT / "_toc.yml").read_text(encoding="utf-8"), re.MULTILINE)


def test_there_are_chapters():
    assert NOTEBOOKS, "no notebooks under chapters/"


def test_every_notebook_is_in_the_toc_and_every_toc_entry_exists():
    toc = set(_toc_files())
    chapters = {str(p.relative_to(ROOT).with_suffix("")) for p in NOTEBOOKS}
    assert chapters <= toc, f"notebooks missing from _toc.yml: {sorted(chapters - toc)}"
    for entry in toc:
        assert any((ROOT / f"{entry}{ext}").exists() for ext in (".ipynb", ".md")), (
            f"_toc.yml lists a missing file: {entry}")


def test_repository_url_is_consistent():
    url = notebook_setup.repository_url()
    assert url.startswith("https://github.com/")
    assert f'Repository = "{url}"' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_first_code_cell_is_the_setup_cell(path):
    assert notebook_setup.check([path]) == [], "run `make setup-cells`"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_title_cell_comes_first(path):
    first = _load(path)["cells"][0]
    assert first["cell_type"] == "markdown"
    assert re.match(r"# \S", _text(first)), "the first cell is the chapter title, one '#' heading"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_stored_executed_in_order_without_errors(path):
    code = [c for c in _load(path)["cells"] if c["cell_type"] == "code" and _text(c).strip()]
    counts = [c["execution_count"] for c in code]
    assert None not in counts, "every code cell is stored executed"
    assert counts == list(range(1, len(counts) + 1)), "executed top to bottom in a fresh kernel (make execute)"
    errors = [o for c in code for o in c["outputs"] if o["output_type"] == "error"]
    assert not errors, f"stored outputs contain errors: {[e['ename'] for e in errors]}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_has_checked_outputs_and_figures(path):
    cells = _load(path)["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    assert any(_text(c).startswith("# NBVAL_CHECK_OUTPUT") and c["outputs"] for c in code), (
        "at least one stable key result is checked by nbval"
    )
    assert any("image/png" in o.get("data", {}) for c in cells if c["cell_type"] == "code" for o in c["outputs"])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_exercises_with_hidden_solutions(path):
    markdown = "\n".join(_text(c) for c in _load(path)["cells"] if c["cell_type"] == "markdown")
    assert re.search(r"^#+ Exercises", markdown, re.MULTILINE)
    exercises = re.findall(r"^:::+\{exercise\}\s*\n:label:\s*(\S+)", markdown, re.MULTILINE)
    solutions = re.findall(r"^:::+\{solution\}\s*(\S+)\s*\n:class:\s*dropdown", markdown, re.MULTILINE)
    assert len(exercises) >= 4, f"4 or more exercises, found {len(exercises)}"
    assert sorted(exercises) == sorted(solutions), "each exercise has one solution, hidden in a dropdown"


def test_exercise_labels_are_unique_across_the_book():
    labels = []
    for path in NOTEBOOKS:
        for cell in _load(path)["cells"]:
            if cell["cell_type"] == "markdown":
                labels += re.findall(r"^:label:\s*(\S+)", _text(cell), re.MULTILINE)
    assert len(labels) == len(set(labels))


def _markdown_pages() -> list[Path]:
    """The book's Markdown pages listed in _toc.yml (chapter introductions, notation, glossary, ...)."""
    return [ROOT / f"{entry}.md" for entry in _toc_files() + ["intro"] if (ROOT / f"{entry}.md").is_file()]


def _prose(path: Path) -> str:
    if path.suffix == ".md":
        return path.read_text(encoding="utf-8")
    return "\n".join(_text(cell) for cell in _load(path)["cells"] if cell["cell_type"] == "markdown")


def test_citations_exist_in_the_bibliography():
    bib = set(re.findall(r"^@\w+\{([^,]+),", (ROOT / "references.bib").read_text(encoding="utf-8"), re.MULTILINE))
    cited = 0
    for path in NOTEBOOKS + _markdown_pages():
        for group in re.findall(r"\{cite(?::\w+)?\}`([^`]+)`", _prose(path)):
            for key in group.split(","):
                cited += 1
                assert key.strip() in bib, f"{path.name} cites {key.strip()!r}, which references.bib lacks"
    assert cited > 50


GLOSSARY_TERMS = set(re.findall(r"^(\S[^\n]*)\n  \S", (ROOT / "glossary.md").read_text(encoding="utf-8")
                                .split("```{glossary}")[1], re.MULTILINE))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_chapter_links_terms_of_the_glossary(path):
    used = [target or text for text, target in
            re.findall(r"\{term\}`([^`<]*?)\s*(?:<([^`>]+)>)?`", _prose(path))]
    assert used, f"{path.name} links no term of the glossary ({{term}}`text <Term>`)"
    unknown = sorted(set(used) - GLOSSARY_TERMS)
    assert not unknown, f"{path.name} links terms that glossary.md does not define: {unknown}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_machine_paths_and_no_d2l(path):
    raw = path.read_text(encoding="utf-8")
    assert not MACHINE_PATH.search(raw), f"machine path in {path.name}: {MACHINE_PATH.search(raw).group(0)}"
    code = "\n".join(_text(c) for c in _load(path)["cells"] if c["cell_type"] == "code")
    assert not re.search(r"^\s*(import|from)\s+d2l", code, re.MULTILINE), "notebooks never import d2l"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_stays_small(path):
    assert path.stat().st_size < 2_000_000, f"{path.name} is {path.stat().st_size / 1e6:.1f} MB"


def test_setup_tool_writes_and_checks(tmp_path):
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": "# T"}], "metadata": {},
          "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "x.ipynb"
    path.write_text(json.dumps(nb))
    assert notebook_setup.check([path]) == [path]
    assert notebook_setup.write([path]) == [path]
    assert notebook_setup.check([path]) == []
    cell = notebook_setup.first_code_cell(_load(path))
    assert notebook_setup.repository_url() in _text(cell)
    assert _load(path)["cells"][0]["cell_type"] == "markdown"  # inserted after the title
    assert notebook_setup.write([path]) == []  # idempotent


TRAINERS = re.compile(r"\b(budget|attn_utils\.fit|train_seq2seq|train_classifier|train_language_model|"
                      r"train_and_score|train_recipe|compare_translators)\(")


def _output_text(cell: dict) -> str:
    parts = []
    for out in cell.get("outputs", []):
        text = out.get("text", "")
        parts.append("".join(text) if isinstance(text, list) else text)
    return "".join(parts)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_stored_outputs_are_at_the_book_budget(path):
    """The book shows book-budget results: no stored output comes from a quick run, and a notebook that
    trains says, in its stored outputs, that it ran at the book budget (the training loop prints it)."""
    code = [c for c in _load(path)["cells"] if c["cell_type"] == "code"]
    printed = "\n".join(_output_text(c) for c in code)
    assert "quick budget" not in printed and "ATTN_UTILS_QUICK=1" not in printed, (
        "stored outputs come from a quick-budget run; re-execute with `make execute NB=...`")
    if any(TRAINERS.search(_text(c)) for c in code):
        assert "(book budget)" in printed, "a notebook that trains prints the budget it ran with"
