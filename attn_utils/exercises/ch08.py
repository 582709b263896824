"""Checkers for Chapter 8 (self-attention and positional encoding): tasks the chapter leaves to the reader.

* ``ch08-packed-causal``: causal self-attention over sequences that pack several documents into one
  row, where a token sees the earlier tokens of its own document only.
* ``ch08-position-from-encoding``: the inverse of the sinusoidal encoding, the positions read back
  from rows of P.

The expected outputs come from the tested layers: ``DotProductAttention`` with a mask built from
``causal_mask``, and the positions that ``sinusoidal_encoding`` was given.
"""

from __future__ import annotations

import math

import torch

from ..attention import DotProductAttention
from ..masking import causal_mask
from ..positional import sinusoidal_encoding
from .core import Case, register, seeded_randn


@torch.no_grad()
def _packed_causal(X, W_q, W_k, W_v, doc_ids) -> torch.Tensor:
    """``softmax(Q K^T / sqrt(d_k)) V`` with ``Q = X W_q`` (and so on), query i seeing the keys j <= i
    of its own document."""
    n = X.shape[1]
    same_document = doc_ids[:, :, None] == doc_ids[:, None, :]  # (batch, n, n)
    mask = causal_mask(n, n, X.device) & same_document  # (batch, n, n)
    return DotProductAttention(0.0, fused=False)(X @ W_q, X @ W_k, X @ W_v, mask)


@register("ch08-packed-causal")
def packed_causal_cases(device: torch.device) -> list[Case]:
    def case(name, X, W_q, W_k, W_v, doc_ids):
        return Case(name, (X, W_q, W_k, W_v, doc_ids), _packed_causal(X, W_q, W_k, W_v, doc_ids))

    d, dk, dv = 6, 4, 3
    W = [seeded_randn(d, dk, seed=1), seeded_randn(d, dk, seed=2), seeded_randn(d, dv, seed=3)]
    # By hand: W_q = 0 makes every score 0, so each output is the mean of the values its query sees.
    hand_X = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [2.0, 2.0], [4.0, 0.0], [0.0, 8.0]]])
    identity = torch.eye(2)
    X = seeded_randn(3, 7, d, seed=4)
    return [
        case("by hand, W_q = 0 and documents [0, 0, 0, 1, 1]: outputs x1, (x1+x2)/2, (x1+x2+x3)/3, x4, "
             "(x4+x5)/2", hand_X, torch.zeros(2, 2), identity, identity, torch.tensor([[0, 0, 0, 1, 1]])),
        case("one document per row: plain causal self-attention", seeded_randn(2, 5, d, seed=5), *W,
             torch.zeros(2, 5, dtype=torch.long)),
        case("every token a document of its own: the output is x W_v", seeded_randn(2, 4, d, seed=6), *W,
             torch.arange(4).expand(2, 4)),
        case("three rows packed differently: the documents of row b are those of doc_ids[b]", X, *W,
             torch.tensor([[0, 0, 0, 0, 1, 1, 1], [0, 1, 1, 1, 1, 1, 2], [5, 5, 3, 3, 3, 3, 3]])),
        case("large entries: the 1/sqrt(d_k) matters", seeded_randn(1, 6, d, seed=8),
             seeded_randn(d, 16, seed=9, scale=2.0), seeded_randn(d, 16, seed=10, scale=2.0),
             seeded_randn(d, 2, seed=11), torch.tensor([[0, 0, 0, 1, 1, 1]])),
        case("d_k = 1 and d_v = 5, documents of lengths 1, 2 and 3", seeded_randn(2, 6, d, seed=12),
             seeded_randn(d, 1, seed=13), seeded_randn(d, 1, seed=14), seeded_randn(d, 5, seed=15),
             torch.tensor([[0, 1, 1, 2, 2, 2], [0, 0, 0, 1, 1, 2]])),
    ]


def slowest_wavelength(num_hiddens: int) -> float:
    """The wavelength, in positions, of the encoding's slowest column pair: 2 pi 10000^((d - 2) / d)."""
    return 2 * math.pi * 10000.0 ** ((num_hiddens - 2) / num_hiddens)


@register("ch08-position-from-encoding")
def position_cases(device: torch.device) -> list[Case]:
    def case(name, positions, num_hiddens):
        rows = sinusoidal_encoding(int(positions.max()) + 1, num_hiddens)[positions]  # (m, d), float32
        # the positions must come back exactly: integers, not 14.9997
        return Case(name, (rows,), positions.clone(), atol=0.0, rtol=0.0)

    shuffled = torch.randperm(1000, generator=torch.Generator().manual_seed(1))
    return [
        case("d = 2, positions 0..6: the angle is p itself, past pi for p >= 4", torch.arange(7), 2),
        case("position 0 alone, d = 6: (0, 1, 0, 1, 0, 1)", torch.tensor([0]), 6),
        case("positions in any order, repeated: [5, 5, 0, 3], d = 8", torch.tensor([5, 5, 0, 3]), 8),
        case("positions 0..999 shuffled, d = 64", shuffled, 64),
        case("d = 16, positions up to 19,000: the slowest pair turns past pi/2 and past pi",
             torch.tensor([3, 4_000, 6_000, 9_000, 12_000, 19_000]), 16),
        case("d = 512, positions 0..49: the slowest pair turns by 1e-4 a position, its cosine stays near 1",
             torch.arange(50), 512),
    ]
