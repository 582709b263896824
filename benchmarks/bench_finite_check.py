"""What the fused attention path's check for NaN and inf costs.

``DotProductAttention(fused=True)`` sums its queries, keys and values once per call to decide whether
the inputs are finite (then ``F.scaled_dot_product_attention`` runs) or not (then the explicit path
runs, so that NaN and inf propagate as on every other path: see ``attn_utils.attention``). On an
accelerator the answer is also one host synchronisation per call. This prints, for a few shapes
(batch x heads x queries x keys, head size 64, padded keys), the forward time of the layer and of the
check alone, each divided by the time of ``F.scaled_dot_product_attention`` with the same mask,
measured in the same run (1.00 = as fast).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import interleaved_medians

from attn_utils import DotProductAttention, get_device
from attn_utils.attention import all_finite

SHAPES = [(32, 4, 64, 64), (8, 4, 256, 256), (2, 4, 1024, 1024), (8, 4, 1, 1024)]  # the last: one decode step


@torch.no_grad()
def time_one_shape(layer, q, k, v, mask, device, repeats):
    """Median seconds of SDPA, the layer and the check alone, interleaved; the layer checked against SDPA first."""
    torch.testing.assert_close(layer(q, k, v, mask), F.scaled_dot_product_attention(q, k, v, mask))
    return interleaved_medians([lambda: F.scaled_dot_product_attention(q, k, v, mask), lambda: layer(q, k, v, mask),
                                lambda: all_finite(q, k, v)], device, repeats=repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    device = get_device(args.device)
    layer = DotProductAttention(0.0)
    print(f"device: {device}, torch {torch.__version__}")
    print(f"{'batch x heads x Q x K':>22} {'SDPA (ms)':>10} {'layer / SDPA':>13} {'check / SDPA':>13}")
    for batch, heads, n_q, n_k in SHAPES:
        gen = torch.Generator().manual_seed(0)
        q = torch.randn(batch, heads, n_q, 64, generator=gen).to(device)
        k, v = (torch.randn(batch, heads, n_k, 64, generator=gen).to(device) for _ in range(2))
        lengths = torch.randint(n_k // 2, n_k + 1, (batch,), generator=gen).to(device)
        mask = (torch.arange(n_k, device=device) < lengths[:, None])[:, None, None, :]  # (batch, 1, 1, K)
        sdpa, ours, check = time_one_shape(layer, q, k, v, mask, device, args.repeats)
        print(f"{f'{batch} x {heads} x {n_q} x {n_k}':>22} {sdpa * 1e3:10.3f} {ours / sdpa:13.2f} {check / sdpa:13.2f}")


if __name__ == "__main__":
    main()
