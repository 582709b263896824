"""Format the chapters' code cells with ``ruff format`` (88 characters a line, ``chapters/ruff.toml``).

Before ruff runs, a trailing comment that would make ruff split its statement goes on a line of its
own above the statement. ``ruff format`` keeps a trailing comment where it is and splits the
expression around it instead (``return x.squeeze(`` / ``-1`` / ``)  # (batch, src)``); with the
comment above, the statement stays on one line when it fits. A trailing comment moves when its
statement spans several lines (the comment on its first or last line) or when its line is longer
than the line length; comments inside a split statement (one per element), ``# noqa``, ``# type:``
and ``# fmt:`` comments stay. The statement's trailing commas go with the comment, so that ruff
joins what fits and splits again (adding them back) what does not. Every code cell's syntax tree is
checked to be unchanged.

A coding exercise shows its solution cell's code again in its ``{solution}`` block, and a test holds
the two equal; formatting the cell alone would break that, so the block's copy is rewritten with the
cell. Python shown in the prose (a ```` ```python ```` block of a markdown cell, e.g. a written
exercise's solution) is formatted the same way, so it fits the page's code box too; a block that
does not parse is left as it is. Lines that the formatter cannot shorten (long strings and comments)
are left for ``ruff check`` (E501) to report.

    python -m tools.format_notebooks          # format every chapter
    python -m tools.format_notebooks --check  # exit 1 if any chapter would change
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import nbformat

from tools import editions
from tools.notebook_setup import ROOT, notebooks

RUFF_CONFIG = ROOT / "chapters" / "ruff.toml"
# Comments that act on the line they are on.
KEEP_IN_PLACE = re.compile(r"#\s*(noqa|type:|fmt:|pragma)", re.IGNORECASE)
CLOSING = {")", "]", "}"}
SKIPPED = {tokenize.NL, tokenize.COMMENT}


def line_length() -> int:
    match = re.search(r"^line-length\s*=\s*(\d+)", RUFF_CONFIG.read_text(encoding="utf-8"), re.MULTILINE)
    return int(match.group(1))


def _logical_lines(tokens):
    """Each logical line (a statement, or a compound statement's header) as its list of tokens."""
    current = []
    for tok in tokens:
        if not current and tok.type in {tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT,
                                        tokenize.NEWLINE, tokenize.ENDMARKER, tokenize.ENCODING}:
            continue
        current.append(tok)
        if tok.type in {tokenize.NEWLINE, tokenize.ENDMARKER}:
            yield current
            current = []
    if current:
        yield current


def _syntax(source: str) -> str | None:
    try:
        return ast.dump(ast.parse(source))
    except SyntaxError:
        return None


def _edit(source: str, limit: int, keep: frozenset = frozenset()) -> tuple[str, list]:
    """The edited source and the trailing commas it removed (all but those in ``keep``)."""
    lines = source.splitlines(keepends=True)
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    removed: dict[int, int] = {}  # row -> column where its moved comment starts
    commas: list[tuple[int, int]] = []
    above: dict[int, list[str]] = {}  # row -> comments to put above it
    for logical in _logical_lines(tokens):
        first = logical[0]
        start, end = first.start[0], logical[-1].start[0]
        indent = lines[start - 1][: first.start[1]]
        if indent.strip():  # the statement does not start its line (after a ";")
            continue
        comments = [t for t in logical if t.type == tokenize.COMMENT]
        movable = [t for t in comments if t.start[0] in (start, end) and not KEEP_IN_PLACE.match(t.string)]
        too_long = len(lines[start - 1].rstrip("\r\n")) > limit
        if not movable or (end == start and not too_long):
            continue
        for t in movable:
            removed[t.start[0]] = t.start[1]
            above.setdefault(start, []).append(indent + t.string)
        if len(movable) == len(comments):
            code = [t for t in logical if t.type not in SKIPPED]
            for tok, after in zip(code, code[1:]):
                trailing = tok.type == tokenize.OP and tok.string == "," and after.string in CLOSING
                if trailing and tok.start not in keep:
                    commas.append(tok.start)
    for row, col in sorted(commas, reverse=True):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + line[col + 1:]
    for row, col in removed.items():
        line = lines[row - 1]
        ending = line[len(line.rstrip("\r\n")):] or "\n"
        shift = sum(1 for r, c in commas if r == row and c < col)
        lines[row - 1] = line[: col - shift].rstrip() + ending
    for row in sorted(above, reverse=True):
        lines[row - 1:row - 1] = [comment + "\n" for comment in above[row]]
    return "".join(lines), commas


def comments_above(source: str, limit: int | None = None) -> str:
    """``source`` with each trailing comment that splits its statement moved onto its own line above it.

    The syntax tree stays the same: a trailing comma whose removal would change it (a one-element
    tuple) stays; a cell that does not parse is returned unchanged.
    """
    limit = line_length() if limit is None else limit
    before = _syntax(source)
    if before is None:
        return source
    try:
        edited, commas = _edit(source, limit)
        if _syntax(edited) != before:  # keep each comma that matters
            keep = frozenset(c for c in commas
                             if _syntax(_edit(source, limit, frozenset(commas) - {c})[0]) != before)
            edited = _edit(source, limit, keep)[0]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return source
    return edited if _syntax(edited) == before else source


def _code_trees(nb) -> list[str | None]:
    return [_syntax(c.source) for c in nb.cells if c.cell_type == "code"]


def move_comments(path: Path, write: bool = True) -> bool:
    """Apply ``comments_above`` to every code cell of ``path``; True when a cell changes."""
    nb = nbformat.read(path, as_version=4)
    limit = line_length()
    changed = False
    for cell in nb.cells:
        if cell.cell_type == "code":
            new = comments_above(cell.source, limit)
            if new != cell.source:
                cell.source = new
                changed = True
    if changed and write:
        nbformat.write(nb, path)
    return changed


PROSE_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def format_python(source: str, limit: int | None = None) -> str:
    """``source`` as ``make format`` formats a code cell (comments above, then ruff); unchanged when it
    does not parse or formatting would change its syntax tree."""
    before = _syntax(source)
    if before is None:
        return source
    done = subprocess.run([sys.executable, "-m", "ruff", "format", "--config", str(RUFF_CONFIG), "-"],
                          input=comments_above(source, limit), capture_output=True, text=True)
    if done.returncode != 0 or _syntax(done.stdout) != before:
        return source
    return done.stdout


def format_prose_blocks(path: Path, write: bool = True) -> bool:
    """Format every ```` ```python ```` block of the markdown cells of ``path``; True when one changes."""
    nb = nbformat.read(path, as_version=4)
    limit = line_length()
    changed = False
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        new = PROSE_BLOCK.sub(lambda m: "```python\n" + format_python(m.group(1), limit) + "```", cell.source)
        if new != cell.source:
            cell.source = new
            changed = True
    if changed and write:
        nbformat.write(nb, path)
    return changed


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
    ruff = [sys.executable, "-m", "ruff", "format", "--config", str(RUFF_CONFIG)]
    if args.check:
        moving = [path for path in paths if move_comments(path, write=False)]
        for path in moving:
            print(f"Would move trailing comments above their statements: {path.relative_to(ROOT)}")
        prose = [path for path in paths if format_prose_blocks(path, write=False)]
        for path in prose:
            print(f"Would format the Python blocks of its markdown: {path.relative_to(ROOT)}")
        return subprocess.run([*ruff, "--check", *map(str, paths)]).returncode or int(bool(moving or prose))
    before = {path: _solution_sources(path) for path in paths}
    trees = {path: _code_trees(nbformat.read(path, as_version=4)) for path in paths}
    for path in paths:
        move_comments(path)
    subprocess.run([*ruff, *map(str, paths)], check=True)
    for path in paths:
        if _code_trees(nbformat.read(path, as_version=4)) != trees[path]:
            raise SystemExit(f"{path.name}: formatting changed the syntax tree of a code cell")
        _sync_solution_blocks(path, before[path])
        format_prose_blocks(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
