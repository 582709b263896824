"""Checkers for Chapter 8 (self-attention and positional encoding): causal self-attention with
padding, and the sinusoidal positional encoding.

The expected outputs come from the tested layers: ``DotProductAttention`` with a mask built from
``causal_mask`` and ``lengths_to_mask``, and ``sinusoidal_encoding`` (computed in float64).
"""

from __future__ import annotations

import torch

from ..attention import DotProductAttention
from ..masking import causal_mask, lengths_to_mask
from ..positional import sinusoidal_encoding
from .core import Case, register, seeded_randn


@torch.no_grad()
def _causal_self_attention(X, W_q, W_k, W_v, valid_lens=None) -> torch.Tensor:
    """``softmax(Q K^T / sqrt(d_k)) V`` with ``Q = X W_q`` (and so on), query i seeing keys j <= i that
    are not padding; a sequence of length 0 gives zeros."""
    n = X.shape[1]
    mask = causal_mask(n, n, X.device)  # (n, n)
    if valid_lens is not None:
        mask = mask & lengths_to_mask(valid_lens, n)[:, None, :]  # (batch, n, n)
    return DotProductAttention(0.0, fused=False)(X @ W_q, X @ W_k, X @ W_v, mask)


@register("ch08-write-causal-self-attention")
def causal_self_attention_cases(device: torch.device) -> list[Case]:
    def case(name, X, W_q, W_k, W_v, valid_lens=None):
        args = (X, W_q, W_k, W_v) if valid_lens is None else (X, W_q, W_k, W_v, valid_lens)
        return Case(name, args, _causal_self_attention(X, W_q, W_k, W_v, valid_lens))

    d, dk, dv = 6, 4, 3
    W = [seeded_randn(d, dk, seed=1), seeded_randn(d, dk, seed=2), seeded_randn(d, dv, seed=3)]
    return [
        case("two sequences of 5 tokens, no padding (valid_lens omitted)", seeded_randn(2, 5, d, seed=4), *W),
        case("one token: it attends only to itself, so the output is x W_v", seeded_randn(3, 1, d, seed=5), *W),
        case("valid lengths (3, 5): padding keys get no weight", seeded_randn(2, 5, d, seed=6), *W,
             torch.tensor([3, 5])),
        case("a sequence of length 0 gives zeros (no NaN)", seeded_randn(2, 4, d, seed=7), *W, torch.tensor([4, 0])),
        case("large entries: the 1/sqrt(d_k) matters, the softmax must not overflow", seeded_randn(1, 6, d, seed=8),
             seeded_randn(d, 16, seed=9, scale=4.0), seeded_randn(d, 16, seed=10, scale=4.0),
             seeded_randn(d, 2, seed=11)),
        case("d_k = 1 and d_v = 5", seeded_randn(2, 4, d, seed=12), seeded_randn(d, 1, seed=13),
             seeded_randn(d, 1, seed=14), seeded_randn(d, 5, seed=15)),
    ]


def _encoding(positions: torch.Tensor, num_hiddens: int) -> torch.Tensor:
    """Rows ``positions`` of the sinusoidal encoding, from ``sinusoidal_encoding``."""
    return sinusoidal_encoding(int(positions.max()) + 1, num_hiddens)[positions]


@register("ch08-write-sinusoidal")
def sinusoidal_cases(device: torch.device) -> list[Case]:
    def case(name, positions, num_hiddens, atol=1e-5):
        return Case(name, (positions, num_hiddens), _encoding(positions, num_hiddens), atol=atol)

    return [
        case("positions 0..9, d = 8", torch.arange(10), 8),
        case("position 0 alone: sin 0 = 0 in even columns, cos 0 = 1 in odd ones", torch.tensor([0]), 6),
        case("d = 2: one pair, (sin p, cos p)", torch.arange(7), 2),
        case("positions 100..104 (decoding after 100 tokens), d = 16", torch.arange(100, 105), 16),
        case("positions in any order, repeated: [7, 3, 3, 0]", torch.tensor([7, 3, 3, 0]), 10),
        # float32 angles of positions near 1000 are off by about 1e-5 relative, hence the tolerance
        case("positions 0..999, d = 64 (float32 angles may differ by 1e-4)", torch.arange(1000), 64, atol=2e-4),
        case("d = 512, the paper's size, positions 0..49", torch.arange(50), 512),
    ]
