"""Write the student and instructor editions of the chapter notebooks.

A coding exercise is four cells after its ``:::{exercise}`` text: a code cell tagged ``stub``
(the function to complete, raising ``NotImplementedError``), a code cell tagged ``solution`` (the
reference implementation, which redefines the function), a code cell tagged ``check`` (calls the
checker), and the ``:::{solution}`` dropdown. The instructor edition is the notebooks as stored.
The student edition drops every ``solution`` cell and every ``:::{solution}`` block, and clears the
outputs of the stub and check cells, so the reader's copy runs top to bottom with the checkers
printing "not implemented yet".

    python -m tools.editions student      # -> editions/student/chapters/...
    python -m tools.editions instructor   # -> editions/instructor/chapters/...
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
from pathlib import Path

import nbformat

from tools.notebook_setup import ROOT, notebooks

EDITIONS = ("student", "instructor")
OUTPUT_CLEARED = ("stub", "check")
# A colon fence opening a solution directive, up to the closing fence with the same number of colons.
SOLUTION_BLOCK = re.compile(r"^(?P<fence>:{3,})\{solution\}[^\n]*\n.*?^(?P=fence)[ \t]*$\n?", re.MULTILINE | re.DOTALL)


def tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def strip_solutions(markdown: str) -> str:
    """Markdown without its ``:::{solution}`` blocks (and without the blank lines they leave)."""
    text = SOLUTION_BLOCK.sub("", markdown)
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n")


def student_notebook(nb):
    """A copy of ``nb`` without solutions: solution cells and blocks removed, stub/check outputs cleared."""
    nb = copy.deepcopy(nb)
    cells = []
    for cell in nb.cells:
        if "solution" in tags(cell):
            continue
        if cell.cell_type == "markdown":
            cell.source = strip_solutions(cell.source)
            if not cell.source.strip():
                continue
        elif cell.cell_type == "code" and set(tags(cell)) & set(OUTPUT_CLEARED):
            cell.outputs = []
            cell.execution_count = None
        cells.append(cell)
    nb.cells = cells
    return nb


CHECK_CALL = re.compile(r"""check_exercise\(\s*["']([\w-]+)["']""")


def coding_exercises(nb) -> dict[str, dict]:
    """``{label: {"stub": cell, "solution": cell, "check": cell, "text": cell}}`` for each checked exercise.

    Raises ValueError when a check cell is not preceded by the exercise text, a stub and a solution.
    """
    found = {}
    cells = nb.cells
    for i, cell in enumerate(cells):
        if "check" not in tags(cell):
            continue
        match = CHECK_CALL.search(cell.source)
        if not match:
            raise ValueError(f"cell {cell.get('id')} is tagged 'check' but calls no check_exercise(\"label\", ...)")
        label = match.group(1)
        before = cells[max(i - 3, 0):i]
        kinds = [("markdown" if c.cell_type == "markdown" else (tags(c) or ["untagged"])[0]) for c in before]
        if kinds != ["markdown", "stub", "solution"] or f":label: {label}" not in before[0].source:
            raise ValueError(
                f"exercise {label}: expected the exercise text, a 'stub' cell and a 'solution' cell right "
                f"before its check cell, found {kinds}"
            )
        found[label] = {"text": before[0], "stub": before[1], "solution": before[2], "check": cell}
    return found


def make_edition(kind: str, paths: list[Path], out: Path) -> list[Path]:
    """Write edition ``kind`` of each notebook under ``out``, keeping its path relative to the repository."""
    if kind not in EDITIONS:
        raise ValueError(f"edition must be one of {EDITIONS}, got {kind!r}")
    written = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        if kind == "student":
            nb = student_notebook(nb)
        target = out / path.resolve().relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, target)
        written.append(target)
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("edition", choices=EDITIONS)
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks (default: every chapter)")
    parser.add_argument("--out", type=Path, help="output folder (default: editions/<edition>)")
    args = parser.parse_intermixed_args(argv)
    out = (args.out or ROOT / "editions" / args.edition).resolve()
    paths = [p.resolve() for p in args.paths] or notebooks()
    for target in make_edition(args.edition, paths, out):
        print(f"wrote {target.relative_to(out.parent) if out.parent in target.parents else target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
