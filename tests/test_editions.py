"""tools/editions.py: the student edition holds no solutions and still runs top to bottom."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbclient.exceptions import CellTimeoutError

from attn_utils.budgets import quick_mode
from tools import editions, execute_notebooks, notebook_setup

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = notebook_setup.notebooks()
WITH_CODING = [p for p in NOTEBOOKS if editions.coding_exercises(nbformat.read(p, as_version=4))]


def _nb(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    return nb


def _code(source, tags=(), outputs=()):
    cell = nbformat.v4.new_code_cell(source, execution_count=1, outputs=list(outputs))
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def test_student_notebook_on_a_small_example():
    printed = [nbformat.v4.new_output("stream", name="stdout", text="ok\n")]
    nb = _nb(
        nbformat.v4.new_markdown_cell(":::{exercise}\n:label: ch00-x\n\nWrite f.\n:::"),
        _code("def my_f():\n    raise NotImplementedError", ["stub"], printed),
        _code("def my_f():\n    return 42", ["solution", "remove-input"], printed),
        _code('check_exercise("ch00-x", my_f)', ["check"], printed),
        nbformat.v4.new_markdown_cell(":::{solution} ch00-x\n:class: dropdown\n\n"
                                      "Return 42.\n\n```python\nreturn 42\n```\n:::"),
        nbformat.v4.new_markdown_cell("Text\n\n::::{solution} ch00-y\n:class: dropdown\n\n"
                                      ":::{note}\nnested\n:::\n::::\n\nmore text"),
        _code("print(1)", outputs=printed),
    )
    assert list(editions.coding_exercises(nb)) == ["ch00-x"]
    student = editions.student_notebook(nb)
    sources = [c.source for c in student.cells]
    assert sources == [nb.cells[0].source, nb.cells[1].source, nb.cells[3].source, "Text\n\nmore text", "print(1)"]
    assert [c.outputs for c in student.cells if c.cell_type == "code"] == [[], [], printed]
    assert student.cells[1].execution_count is None
    assert len(nb.cells) == 7 and nb.cells[1].outputs == printed  # the original is untouched


def test_misplaced_check_cell_is_a_value_error():
    nb = _nb(nbformat.v4.new_markdown_cell("text"), _code('check_exercise("ch00-x", f)', ["check"]))
    with pytest.raises(ValueError, match="ch00-x: expected the exercise text, a 'stub' cell and a 'solution' cell"):
        editions.coding_exercises(nb)


def test_unknown_edition_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="edition must be one of"):
        editions.make_edition("teacher", NOTEBOOKS[:1], tmp_path)


@pytest.fixture(scope="module")
def student_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("student")
    assert editions.main(["student", "--out", str(out)]) == 0
    return out


def test_instructor_edition_is_the_stored_notebooks(tmp_path):
    written = editions.make_edition("instructor", NOTEBOOKS, tmp_path)
    for path, target in zip(NOTEBOOKS, written):
        assert nbformat.read(target, as_version=4) == nbformat.read(path, as_version=4)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_student_edition_has_no_solutions(path, student_dir):
    original = nbformat.read(path, as_version=4)
    student_path = student_dir / path.relative_to(ROOT)
    raw = student_path.read_text(encoding="utf-8")
    student = nbformat.read(student_path, as_version=4)
    assert not re.search(r"\{solution\}", raw)
    assert not any("solution" in editions.tags(c) for c in student.cells)
    student_lines = {line.strip() for c in student.cells for line in c.source.splitlines()}
    for cells in editions.coding_exercises(original).values():
        # the reference implementation's own lines: those found nowhere else in the chapter (not in the
        # stub, other code or prose); a formatted line such as `weights = torch.softmax(` is not one
        shared = {line.strip() for c in original.cells if c is not cells["solution"] and "{solution}" not in c.source
                  for line in c.source.splitlines()}
        for line in cells["solution"].source.splitlines():
            if line.strip() and line.strip() not in shared:
                assert line.strip() not in student_lines, (
                    f"{path.name}: solution code left in the student edition: {line.strip()}")

    def count(nb, pattern):
        return sum(len(re.findall(pattern, c.source, re.M)) for c in nb.cells if c.cell_type == "markdown")

    assert count(student, r"^:::+\{exercise\}") == count(original, r"^:::+\{exercise\}"), "every exercise stays"
    stubs = [c for c in student.cells if "stub" in editions.tags(c)]
    checks = [c for c in student.cells if "check" in editions.tags(c)]
    assert len(stubs) == len(checks) == len(editions.coding_exercises(original))
    assert all("raise NotImplementedError" in c.source and not c.outputs for c in stubs)
    assert all(not c.outputs for c in checks)


#: seconds one cell of a student edition may take: at the quick budget (``make test``) the slowest take about a
#: minute; at the book budget a training cell may take the 25 minutes of a whole chapter
CELL_TIMEOUT = 300 if quick_mode() else 1500


def run_student_edition(student_path: Path, folder: Path):
    """Execute the student edition in a fresh kernel; a cell that times out is run once more, from the top in a
    fresh kernel. This suite has seen nbclient wait without end for the reply to a cell whose kernel sat idle
    (a lost message, not a slow cell); a cell that is truly slow or hangs times out twice and fails."""
    for attempt in (1, 2):
        nb = nbformat.read(student_path, as_version=4)
        try:
            execute_notebooks.run(nb, folder, timeout=CELL_TIMEOUT)
            return nb
        except CellTimeoutError:
            if attempt == 2:
                raise


@pytest.mark.parametrize("path", WITH_CODING, ids=[p.name for p in WITH_CODING])
def test_student_edition_runs_top_to_bottom(path, student_dir):
    """Slow (10-30 s a notebook): the stubs raise NotImplementedError, the checkers report it and go on."""
    student_path = student_dir / path.relative_to(ROOT)
    nb = run_student_edition(student_path, path.parent)
    checks = [c for c in nb.cells if "check" in editions.tags(c)]
    for cell in checks:
        text = "".join(o.get("text", "") for o in cell.outputs)
        assert "not implemented yet" in text, text
