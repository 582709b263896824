"""Print the prose word count of every chapter notebook (the length a reader reads).

A notebook's count is the number of whitespace-separated words of its markdown cells, solutions,
maths and cross-references included: the simplest count, and the one the length aim was set with.

    python -m tools.word_count                # every notebook, longest first
    python -m tools.word_count --limit 4500   # exit 1 if one is longer
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

from tools.notebook_setup import ROOT, notebooks

LIMIT = 4_500


def prose_words(markdown: str) -> int:
    """Words of one markdown cell."""
    return len(markdown.split())


def notebook_words(path: Path) -> int:
    """Prose words of every markdown cell of one notebook."""
    nb = nbformat.read(path, as_version=4)
    return sum(prose_words(cell.source) for cell in nb.cells if cell.cell_type == "markdown")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help=f"fail above this many words (the aim: {LIMIT:,})")
    args = parser.parse_args(argv)
    counts = sorted(((notebook_words(p), p.relative_to(ROOT)) for p in notebooks()), reverse=True)
    for words, path in counts:
        flag = "  over the limit" if args.limit is not None and words > args.limit else ""
        print(f"{words:6,}  {path}{flag}")
    print(f"{sum(w for w, _ in counts):6,}  in all, {len(counts)} notebooks")
    return 1 if args.limit is not None and any(w > args.limit for w, _ in counts) else 0


if __name__ == "__main__":
    sys.exit(main())
