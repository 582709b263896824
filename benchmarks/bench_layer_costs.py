"""One layer of each kind over a sequence, forward pass: a GRU, a causal convolution of width 3, and
single-head self-attention (chapter 8's comparison of the three, timed on one device).

For each sequence length n (batch b = 4, width d = 128, as chapter 8 times them), the three layers
run interleaved within every repeat, so all see the same machine load. Printed: the median
milliseconds per forward pass and the floating-point rate, counting a multiply-add as two
operations: 12 b n d^2 for the GRU, 6 b n d^2 for the convolution, 8 b n d^2 + 4 b n^2 d for
self-attention with its four projections. ``--out`` stores the results as JSON with the device's
name (the chapter shows the stored GPU run beside its own live CPU run).

    python benchmarks/bench_layer_costs.py [--device cpu|cuda] [--threads 1] [--lengths 16 64 256 1024]
        [--out benchmarks/results/layer_costs_cuda.json]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import interleaved_medians, write_record

from attn_utils import MultiHeadAttention, get_device
from attn_utils.measure import environment

LENGTHS = [16, 64, 256, 1024]


class CausalConv(nn.Module):
    """Width-3 convolution over (batch, n, d), padded on the left so output t reads inputs t - 2 .. t."""

    def __init__(self, d: int):
        super().__init__()
        self.conv = nn.Conv1d(d, d, kernel_size=3)

    def forward(self, X):  # (batch, n, d)
        return self.conv(F.pad(X.transpose(1, 2), (2, 0))).transpose(1, 2)


def layers(d: int, device) -> dict:
    """name -> (function of X, floating-point operations as a function of (b, n))."""
    gru, conv, attention = nn.GRU(d, d, batch_first=True).to(device), CausalConv(d).to(device), \
        MultiHeadAttention(d, 1, 0.0).to(device)
    return {
        "GRU": (lambda X: gru(X), lambda b, n: 12 * b * n * d ** 2),
        "conv k=3": (conv, lambda b, n: 6 * b * n * d ** 2),
        "self-attention": (lambda X: attention(X, X, X), lambda b, n: 8 * b * n * d ** 2 + 4 * b * n ** 2 * d),
    }


def run(device, lengths, batch: int, d: int, repeats: int) -> list[dict]:
    torch.manual_seed(0)
    timed = layers(d, device)
    print(f"{'n':>6} " + " ".join(f"{name + ' (ms)':>20}" for name in timed) + "    GFLOP/s: " + " / ".join(timed))
    results = []
    with torch.no_grad():
        for n in lengths:
            X = torch.randn(batch, n, d, device=device)
            times = interleaved_medians([lambda f=f, X=X: f(X) for f, _ in timed.values()], device, repeats=repeats,
                                        warmup=3)
            row = {"n": n}
            for (name, (_, flops)), seconds in zip(timed.items(), times):
                row[name] = {"ms": seconds * 1e3, "gflops": flops(batch, n) / seconds / 1e9}
            results.append(row)
            print(f"{n:6d} " + " ".join(f"{row[name]['ms']:20.3f}" for name in timed) + "    "
                  + " / ".join(f"{row[name]['gflops']:.1f}" for name in timed))
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="cpu, cuda or mps (default: the best available)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--lengths", type=int, nargs="+", default=LENGTHS)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--d", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--out", default=None, help="write the results as JSON to this file")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device) if args.device else get_device()
    env = environment(device)
    print(f"one layer's forward pass on {env['device_name']} ({device.type}, {torch.get_num_threads()} CPU threads), "
          f"torch {torch.__version__}; batch {args.batch}, d = {args.d}; median of {args.repeats} interleaved runs")
    results = run(device, args.lengths, args.batch, args.d, args.repeats)
    if args.out:
        write_record(args.out, {"benchmark": "layer_costs", **env,
                                "config": {"batch": args.batch, "d": args.d, "repeats": args.repeats},
                                "results": results})


if __name__ == "__main__":
    main()
