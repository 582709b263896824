"""Attention time against sequence length: explicit, tiled in plain PyTorch, and torch's fused SDPA.

For each length n (batch, heads and d fixed) the same queries, keys and values go through

* ``explicit`` — ``attn_utils.DotProductAttention(fused=False)``: scores, masked softmax, weighted sum;
* ``tiled`` — ``attn_utils.tiled_attention(recompute=True)``: FlashAttention's algorithm as Python loops;
* ``sdpa`` — ``torch.nn.functional.scaled_dot_product_attention`` (torch picks its fused backend);

checked to give the same output, then timed forward only and forward + backward, interleaved in the
same run. Printed: SDPA's median time, every time divided by SDPA's (above 1 = slower than SDPA), and
the achieved GFLOP/s, counting 4 b h n^2 d FLOPs for the forward pass (two matrix products of
2 b h n^2 d each) and 2.5 times as many for the backward (five products, with the recomputation of
the scores, as FlashAttention-2 counts them).

On CUDA it also lists which SDPA backends run on these inputs (flash, memory-efficient, cuDNN, math,
through ``torch.nn.attention.sdpa_kernel``), times each, and reports the fraction of the device's peak
dense float16/bfloat16 tensor throughput: the datasheet value for known GPUs (``PEAK_TFLOPS``) or
``--peak-tflops``. On CUDA the inputs are float16 by default (the fused kernels' type); float32 on CPU.

    python benchmarks/bench_fast_attention.py [--device cpu|cuda] [--lengths 256 512 ...]
        [--out benchmarks/results/NAME.json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from functools import partial
from pathlib import Path

import torch
from torch.nn import functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attn_utils import DotProductAttention, environment, get_device, interleaved_medians, tiled_attention  # noqa: E402
from attn_utils.measure import attention_inputs  # noqa: E402

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


def forward_flops(batch, heads, n, d) -> float:
    return 4.0 * batch * heads * n * n * d


def sdpa_backends(q, k, v):
    """{backend name: True if SDPA runs on these inputs with only that backend enabled}."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    found = {}
    for name in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"):
        backend = getattr(SDPBackend, name, None)
        if backend is None:
            continue
        try:
            with sdpa_kernel(backend):
                F.scaled_dot_product_attention(q, k, v)
            found[name.lower()] = True
        except RuntimeError:
            found[name.lower()] = False
    return found


def run(device, lengths, batch, heads, d, block_size, dtype, repeats, peak):
    explicit = DotProductAttention(0.0, fused=False).eval()
    impls = {
        "sdpa": F.scaled_dot_product_attention,
        "explicit": explicit,
        "tiled": lambda q, k, v: tiled_attention(q, k, v, block_size_q=block_size, block_size_k=block_size,
                                                 recompute=True)[0],
    }
    rows = []
    print(f"{'n':>6} {'pass':>9} {'sdpa (ms)':>10} {'explicit/sdpa':>14} {'tiled/sdpa':>11} "
          + " ".join(f"{name + ' GFLOP/s':>17}" for name in impls) + ("   sdpa % of peak" if peak else ""))
    for n in lengths:
        q, k, v = attention_inputs(n, batch, heads, d, device, dtype)
        with torch.no_grad():
            outs = {name: fn(q, k, v) for name, fn in impls.items()}
        for name, out in outs.items():  # the same numbers, or the timing means nothing
            tol = 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-4
            torch.testing.assert_close(out, outs["sdpa"], atol=tol, rtol=tol, msg=f"{name} differs from SDPA")
        row = {"n": n}
        for label, factor in (("forward", 1.0), ("fwd+bwd", 3.5)):
            if label == "forward":
                fns = [partial(_no_grad, fn, q, k, v) for fn in impls.values()]
            else:
                fns = [partial(_forward_backward, fn, q, k, v) for fn in impls.values()]
            times = interleaved_medians(fns, device, repeats=repeats, warmup=1)
            flops = factor * forward_flops(batch, heads, n, d)
            gflops = [flops / t / 1e9 for t in times]
            row[label] = {"seconds": dict(zip(impls, times)), "gflops": dict(zip(impls, gflops)),
                          "ratio_to_sdpa": {name: t / times[0] for name, t in zip(impls, times)}}
            text = (f"{n:>6} {label:>9} {times[0] * 1e3:10.2f} {times[1] / times[0]:14.2f} {times[2] / times[0]:11.2f} "
                    + " ".join(f"{g:17.1f}" for g in gflops))
            if peak:
                row[label]["sdpa_fraction_of_peak"] = gflops[0] / (peak * 1e3)
                text += f"   {100 * gflops[0] / (peak * 1e3):14.1f}"
            print(text)
        if device.type == "cuda":
            row["backends"] = _time_backends(q, k, v, device, repeats)
        rows.append(row)
    return rows


def _forward_backward(fn, q, k, v):
    fn(q, k, v).sum().backward()


def _no_grad(fn, q, k, v):
    with torch.no_grad():
        return fn(q, k, v)


def _sdpa_with(backend, q, k, v):
    from torch.nn.attention import sdpa_kernel

    with torch.no_grad(), sdpa_kernel(backend):
        F.scaled_dot_product_attention(q, k, v)


def _time_backends(q, k, v, device, repeats):
    from torch.nn.attention import SDPBackend

    available = sdpa_backends(q, k, v)
    result = {}
    for name, ok in available.items():
        if not ok:
            result[name] = None
            continue

        call = partial(_sdpa_with, getattr(SDPBackend, name.upper()), q, k, v)
        result[name] = interleaved_medians([call], device, repeats=repeats, warmup=1)[0]
    print("       SDPA backends, forward ms: " + ", ".join(
        f"{name} {'not available' if t is None else f'{t * 1e3:.3f}'}" for name, t in result.items()))
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="cpu, cuda or mps (default: the best available)")
    parser.add_argument("--lengths", type=int, nargs="+", default=None,
                        help="sequence lengths (default 256 512 1024 2048 on CPU, up to 16384 on CUDA)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--block-size", type=int, default=128)
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
          f"tiles of {args.block_size}" + (f"; peak {peak} TFLOP/s" if peak else ""))
    rows = run(device, lengths, args.batch, args.heads, args.d, args.block_size, dtype, args.repeats, peak)
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
