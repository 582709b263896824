"""What the benchmarks share: a small timer (median of repeated runs, synchronising accelerators) and
``write_record``, which stores a run's results as JSON.

The timing loop itself is ``attn_utils.measure.interleaved_medians`` (chapter 11.2 times with it in
the notebook); the benchmarks keep their larger default numbers of repeats.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from attn_utils import measure


def median_seconds(fn, device: torch.device, repeats: int = 30, warmup: int = 5) -> float:
    """Median wall time of ``fn()`` over ``repeats`` runs after ``warmup`` untimed ones."""
    return measure.interleaved_medians([fn], device, repeats=repeats, warmup=warmup)[0]


def interleaved_medians(fns, device: torch.device, repeats: int = 30, warmup: int = 5) -> list[float]:
    """Median times of each of ``fns``, run in turn within every repeat so all see the same machine load."""
    return measure.interleaved_medians(fns, device, repeats=repeats, warmup=warmup)


def write_record(path, record: dict) -> None:
    """Write ``record`` as indented JSON to ``path`` (its folder created if needed) and say where."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"written to {out}")
