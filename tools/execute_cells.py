"""Execute chosen cells of a notebook after its setup cell, and store their outputs.

A chapter at the book budget takes up to 25 minutes; an edited exercise or figure cell that needs
nothing from the cells above it except the setup cell (``device``) need not wait for that. This
runs, in a fresh kernel in the notebook's folder: the setup cell, the cells named with ``--with``
(e.g. the imports cell, not stored again), then the chosen cells, and stores the chosen cells'
outputs. Execution counts are then renumbered 1..N down the notebook, as a full run would number
them. A cell that needs the state of a training run above it must be run with ``make execute``.

    python -m tools.execute_cells NOTEBOOK CELL [CELL ...] [--with CELL ...]

Cells are numbered from 0 over all cells (markdown included), as nbformat lists them.
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path

import nbformat
from nbclient.exceptions import CellExecutionError

from tools.execute_notebooks import run


def renumber(nb) -> None:
    """Number the non-empty code cells 1..N in order (and their execute_result outputs)."""
    count = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if not cell.source.strip():
            cell.execution_count = None
            continue
        count += 1
        cell.execution_count = count
        for output in cell.outputs:
            if output.output_type == "execute_result":
                output.execution_count = count


def execute_cells(path: Path, cells: list[int], context: list[int] = ()) -> None:
    nb = nbformat.read(path, as_version=4)
    setup = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    for i in [*cells, *context]:
        if not 0 <= i < len(nb.cells) or nb.cells[i].cell_type != "code":
            raise SystemExit(f"cell {i} of {path} is not a code cell")
    order = [setup, *[i for i in context if i != setup], *[i for i in cells if i != setup]]
    scratch = nbformat.v4.new_notebook(metadata=copy.deepcopy(nb.metadata))
    scratch.cells = [copy.deepcopy(nb.cells[i]) for i in order]
    try:
        run(scratch, path.parent)
    except CellExecutionError as err:  # the file stays as it was
        raise SystemExit(f"{path}: a cell raised an error:\n{err}") from None
    for i, cell in zip(order, scratch.cells):
        if i in cells:
            nb.cells[i].outputs = cell.outputs
    renumber(nb)
    nbformat.write(nb, path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebook", type=Path)
    parser.add_argument("cells", nargs="+", type=int)
    parser.add_argument("--with", dest="context", nargs="*", type=int, default=[],
                        help="cells to run first whose outputs are kept as stored (e.g. imports)")
    args = parser.parse_args(argv)
    execute_cells(args.notebook.resolve(), args.cells, args.context)
    print(f"executed cells {args.cells} of {args.notebook}; execution counts renumbered")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
