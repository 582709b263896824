"""Measuring attention: the memory it keeps for backward, its peak allocation, and its time.

* :func:`saved_tensor_bytes` counts the bytes autograd saves for the backward pass, through
  ``torch.autograd.graph.saved_tensors_hooks``: deterministic, on any device. Tensors that share
  storage (a tensor and its transpose, a tensor saved by two operations) count once.
* :func:`peak_memory_bytes` is the peak of memory allocated while a function runs, above what was
  allocated before: ``torch.cuda.max_memory_allocated`` on CUDA, the allocations and frees recorded
  by ``torch.profiler`` (operation by operation) elsewhere.
* :func:`attention_memory` applies both to an attention function at one sequence length.
* :func:`interleaved_times` and :func:`interleaved_medians` time several functions in turn within
  every repeat (as the repository's benchmarks do), so all see the same machine load.
* :func:`loglog_slope` reads the exponent of a cost's growth from such measurements, and
  :func:`environment` what a stored measurement must say about where it was taken.

The scores of a model (and ``spread``, a number over several seeds) are in ``attn_utils.metrics``.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import statistics
import sys
import time

import torch

from .checks import check_bool, check_device, check_non_negative_int, check_positive_int, check_seed, is_finite_number


def _check_callable(name: str, fn) -> None:
    if not callable(fn):
        raise ValueError(f"{name} must be a function, got {type(fn).__name__} {fn!r:.40}")


def saved_tensor_bytes(fn, *inputs) -> int:
    """Bytes of the distinct storages that autograd saves for backward while ``fn(*inputs)`` runs (``fn``: a
    function).

    Inputs that ``fn`` saves count too (a matrix product saves both factors).
    """
    _check_callable("fn", fn)
    storages: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*inputs)
    return sum(storages.values())


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


@contextlib.contextmanager
def _quiet_stderr():
    """Silence what C++ code writes to the process's stderr (the profiler's start and stop notes)."""
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no file descriptor 2 to redirect
        yield
        return
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def peak_memory_bytes(fn, device) -> int:
    """Peak bytes allocated while ``fn()`` runs, above the memory allocated when it starts (``device``: a device or
    its name)."""
    _check_callable("fn", fn)
    device = check_device("device", device)
    if device.type == "cuda":
        _synchronize(device)
        start = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        _synchronize(device)
        return torch.cuda.max_memory_allocated(device) - start
    from torch.profiler import ProfilerActivity, profile

    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted(prof.events(), key=lambda e: e.time_range.start)  # allocations (+) and frees (-) in order
    return max(itertools.accumulate((e.self_device_memory_usage if device.type != "cpu" else e.self_cpu_memory_usage)
                                    for e in events), default=0)


def attention_inputs(n: int, batch: int = 1, heads: int = 4, d: int = 64, device="cpu", dtype=torch.float32,
                     seed: int = 0):
    """Queries, keys and values (batch, heads, n, d) drawn from a seeded generator, requiring gradients: the sizes
    positive ints, ``dtype`` a floating-point dtype, ``seed`` an int."""
    for name, value in (("n", n), ("batch", batch), ("heads", heads), ("d", d)):
        check_positive_int(name, value)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
    device = check_device("device", device)
    gen = torch.Generator().manual_seed(check_seed("seed", seed))
    return [torch.randn(batch, heads, n, d, generator=gen, dtype=dtype).to(device).requires_grad_()
            for _ in range(3)]


def attention_memory(fn, n: int, batch: int = 1, heads: int = 4, d: int = 64, device="cpu",
                     dtype=torch.float32, backward: bool = True) -> dict:
    """Memory of ``fn(q, k, v)`` (its output, or the first of the tuple it returns) at length ``n``.

    Returns ``{"n", "saved_bytes", "peak_bytes", "map_bytes"}``: the bytes saved for backward, the
    peak allocation of forward (+ backward of ``output.sum()`` when ``backward``) above the inputs, and
    for comparison the size of one (batch, heads, n, n) map in ``dtype``. Sizes and ``dtype`` as
    ``attention_inputs`` takes them; ``fn`` returns a tensor (or a tuple starting with one).
    """
    _check_callable("fn", fn)
    check_bool("backward", backward)
    q, k, v = attention_inputs(n, batch, heads, d, device, dtype)

    def output():
        out = fn(q, k, v)
        out = out[0] if isinstance(out, tuple) and out else out
        if not isinstance(out, torch.Tensor):
            raise ValueError(f"fn(q, k, v) must return a tensor (or a tuple starting with one), got "
                             f"{type(out).__name__}")
        return out

    def step():
        out = output()
        if backward:
            out.sum().backward()
        del out

    saved = saved_tensor_bytes(output)
    for t in (q, k, v):
        t.grad = None
    peak = peak_memory_bytes(step, device)
    element = torch.empty((), dtype=dtype).element_size()
    return {"n": n, "saved_bytes": saved, "peak_bytes": peak, "map_bytes": batch * heads * n * n * element}


def loglog_slope(xs, ys) -> float:
    """The slope of the least-squares line through ``(log x, log y)``: the exponent p of ``y ~ x^p``. ``xs`` and
    ``ys`` are equally many (at least 2) finite numbers > 0, the ``xs`` not all equal."""
    for name, values in (("xs", xs), ("ys", ys)):
        if isinstance(values, (str, bytes)) or not hasattr(values, "__len__") or len(values) < 2 or not all(
                is_finite_number(v) and v > 0 for v in values):
            raise ValueError(f"{name} must be at least 2 finite numbers > 0 (their logarithms are taken), got "
                             f"{values!r:.80}")
    if len(xs) != len(ys):  # zip would drop the extra points
        raise ValueError(f"xs and ys must be equally many, got {len(xs)} and {len(ys)}")
    if len(set(xs)) == 1:
        raise ValueError(f"xs must not all be equal (no slope through one x), got {xs!r:.80}")
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def interleaved_times(fns, device="cpu", repeats: int = 10, warmup: int = 2) -> list[list[float]]:
    """Seconds of each of ``fns`` in every repeat: one list per function, entry i from repeat i. The
    functions run in turn within every repeat, so all see the same load. ``fns``: a list of functions of no
    argument; ``repeats`` a positive int, ``warmup`` an int >= 0."""
    if not isinstance(fns, (list, tuple)) or not all(callable(fn) for fn in fns):
        raise ValueError(f"fns must be a list of functions (of no argument), got {fns!r:.80}")
    check_positive_int("repeats", repeats)
    check_non_negative_int("warmup", warmup)
    device = check_device("device", device)
    for _ in range(warmup):
        for fn in fns:
            fn()
    times = [[] for _ in fns]
    for _ in range(repeats):
        for fn, out in zip(fns, times):
            _synchronize(device)
            start = time.perf_counter()
            fn()
            _synchronize(device)
            out.append(time.perf_counter() - start)
    return times


def interleaved_medians(fns, device="cpu", repeats: int = 10, warmup: int = 2) -> list[float]:
    """Median seconds of each of ``fns``, run in turn within every repeat so all see the same load."""
    return [statistics.median(t) for t in interleaved_times(fns, device, repeats, warmup)]


def environment(device) -> dict:
    """What a stored measurement must say about where it was taken: device name, torch version, date. ``device``:
    a device or its name."""
    import datetime
    import platform

    device = check_device("device", device)
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = platform.processor() or platform.machine() or device.type
        try:  # Linux names the CPU model
            with open("/proc/cpuinfo", encoding="utf-8") as info:
                name = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
        except (OSError, StopIteration):
            pass
    return {"device_type": device.type, "device_name": name, "torch": torch.__version__,
            "cpu_threads": torch.get_num_threads(), "date": datetime.date.today().isoformat()}
