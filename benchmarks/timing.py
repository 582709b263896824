"""A small timer shared by the benchmarks: median of repeated runs, synchronising accelerators."""

from __future__ import annotations

import statistics
import time

import torch


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def median_seconds(fn, device: torch.device, repeats: int = 30, warmup: int = 5) -> float:
    """Median wall time of ``fn()`` over ``repeats`` runs after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def interleaved_medians(fns, device: torch.device, repeats: int = 30, warmup: int = 5) -> list[float]:
    """Median times of each of ``fns``, run in turn within every repeat so all see the same machine load."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    times = [[] for _ in fns]
    for _ in range(repeats):
        for fn, out in zip(fns, times):
            synchronize(device)
            start = time.perf_counter()
            fn()
            synchronize(device)
            out.append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]
