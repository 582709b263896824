"""Scoring functions: the explicit scaled dot product against the fused kernel, and every layer's cost.

Part 1 prints, for several sizes, the time of ``DotProductAttention(fused=False)`` (scores,
masked softmax, weighted sum) divided by that of the default fused path
(``F.scaled_dot_product_attention``), forward only and forward + backward, both measured in the
same run (above 1 = the fused path is faster). Part 2 prints each scoring layer's forward time
divided by the fused dot product's.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import interleaved_medians, median_seconds

from attn_utils import (
    AdditiveAttention,
    ConcatAttention,
    CosineAttention,
    DotProductAttention,
    GeneralAttention,
    LocationAttention,
    get_device,
)


def inputs(batch, n, d, device, grad=False):
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(batch, n, d, generator=gen).to(device).requires_grad_(grad) for _ in range(3))
    lengths = torch.randint(1, n + 1, (batch,), generator=gen).to(device)
    return q, k, v, lengths


def paired_medians(fn_a, fn_b, device, repeats=30, warmup=5):
    """Median times of ``fn_a`` and ``fn_b`` run alternately, so both see the same machine load."""
    return tuple(interleaved_medians([fn_a, fn_b], device, repeats, warmup))


def forward_backward(layer, *args):
    layer(*args).sum().backward()


def explicit_vs_fused(device, sizes):
    print(f"{'batch x n x d':>16} {'fused fwd (ms)':>15} {'explicit/fused fwd':>19} {'explicit/fused fwd+bwd':>23}")
    for batch, n, d in sizes:
        fused, explicit = DotProductAttention(0.0), DotProductAttention(0.0, fused=False)
        qkv_lengths = inputs(batch, n, d, device)
        with torch.no_grad():
            t_fused, t_explicit = paired_medians(partial(fused, *qkv_lengths), partial(explicit, *qkv_lengths), device)
        qkv_lengths = inputs(batch, n, d, device, grad=True)
        b_fused, b_explicit = paired_medians(partial(forward_backward, fused, *qkv_lengths),
                                             partial(forward_backward, explicit, *qkv_lengths), device, repeats=15)
        print(f"{f'{batch} x {n} x {d}':>16} {t_fused * 1e3:15.3f} {t_explicit / t_fused:19.2f} "
              f"{b_explicit / b_fused:23.2f}")


def every_layer(device, batch=16, n=128, d=64, hidden=64):
    layers = {
        "dot (fused)": DotProductAttention(0.0),
        "dot (explicit)": DotProductAttention(0.0, fused=False),
        "additive": AdditiveAttention(hidden, 0.0),
        "general": GeneralAttention(),
        "concat": ConcatAttention(hidden),
        "cosine": CosineAttention(),
        "location": LocationAttention(n),
    }
    q, k, v, lengths = inputs(batch, n, d, device)
    times = {}
    with torch.no_grad():
        for name, layer in layers.items():
            layer.to(device).eval()
            layer(q, k, v, lengths)  # materialise lazy parameters
            times[name] = median_seconds(partial(layer, q, k, v, lengths), device, repeats=15)
    print(f"\nforward time / fused dot product, batch {batch}, {n} queries and keys, d = {d}, hidden = {hidden}")
    for name, t in times.items():
        print(f"{name:>16} {t / times['dot (fused)']:7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default=None)
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads for torch (1 gives steadier numbers on a busy machine)")
    args = parser.parse_args()
    device = get_device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"device: {device}, torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    sizes = [(64, 32, 32), (16, 128, 64), (16, 256, 64), (4, 1024, 64)]
    if device.type != "cpu":
        sizes += [(8, 4096, 64)]
    explicit_vs_fused(device, sizes)
    every_layer(device)


if __name__ == "__main__":
    main()
