"""Execute notebooks in place, top to bottom, and report how long each took.

Notebooks are stored with their outputs; this is how those outputs are made, at the training
budget the environment selects (``make execute`` sets the book budget, ``ATTN_UTILS_QUICK=0``).
Widget state is saved into the notebook so the rendered book can show widgets without a kernel.

    python -m tools.execute_notebooks                  # every chapter
    python -m tools.execute_notebooks chapters/part1_intuition/01_attention_cues.ipynb
    python -m tools.execute_notebooks --no-store --record times.json NOTEBOOK   # time only (e.g. on a GPU)

``--record`` writes each notebook's seconds, with the device and budget, to a JSON file (one per run):
how the budget cells learn what the book budget takes on another machine.
"""

from __future__ import annotations

import argparse
import json
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


def execute(path: Path, timeout: int = 1500, store: bool = True) -> float:
    """Execute the notebook at ``path``, store its outputs in the file (unless ``store=False``), and return
    the seconds taken."""
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    run(nb, path.parent, timeout)
    seconds = time.perf_counter() - start
    if store:
        nbformat.write(nb, path)
    return seconds


def record(path: Path, seconds: dict) -> None:
    """Write ``{notebook: seconds}`` with the device the notebooks ran on and the budget, as JSON."""
    from attn_utils.device import get_device
    from attn_utils.measure import environment

    path.write_text(json.dumps({**environment(get_device()), "budget": budget_name(), "seconds": seconds},
                               indent=1) + "\n", encoding="utf-8")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--no-store", action="store_true", help="run and time only; leave the files as they are")
    parser.add_argument("--record", type=Path, default=None, help="write the seconds per notebook to this JSON file")
    args = parser.parse_args(argv)
    over, seconds_by_path = [], {}
    print(f"executing at the {budget_name()}", flush=True)
    for path in [p.resolve() for p in args.paths] or notebooks():
        seconds = execute(path, store=not args.no_store)
        seconds_by_path[str(path.relative_to(ROOT))] = round(seconds, 1)
        if args.record:
            record(args.record, seconds_by_path)
        flag = "" if seconds <= BUDGET_SECONDS else f"  (over the {BUDGET_SECONDS} s budget)"
        print(f"{seconds:7.1f} s  {path.relative_to(ROOT)}{flag}", flush=True)
        if seconds > BUDGET_SECONDS:
            over.append(path)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
