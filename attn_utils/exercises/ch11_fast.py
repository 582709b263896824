"""Checkers for section 11.2 (making attention fast): tasks the section leaves to the reader.

* ``ch11-write-causal-tiled-attention``: tiled attention with causal masking, aligned bottom-right
  (the queries are the last positions), rows that see no key, and no tensor as large as the map.
* ``ch11-write-merge-attention-blocks``: merging two partial attention results (m, l, acc).

The expected results of the first come from the explicit computation (``attend`` with
``causal_mask``, in float64); those of the second from ``attn_utils.merge_attention_blocks`` (tested
against explicit attention in tests/test_fast_attention.py).
"""

from __future__ import annotations

import math

import torch

from ..attention import attend
from ..masking import causal_mask
from ..online_softmax import block_statistics, inverse_or_zero, merge_attention_blocks
from .core import Case, refuse_large, register, seeded_randn


def causal_attention(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
    """Explicit causal attention, the queries being the last positions (as ``causal_mask``), in
    float64; a query that sees no key gets a zero row."""
    scores = Q.double() @ K.double().transpose(-2, -1) / math.sqrt(Q.shape[-1])
    return attend(scores, V.double(), causal_mask(Q.shape[-2], K.shape[-2]))[0].to(Q.dtype)


@register("ch11-write-causal-tiled-attention")
def causal_tiled_cases(device: torch.device) -> list[Case]:
    def case(name, Q, K, V, block_size, **tolerance):
        return Case(name, (Q, K, V, block_size), causal_attention(Q, K, V), **tolerance)

    def qkv(batch, n_q, n_k, d, d_v, seed, scale=1.0, dtype=torch.float64):
        return (seeded_randn(*batch, n_q, d, seed=seed, scale=scale).to(dtype),
                seeded_randn(*batch, n_k, d, seed=seed + 1, scale=scale).to(dtype),
                seeded_randn(*batch, n_k, d_v, seed=seed + 2).to(dtype))

    zeros = torch.zeros(1, 2, 1, dtype=torch.float64)
    hand = Case("by hand: two positions, equal scores: outputs 1 and (1 + 3) / 2 = 2",
                (zeros, zeros.clone(), torch.tensor([[[1.0], [3.0]]], dtype=torch.float64), 1),
                torch.tensor([[[1.0], [2.0]]], dtype=torch.float64))
    self_23 = qkv((2,), 23, 23, 8, 5, seed=1)
    Q64, K64, V64 = qkv((1,), 64, 64, 8, 8, seed=20)
    advice = "a quarter of the 64 x 64 map or more; compute one tile of scores at a time"
    no_map = Case("64 positions, tiles of 16: no tensor of a quarter of the 64 x 64 map",
                  (*refuse_large((Q64, K64, V64), 64 * 64 // 4, advice), 16),
                  causal_attention(Q64, K64, V64))
    return [
        hand,
        case("self-attention over 23 positions, tiles of 5 (the last tile is shorter)",
             *self_23, 5),
        case("tiles of 1", *self_23, 1),
        case("one tile larger than the sequence", *self_23, 64),
        case("one new query after 39 cached positions: it sees all 40 keys (bottom-right, "
             "not top-left)", *qkv((2,), 1, 40, 8, 4, seed=4), 16),
        case("3 queries, the last of 10 positions", *qkv((2,), 3, 10, 8, 4, seed=7), 4),
        case("6 queries, 4 keys: the first 2 queries come before every key (zero rows, not NaN)",
             *qkv((1,), 6, 4, 8, 3, seed=10), 2),
        case("scores near 1000 in float32: exp overflows unless the running maximum is "
             "subtracted", *qkv((1,), 12, 12, 8, 4, seed=13, scale=30.0, dtype=torch.float32), 4,
             atol=1e-4, rtol=1e-3),
        case("(batch, heads, n, d) inputs", *qkv((2, 3), 17, 17, 8, 6, seed=16), 8),
        no_map,
    ]


@register("ch11-write-merge-attention-blocks")
def merge_cases(device: torch.device) -> list[Case]:
    def case(name, s1, v1, s2, v2):
        p1, p2 = block_statistics(s1, v1), block_statistics(s2, v2)
        _, l, acc = merge_attention_blocks(*p1, *p2)
        return Case(name, (*p1, *p2), acc * inverse_or_zero(l).unsqueeze(-1))

    s, v = seeded_randn(2, 3, 9, seed=1, scale=2.0), seeded_randn(2, 9, 4, seed=2)
    empty = torch.full((2, 3, 4), float("-inf"))  # a block in which no key is visible
    partly = s[..., 5:].clone()
    partly[:, 0] = float("-inf")  # query 0 sees nothing in the second block
    far = torch.cat([seeded_randn(1, 2, 3, seed=3) - 500, seeded_randn(1, 2, 3, seed=4) + 500], dim=-1)
    vf = seeded_randn(1, 6, 2, seed=5)
    return [
        case("two blocks of 5 and 4 keys", s[..., :5], v[:, :5], s[..., 5:], v[:, 5:]),
        case("one key in the first block", s[..., :1], v[:, :1], s[..., 1:], v[:, 1:]),
        case("a second block with no visible key", s[..., :5], v[:, :5], empty, v[:, 5:]),
        case("a first block with no visible key", empty, v[:, 5:], s[..., 5:], v[:, 5:]),
        case("a query that sees nothing in either block (zeros expected)", empty, v[:, :4], empty, v[:, 5:]),
        case("some queries see nothing in the second block", s[..., :5], v[:, :5], partly, v[:, 5:]),
        case("maxima 1000 apart: exp(m1 - m2) underflows to 0", far[..., :3], vf[:, :3], far[..., 3:], vf[:, 3:]),
    ]
