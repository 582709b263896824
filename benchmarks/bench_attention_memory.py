"""Memory of attention against sequence length: the n x n map, or O(n) without it.

For each length n (batch, heads and d fixed), four implementations of ``softmax(Q K^T / sqrt(d)) V``:

* ``explicit`` — ``attn_utils.DotProductAttention(fused=False)``: scores, masked softmax, weighted sum;
* ``sdpa`` — ``torch.nn.functional.scaled_dot_product_attention`` (torch's fused kernels);
* ``tiled`` — ``attn_utils.tiled_attention``, autograd through the loops over tiles;
* ``tiled+recompute`` — ``attn_utils.tiled_attention(recompute=True)``, FlashAttention's backward.

Printed: the bytes autograd saves for backward (``torch.autograd.graph.saved_tensors_hooks``) and the
peak allocation of forward + backward above the inputs (``torch.cuda.max_memory_allocated`` on CUDA,
``torch.profiler`` elsewhere), in MiB, and the slope of each column on log-log axes (2 = grows as
n^2, 1 = as n).

    python benchmarks/bench_attention_memory.py [--device cpu|cuda] [--lengths 256 512 ...]
        [--out benchmarks/results/NAME.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from torch.nn import functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attn_utils import DotProductAttention, attention_memory, environment, get_device, loglog_slope, tiled_attention  # noqa: E402


def implementations(block_size: int) -> dict:
    return {
        "explicit": DotProductAttention(0.0, fused=False).eval(),
        "sdpa": F.scaled_dot_product_attention,
        "tiled": lambda q, k, v: tiled_attention(q, k, v, block_size_q=block_size, block_size_k=block_size)[0],
        "tiled+recompute": lambda q, k, v: tiled_attention(q, k, v, block_size_q=block_size, block_size_k=block_size,
                                                           recompute=True)[0],
    }


def run(device, lengths, batch, heads, d, block_size, dtype):
    rows = {name: [attention_memory(fn, n, batch, heads, d, device, dtype) for n in lengths]
            for name, fn in implementations(block_size).items()}
    mib = 2 ** 20
    print(f"{'n':>6} {'n x n map':>10} " + " ".join(f"{name + ' saved/peak':>26}" for name in rows))
    for i, n in enumerate(lengths):
        cells = " ".join(f"{r[i]['saved_bytes'] / mib:12.1f} /{r[i]['peak_bytes'] / mib:12.1f}" for r in rows.values())
        print(f"{n:>6} {rows['sdpa'][i]['map_bytes'] / mib:10.1f} {cells}")
    slopes = {name: {key: loglog_slope(lengths, [x[key] for x in r]) for key in ("saved_bytes", "peak_bytes")}
              for name, r in rows.items()}
    print(f"{'slope':>17} " + " ".join(f"{s['saved_bytes']:12.2f} /{s['peak_bytes']:12.2f}" for s in slopes.values()))
    return {"rows": rows, "slopes": slopes}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="cpu, cuda or mps (default: the best available)")
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--block-size", type=int, default=128)
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--out", default=None,
                        help="write the results as JSON, e.g. benchmarks/results/memory_cuda.json")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device) if args.device else get_device()
    env = environment(device)
    print(f"attention memory, forward + backward, on {env['device_name']} ({device}), torch {env['torch']}; "
          f"batch {args.batch}, {args.heads} heads, d = {args.d}, {args.dtype}, tiles of {args.block_size}; MiB")
    result = run(device, args.lengths, args.batch, args.heads, args.d, args.block_size, getattr(torch, args.dtype))
    if args.out:
        out = Path(args.out)  # relative to the current directory: benchmarks/results/NAME.json from the repository root
        out.parent.mkdir(parents=True, exist_ok=True)
        config = {k: v for k, v in vars(args).items() if k not in ("out", "device")}
        out.write_text(json.dumps({"benchmark": "attention_memory", **env, "config": config, **result}, indent=1))
        print(f"written to {out}")


if __name__ == "__main__":
    main()
