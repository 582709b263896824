"""Checkers for section 11.2 (making attention fast): the online softmax and merging two partial
attention results.

The expected results come from ``attn_utils.online_softmax`` and ``attn_utils.merge_attention_blocks``
(both tested against ``torch.softmax`` and explicit attention in tests/test_fast_attention.py).
"""

from __future__ import annotations

import torch

from ..online_softmax import block_statistics, inverse_or_zero, merge_attention_blocks, online_softmax
from .core import Case, register, seeded_randn


@register("ch11-write-online-softmax")
def online_softmax_cases(device: torch.device) -> list[Case]:
    def case(name, X, block_size):
        return Case(name, (X, block_size), online_softmax(X, block_size=block_size))

    X = seeded_randn(3, 10, seed=1)
    huge = torch.tensor([[1000.0, 999.0, 998.0, -1000.0], [88.0, 89.0, 90.0, 91.0]])  # exp overflows float32
    with_inf = seeded_randn(2, 7, seed=2)
    with_inf[0, 3] = float("-inf")
    with_inf[1] = float("-inf")  # a row with no visible entry: all-zero weights, not NaN
    rising = torch.arange(12.0).reshape(1, 12) * 3  # every block raises the maximum: l must be rescaled each time
    return [
        case("blocks of 4 columns (the last block is shorter)", X, 4),
        case("one column at a time", X, 1),
        case("one block holds the whole row", X, 64),
        case("huge logits: exp(1000) overflows, the running maximum must be subtracted", huge, 2),
        case("-inf entries and a row that is all -inf (zeros expected)", with_inf, 3),
        case("a maximum that rises in every block", rising, 3),
        case("more leading dimensions (batch, heads, queries, keys)", seeded_randn(2, 3, 4, 9, seed=3, scale=5.0), 4),
    ]


def _partial(scores: torch.Tensor, values: torch.Tensor):
    """(m, l, acc) of one block of scores (..., Q, K) and its values (..., K, d_v)."""
    return block_statistics(scores, values)


@register("ch11-write-merge-attention-blocks")
def merge_cases(device: torch.device) -> list[Case]:
    def case(name, s1, v1, s2, v2):
        p1, p2 = _partial(s1, v1), _partial(s2, v2)
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
