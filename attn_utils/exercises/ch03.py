"""Checkers for Chapter 3 (scoring functions): scaled dot-product attention and cosine scores."""

from __future__ import annotations

import math

import torch

from ..masking import masked_softmax
from ..scoring import cosine_score
from .core import Case, register


def _data(seed: int, batch: int, q: int, k: int, d: int, v: int, scale: float = 1.0):
    gen = torch.Generator().manual_seed(seed)
    return tuple(scale * torch.randn(*shape, generator=gen) for shape in [(batch, q, d), (batch, k, d), (batch, k, v)])


def _reference_attention(queries, keys, values, valid_lens=None):
    scores = queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1])  # (batch, Q, K)
    return masked_softmax(scores, valid_lens) @ values  # (batch, Q, v)


@register("ch03-write-scaled-dot")
def scaled_dot_cases(device: torch.device) -> list[Case]:
    def case(name, data, valid_lens=None):
        return Case(name, (*data, valid_lens), _reference_attention(*data, valid_lens))

    return [
        case("no mask (valid_lens=None)", _data(0, 2, 3, 4, 8, 5)),
        case("valid lengths (2, 4)", _data(1, 2, 3, 4, 8, 5), torch.tensor([2, 4])),
        case("a valid length of 0: that sequence's output is all zeros", _data(2, 2, 3, 4, 8, 5), torch.tensor([3, 0])),
        case("d = 1", _data(3, 1, 2, 3, 1, 2)),
        case("d = 64 with large entries (the scale matters)", _data(4, 1, 2, 6, 64, 3, scale=3.0)),
    ]


@register("ch03-write-cosine-score")
def cosine_cases(device: torch.device) -> list[Case]:
    gen = torch.Generator().manual_seed(5)
    q, k = torch.randn(2, 3, 6, generator=gen), torch.randn(2, 4, 6, generator=gen)
    hand_q = torch.tensor([[[1.0, 0.0]]])
    hand_k = torch.tensor([[[2.0, 0.0], [0.0, 3.0], [-1.0, 0.0], [1.0, 1.0]]])  # cos = 1, 0, -1, 0.7071

    def case(name, qq, kk, beta):
        return Case(name, (qq, kk, beta), cosine_score(qq, kk, beta=beta))

    return [
        case("by hand: cosines 1, 0, -1 and 0.7071", hand_q, hand_k, 1.0),
        case("a batch of random vectors, beta = 1", q, k, 1.0),
        case("beta = 5 scales every score", q, k, 5.0),
        case("keys 100 times longer give the same scores", q, 100 * k, 1.0),
        case("a zero key scores 0, not NaN", hand_q, torch.zeros(1, 2, 2), 2.0),
    ]
