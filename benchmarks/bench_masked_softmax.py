"""masked_softmax (forward + backward) against a plain masked_fill + torch.softmax and d2l's version.

Prints, for several sizes, our time divided by each reference's time measured in the same run
(1.00 = as fast; below 1 = faster).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from timing import median_seconds

from attn_utils import get_device, masked_softmax


def plain_masked_softmax(X, valid_lens):
    """The usual two-liner: fill padding with -inf and call torch.softmax (NaN on empty rows)."""
    mask = torch.arange(X.shape[-1], device=X.device) < valid_lens[:, None, None]
    return torch.softmax(X.masked_fill(~mask, float("-inf")), dim=-1)


def forward_backward(fn, X, lengths):
    """``fn``'s forward and backward pass on ``X``, ready to time."""
    # X * 1 gives d2l's in-place masking a non-leaf tensor; the same cost for all
    return lambda: fn(X * 1, lengths).sum().backward()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default=None)
    args = parser.parse_args()
    device = get_device(args.device)
    references = {"torch.softmax+mask": plain_masked_softmax}
    try:
        from d2l_reference import load_d2l

        references["d2l.masked_softmax"] = load_d2l().masked_softmax
    except ImportError:
        print("d2l not installed: comparing with the plain version only")
    print(f"device: {device}, torch {torch.__version__}")
    print(f"{'batch x queries x keys':>24} {'ours (ms)':>10} " + " ".join(f"{'/ ' + n:>22}" for n in references))
    for batch, queries, keys in [(64, 10, 10), (64, 64, 64), (32, 256, 256), (8, 1024, 1024)]:
        X = torch.randn(batch, queries, keys, device=device, requires_grad=True)
        lengths = torch.randint(1, keys + 1, (batch,), device=device)
        ours = median_seconds(forward_backward(masked_softmax, X, lengths), device)
        ratios = [ours / median_seconds(forward_backward(fn, X, lengths), device) for fn in references.values()]
        print(f"{f'{batch} x {queries} x {keys}':>24} {ours * 1e3:10.3f} " + " ".join(f"{r:22.2f}" for r in ratios))


if __name__ == "__main__":
    main()
