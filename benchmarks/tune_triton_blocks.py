"""Choose the Triton FlashAttention kernels' tile sizes on this GPU: each candidate timed, the best kept.

For head sizes 64 and 128 (float16), each kernel's candidates ``(BLOCK_M, BLOCK_N, num_warps,
num_stages)`` are timed in turn with the others fixed: the forward kernel on the forward pass, the
dK/dV and dQ kernels on forward + backward (``triton.testing.do_bench``, median of its repeats), at
``--n`` tokens, batch 1, ``--heads`` heads, causal and not (the time of both added). Printed: every
candidate's milliseconds; the best of each kernel goes into ``attn_utils.triton_attention.GPU_BLOCKS``
for this process and is written as JSON (``--out``), to be copied into the module's table.

    python benchmarks/tune_triton_blocks.py [--n 8192] [--heads 4] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attn_utils.triton_attention import GPU_BLOCKS, triton_attention  # noqa: E402

CANDIDATES = {
    "forward": [(128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3), (128, 128, 8, 2), (64, 64, 4, 3),
                (128, 32, 4, 4), (64, 128, 4, 3)],
    "dkdv": [(32, 128, 4, 3), (64, 128, 8, 3), (64, 128, 4, 2), (64, 64, 4, 3), (128, 128, 8, 2)],
    "dq": [(128, 32, 4, 3), (128, 64, 8, 3), (64, 64, 4, 3), (128, 128, 8, 2), (64, 128, 4, 3)],
}


def _time(fn) -> float:
    import triton.testing

    return triton.testing.do_bench(fn, warmup=5, rep=40)


def tune(d: int, n: int, heads: int) -> dict:
    key = (2, d)
    best = dict(GPU_BLOCKS[key])
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(1, heads, n, d, device="cuda", dtype=torch.float16, generator=gen).requires_grad_()
               for _ in range(3))
    grad = torch.randn(1, heads, n, d, device="cuda", dtype=torch.float16, generator=gen)

    def forward():
        for causal in (False, True):
            with torch.no_grad():
                triton_attention(q, k, v, causal=causal)

    def forward_backward():
        for causal in (False, True):
            out, _ = triton_attention(q, k, v, causal=causal)
            torch.autograd.grad(out, (q, k, v), grad)

    for kernel, measure in (("forward", forward), ("dkdv", forward_backward), ("dq", forward_backward)):
        times = {}
        for config in CANDIDATES[kernel]:
            GPU_BLOCKS[key] = {**best, kernel: config}
            try:
                times[config] = _time(measure)
            except Exception as err:  # a config this GPU cannot run is skipped, and said so
                print(f"  d={d} {kernel} {config}: failed ({type(err).__name__})")
        best[kernel] = min(times, key=times.get)
        print(f"d={d} {kernel}: " + ", ".join(f"{c} {t:.3f} ms" for c, t in times.items()) + f"; best {best[kernel]}")
    GPU_BLOCKS[key] = best
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("tune_triton_blocks.py needs a CUDA GPU")
    print(f"tuning on {torch.cuda.get_device_name(0)}, n = {args.n}, {args.heads} heads, float16")
    chosen = {d: tune(d, args.n, args.heads) for d in (64, 128)}
    if args.out:
        Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(0), "n": args.n,
                                              "heads": args.heads,
                                              "blocks": {str(d): b for d, b in chosen.items()}}, indent=1))
    return chosen


if __name__ == "__main__":
    main()
