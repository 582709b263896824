"""Execute notebooks in place, top to bottom, and report how long each took.

Notebooks are stored with their outputs; this is how those outputs are made, at the training
budget the environment selects (``make execute`` sets the book budget, ``ATTN_UTILS_QUICK=0``).
Widget state is saved into the notebook so the rendered book can show widgets without a kernel.

    python -m tools.execute_notebooks                  # every chapter
    python -m tools.execute_notebooks chapters/part1_intuition/01_attention_cues.ipynb
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from attn_utils.budgets import budget_name
from tools.notebook_setup import ROOT, notebooks

BUDGET_SECONDS = 25 * 60  # every chapter runs in 25 minutes on 2 idle CPU cores at the book budget


def run(nb, folder: Path, timeout: int = 1500) -> None:
    """Execute the notebook object ``nb`` in place, in a fresh kernel working in ``folder``."""
    NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(folder)}},
        store_widget_state=True,
    ).execute()


def execute(path: Path, timeout: int = 1500) -> float:
    """Execute the notebook at ``path``, store its outputs in the file, and return the seconds taken."""
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    run(nb, path.parent, timeout)
    seconds = time.perf_counter() - start
    nbformat.write(nb, path)
    return seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", type=Path)
    args = parser.parse_args(argv)
    over = []
    print(f"executing at the {budget_name()}", flush=True)
    for path in [p.resolve() for p in args.paths] or notebooks():
        seconds = execute(path)
        flag = "" if seconds <= BUDGET_SECONDS else f"  (over the {BUDGET_SECONDS} s budget)"
        print(f"{seconds:7.1f} s  {path.relative_to(ROOT)}{flag}", flush=True)
        if seconds > BUDGET_SECONDS:
            over.append(path)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
