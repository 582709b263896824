"""tools.execute_cells: runs the setup cell, the context cells and the chosen cells in a fresh
kernel, stores only the chosen cells' outputs, and renumbers the execution counts."""

import nbformat
import pytest

from tools.execute_cells import execute_cells, renumber


def _notebook(tmp_path, sources):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Title")]
    nb.cells += [nbformat.v4.new_code_cell(s, execution_count=7) for s in sources]
    path = tmp_path / "chapter.ipynb"
    nbformat.write(nb, path)
    return path


def _stdout(cell):
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def test_runs_setup_and_context_first_and_stores_only_the_chosen_cells(tmp_path):
    path = _notebook(tmp_path, ["base = 10", "extra = 5\nprint('context ran')",
                                "print('not chosen')", "print(base + extra)"])
    execute_cells(path, [4], context=[2])
    nb = nbformat.read(path, as_version=4)
    assert _stdout(nb.cells[4]) == "15\n"
    assert nb.cells[2].outputs == [] and nb.cells[3].outputs == []  # kept as stored
    assert [c.execution_count for c in nb.cells[1:]] == [1, 2, 3, 4]


def test_an_error_leaves_the_file_unchanged(tmp_path):
    path = _notebook(tmp_path, ["base = 10", "print(undefined_name)"])
    before = path.read_text()
    with pytest.raises(SystemExit, match="NameError"):
        execute_cells(path, [2])
    assert path.read_text() == before


def test_a_markdown_cell_is_refused(tmp_path):
    path = _notebook(tmp_path, ["base = 10"])
    with pytest.raises(SystemExit, match="not a code cell"):
        execute_cells(path, [0])


def test_renumber_skips_empty_cells_and_numbers_results():
    nb = nbformat.v4.new_notebook()
    result = nbformat.v4.new_output("execute_result", data={"text/plain": "3"}, execution_count=9)
    nb.cells = [nbformat.v4.new_code_cell("1", execution_count=5), nbformat.v4.new_code_cell(""),
                nbformat.v4.new_code_cell("3", execution_count=2, outputs=[result])]
    renumber(nb)
    assert [c.execution_count for c in nb.cells] == [1, None, 2]
    assert nb.cells[2].outputs[0].execution_count == 2
