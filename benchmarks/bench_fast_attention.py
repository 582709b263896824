"""Attention time against sequence length: explicit, tiled in plain PyTorch, torch's fused SDPA, and
the course's FlashAttention-2 kernels in Triton.

For each length n (batch, heads and d fixed) the same queries, keys and values go through

* ``explicit`` — ``attn_utils.DotProductAttention(fused=False)``: scores, masked softmax, weighted sum;
* ``tiled`` — ``attn_utils.tiled_attention(recompute=True)``: FlashAttention's algorithm as Python loops
  (on CUDA skipped above n = 4,096 unless ``--impls`` names it: its Python loop takes seconds there);
* ``sdpa`` — ``torch.nn.functional.scaled_dot_product_attention`` (torch picks its fused backend);
* ``triton`` — ``attn_utils.triton_attention.triton_attention``: FlashAttention-2's forward and backward
  kernels (CUDA only, where Triton is installed);

checked to give the same output, then timed forward only and forward + backward, interleaved in the
same run. ``--impls`` picks which (SDPA always runs: every ratio is to it); ``--causal`` masks the
future. Printed: SDPA's median time, every time divided by SDPA's (above 1 = slower than SDPA), and
the achieved GFLOP/s, counting 4 b h n^2 d FLOPs for the forward pass (two matrix products of
2 b h n^2 d each; half that under ``--causal``, whose upper triangle is skipped) and 2.5 times as many
for the backward (five products, with the recomputation of the scores, as FlashAttention-2 counts them).

On CUDA it also lists which SDPA backends run on these inputs (flash, memory-efficient, cuDNN, math,
through ``torch.nn.attention.sdpa_kernel``), times each forward and forward + backward, prints the
Triton kernels' time over the best backend's (the goals: at most 1.2 forward and 1.5 forward + backward
for n >= 4,096), and reports the fraction of the device's peak dense float16/bfloat16 tensor
throughput: the datasheet value for known GPUs (``PEAK_TFLOPS``) or ``--peak-tflops``. On CUDA the
inputs are float16 by default (the fused kernels' type); float32 on CPU.

    python benchmarks/bench_fast_attention.py [--device cpu|cuda] [--lengths 256 512 ...] [--d 64]
        [--causal] [--impls sdpa triton ...] [--out benchmarks/results/NAME.json]

JSON: per length, ``forward`` and ``fwd+bwd`` with ``seconds``, ``gflops`` and ``ratio_to_sdpa`` per
implementation (NaN for one skipped at that length, also listed in ``skipped``); on CUDA ``backends``
(forward seconds per SDPA backend, None where it does not run), ``backends_fwd_bwd`` and
``triton_to_best_backend`` (ratios and which backend was best).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from functools import partial
from pathlib import Path

import torch
from torch.nn import functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attn_utils import (  # noqa: E402
    DotProductAttention,
    causal_mask,
    environment,
    get_device,
    interleaved_medians,
    tiled_attention,
)
from attn_utils.measure import attention_inputs  # noqa: E402
from attn_utils.triton_attention import triton_attention, triton_unavailable_reason  # noqa: E402

IMPLS = ("sdpa", "explicit", "tiled", "triton")
#: on CUDA, the Python loop of ``tiled`` is skipped above this length unless --impls names it
TILED_MAX_N_CUDA = 4096

# Peak dense (no sparsity) float16/bfloat16 tensor-core throughput in TFLOP/s, from NVIDIA's datasheets.
# The datasheets print twice these numbers "with sparsity"; T4 has no bfloat16 (its value is float16).
PEAK_TFLOPS: list[tuple[str, float | None]] = [
    (r"H100.*PCIe", 756.0),
    (r"H100.*NVL", None),  # not in this table: pass --peak-tflops
    (r"H100", 989.4),  # SXM5 ("NVIDIA H100 80GB HBM3")
    (r"H200", 989.4),
    (r"A100", 312.0),
    (r"\bL4\b", 121.0),
    (r"\bT4\b", 65.0),
]


def peak_tflops(name: str) -> float | None:
    """The datasheet peak for a device name, or None for a device not in the table."""
    for pattern, value in PEAK_TFLOPS:
        if re.search(pattern, name):
            return value
    return None


def forward_flops(batch, heads, n, d, causal=False) -> float:
    return 4.0 * batch * heads * n * n * d * (0.5 if causal else 1.0)


def sdpa_backends(q, k, v, causal=False):
    """{backend name: True if SDPA runs on these inputs with only that backend enabled}."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    found = {}
    for name in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"):
        backend = getattr(SDPBackend, name, None)
        if backend is None:
            continue
        try:
            with torch.no_grad(), sdpa_kernel(backend):
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            found[name.lower()] = True
        except RuntimeError:
            found[name.lower()] = False
    return found


def implementations(device, n, block_size, causal, chosen=None):
    """{name: fn(q, k, v) -> output} of the implementations to time at length n (SDPA first)."""
    explicit = DotProductAttention(0.0, fused=False).eval()
    mask = causal_mask(n, n, device=device) if causal else None
    every = {
        "sdpa": partial(F.scaled_dot_product_attention, is_causal=causal),
        "explicit": lambda q, k, v: explicit(q, k, v, mask),
        "tiled": lambda q, k, v: tiled_attention(q, k, v, causal=causal, block_size_q=block_size,
                                                 block_size_k=block_size, recompute=True)[0],
        "triton": lambda q, k, v: triton_attention(q, k, v, causal=causal)[0],
    }
    names = list(IMPLS if chosen is None else ["sdpa", *[name for name in chosen if name != "sdpa"]])
    if "triton" in names and (device.type != "cuda" or triton_unavailable_reason() is not None):
        names.remove("triton")  # the CPU would need Triton's interpreter: far too slow to time
    if chosen is None and device.type == "cuda" and n > TILED_MAX_N_CUDA:
        names.remove("tiled")  # asked for by name (--impls tiled) it runs at every length
    return {name: every[name] for name in names}


def run(device, lengths, batch, heads, d, block_size, dtype, repeats, peak, impls=None, causal=False):
    columns = [name for name in IMPLS[1:] if impls is None or name in impls]  # SDPA's time is the unit
    if "triton" in columns and (device.type != "cuda" or triton_unavailable_reason() is not None):
        print(f"triton skipped: {'it is timed on CUDA only' if device.type != 'cuda' else triton_unavailable_reason()}")
        columns.remove("triton")
    rows = []
    print(f"{'n':>6} {'pass':>9} {'sdpa (ms)':>10} " + " ".join(f"{name + '/sdpa':>14}" for name in columns) + " "
          + " ".join(f"{name + ' GFLOP/s':>17}" for name in ["sdpa", *columns]) + ("   sdpa % of peak" if peak else ""))
    for n in lengths:
        fns = implementations(device, n, block_size, causal, impls)
        names = list(fns)
        q, k, v = attention_inputs(n, batch, heads, d, device, dtype)
        with torch.no_grad():
            outs = {name: fn(q, k, v) for name, fn in fns.items()}
        for name, out in outs.items():  # the same numbers, or the timing means nothing
            tol = 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-4
            torch.testing.assert_close(out, outs["sdpa"], atol=tol, rtol=tol, msg=f"{name} differs from SDPA")
        del outs
        row = {"n": n, "skipped": [name for name in columns if name not in names]}
        for label, factor in (("forward", 1.0), ("fwd+bwd", 3.5)):
            wrap = _no_grad if label == "forward" else _forward_backward
            times = interleaved_medians([partial(wrap, fn, q, k, v) for fn in fns.values()], device,
                                        repeats=repeats, warmup=1)
            seconds = dict(zip(names, times)) | dict.fromkeys(row["skipped"], float("nan"))
            flops = factor * forward_flops(batch, heads, n, d, causal)
            row[label] = {"seconds": seconds, "gflops": {name: flops / t / 1e9 for name, t in seconds.items()},
                          "ratio_to_sdpa": {name: t / seconds["sdpa"] for name, t in seconds.items()}}
            gflops = row[label]["gflops"]
            text = (f"{n:>6} {label:>9} {seconds['sdpa'] * 1e3:10.2f} "
                    + " ".join(_cell(row[label]["ratio_to_sdpa"][name], 14, 2) for name in columns) + " "
                    + " ".join(_cell(gflops[name], 17, 1) for name in ["sdpa", *columns]))
            if peak:
                row[label]["sdpa_fraction_of_peak"] = gflops["sdpa"] / (peak * 1e3)
                text += f"   {100 * gflops['sdpa'] / (peak * 1e3):14.1f}"
            print(text)
        if device.type == "cuda":
            row["backends"] = _time_backends(q, k, v, device, repeats, causal, backward=False)
            row["backends_fwd_bwd"] = _time_backends(q, k, v, device, repeats, causal, backward=True)
            if "triton" in names:
                row["triton_to_best_backend"] = _to_best_backend(row)
        rows.append(row)
    return rows


def _cell(value, width, digits):
    return f"{'-':>{width}}" if value != value else f"{value:{width}.{digits}f}"  # NaN: not measured


def _forward_backward(fn, q, k, v):
    fn(q, k, v).sum().backward()


def _no_grad(fn, q, k, v):
    with torch.no_grad():
        return fn(q, k, v)


def _sdpa_with(backend, causal, backward, q, k, v):
    from torch.nn.attention import sdpa_kernel

    with sdpa_kernel(backend):
        if backward:
            F.scaled_dot_product_attention(q, k, v, is_causal=causal).sum().backward()
        else:
            with torch.no_grad():
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def _time_backends(q, k, v, device, repeats, causal=False, backward=False):
    """{backend: median seconds} of each SDPA backend that runs on these inputs (None for the others)."""
    from torch.nn.attention import SDPBackend

    result = {}
    for name, ok in sdpa_backends(q, k, v, causal).items():
        result[name] = None
        if ok:
            call = partial(_sdpa_with, getattr(SDPBackend, name.upper()), causal, backward, q, k, v)
            with contextlib.suppress(RuntimeError):  # a backend may run forward only
                result[name] = interleaved_medians([call], device, repeats=repeats, warmup=1)[0]
            q.grad = k.grad = v.grad = None
    print(f"       SDPA backends, {'fwd+bwd' if backward else 'forward'} ms: " + ", ".join(
        f"{name} {'not available' if t is None else f'{t * 1e3:.3f}'}" for name, t in result.items()))
    return result


def _to_best_backend(row):
    """The Triton kernels' time over the fastest SDPA backend's, forward and forward + backward."""
    result = {}
    for label, key in (("forward", "backends"), ("fwd+bwd", "backends_fwd_bwd")):
        timed = {name: t for name, t in row[key].items() if t is not None}
        if timed:
            best = min(timed, key=timed.get)
            result[label] = row[label]["seconds"]["triton"] / timed[best]
            result[f"{label}_best_backend"] = best
    print("       triton / best SDPA backend: " + ", ".join(
        f"{label} {result[label]:.2f} ({result[f'{label}_best_backend']})" for label in ("forward", "fwd+bwd")
        if label in result))
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="cpu, cuda or mps (default: the best available)")
    parser.add_argument("--lengths", type=int, nargs="+", default=None,
                        help="sequence lengths (default 256 512 1024 2048 on CPU, up to 16384 on CUDA)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--block-size", type=int, default=128, help="the tiles of tiled_attention")
    parser.add_argument("--causal", action="store_true", help="causal attention (each query sees the keys up to it)")
    parser.add_argument("--impls", nargs="+", choices=IMPLS, default=None,
                        help="implementations to time (SDPA always runs); default: all, triton on CUDA only, "
                             f"tiled on CUDA only up to n = {TILED_MAX_N_CUDA}")
    parser.add_argument("--dtype", default=None, choices=["float32", "float16", "bfloat16"],
                        help="default: float16 on CUDA, float32 elsewhere")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--peak-tflops", type=float, default=None,
                        help="the device's peak dense fp16/bf16 TFLOP/s (default: the datasheet table, CUDA only)")
    parser.add_argument("--out", default=None,
                        help="write the results as JSON, e.g. benchmarks/results/fast_attention_cuda.json")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device) if args.device else get_device()
    dtype = getattr(torch, args.dtype or ("float16" if device.type == "cuda" else "float32"))
    lengths = args.lengths or ([256, 512, 1024, 2048, 4096, 8192, 16384] if device.type == "cuda"
                               else [256, 512, 1024, 2048])
    env = environment(device)
    peak = args.peak_tflops or (peak_tflops(env["device_name"]) if device.type == "cuda" else None)
    print(f"attention time on {env['device_name']} ({device}, {torch.get_num_threads()} CPU threads), "
          f"torch {env['torch']}; batch {args.batch}, {args.heads} heads, d = {args.d}, {dtype}, "
          f"tiles of {args.block_size}" + ("; causal" if args.causal else "")
          + (f"; peak {peak} TFLOP/s" if peak else ""))
    rows = run(device, lengths, args.batch, args.heads, args.d, args.block_size, dtype, args.repeats, peak,
               args.impls, args.causal)
    if args.out:
        out = Path(args.out)  # relative to the current directory: benchmarks/results/NAME.json from the repository root
        out.parent.mkdir(parents=True, exist_ok=True)
        config = {k: v for k, v in vars(args).items() if k not in ("out", "device")}
        config.update(dtype=str(dtype).replace("torch.", ""), lengths=lengths)
        out.write_text(json.dumps({"benchmark": "fast_attention", **env, "config": config, "peak_tflops": peak,
                                   "rows": rows}, indent=1))
        print(f"written to {out}")


if __name__ == "__main__":
    main()
