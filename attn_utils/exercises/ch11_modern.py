"""Checkers for the section on attention in today's models (chapter 11): tasks it leaves to the reader.

* ``ch11-modern-write-alibi-attention``: causal attention with ALiBi's bias, the queries being the last
  positions of the keys (a decoding step, a chunk of a prompt), with slopes given per head.
* ``ch11-modern-write-kv-grouping``: the grouping of query heads around shared key/value heads.

The expected results come from the explicit computation (``masked_softmax`` with ``causal_mask``, the
bias written out from its definition, and a case worked by hand) and from
``attn_utils.multihead.repeat_kv_heads`` (tested through grouped-query attention computed head by head
in tests/test_modern_attention.py).
"""

from __future__ import annotations

import math

import torch

from ..alibi import alibi_slopes
from ..masking import causal_mask, masked_softmax
from ..multihead import repeat_kv_heads
from .core import Case, register


def alibi_attention(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, slopes: torch.Tensor) -> torch.Tensor:
    """Causal attention with ALiBi's bias -slope_h * (i - j), the queries being the last positions,
    computed explicitly: (batch, heads, n_q, d), (batch, heads, n_k, d), ... -> (batch, heads, n_q, d_v)."""
    n_q, n_k = Q.shape[-2], K.shape[-2]
    query_positions = torch.arange(n_k - n_q, n_k, dtype=Q.dtype)
    distance = query_positions[:, None] - torch.arange(n_k, dtype=Q.dtype)[None, :]  # (n_q, n_k): i - j
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]) - slopes[:, None, None] * distance
    return masked_softmax(scores, causal_mask(n_q, n_k)) @ V


@register("ch11-modern-write-alibi-attention")
def alibi_attention_cases(device: torch.device) -> list[Case]:
    def case(name, Q, K, V, slopes):
        return Case(name, (Q, K, V, slopes), alibi_attention(Q, K, V, slopes))

    def qkv(batch, heads, n_q, n_k, d, seed):
        g = torch.Generator().manual_seed(seed)
        return tuple(torch.randn(batch, heads, n, d, generator=g, dtype=torch.float64)
                     for n in (n_q, n_k, n_k))

    # One head, slope 1/2, content scores all 0, one query at position 2 of 3: weights
    # proportional to e^-1, e^-1/2, 1 on the values 0, 1, 2.
    zero_q, zero_k = torch.zeros(1, 1, 1, 4, dtype=torch.float64), torch.zeros(1, 1, 3, 4, dtype=torch.float64)
    values = torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64).reshape(1, 1, 3, 1)
    e = math.exp
    by_hand = (e(-0.5) + 2) / (e(-1) + e(-0.5) + 1)
    hand = Case("by hand: slope 1/2, equal content scores, the query at position 2 of 3: "
                f"(e^-1/2 + 2) / (e^-1 + e^-1/2 + 1) = {by_hand:.4f}",
                (zero_q, zero_k, values, torch.tensor([0.5], dtype=torch.float64)),
                torch.tensor([[[[by_hand]]]], dtype=torch.float64))
    paper = alibi_slopes(4).double()
    return [
        hand,
        case("4 heads with the paper's slopes, self-attention over 12 positions (later keys are "
             "masked, not rewarded)", *qkv(2, 4, 12, 12, 8, seed=1), paper),
        case("one new query after 9 cached positions: distances 9, 8, ..., 0 (not 0, -1, ...)",
             *qkv(2, 4, 1, 10, 8, seed=2), paper),
        case("4 queries, the last of 10 positions", *qkv(1, 4, 4, 10, 8, seed=3), paper),
        case("slopes given per head, in any order (slope 0: plain causal attention)",
             *qkv(1, 3, 6, 6, 16, seed=4), torch.tensor([0.0, 2.0, 0.25], dtype=torch.float64)),
        case("d = 64, 5 queries of 7 positions, slopes 1 and 1/8",
             *qkv(1, 2, 5, 7, 64, seed=5), torch.tensor([1.0, 0.125], dtype=torch.float64)),
    ]


@register("ch11-modern-write-kv-grouping")
def kv_grouping_cases(device: torch.device) -> list[Case]:
    g = torch.Generator().manual_seed(1)

    def case(name, kv, num_heads):
        return Case(name, (kv, num_heads), repeat_kv_heads(kv, num_heads))

    labelled = torch.arange(2.0).reshape(1, 2, 1, 1).expand(1, 2, 3, 2).contiguous()  # head h holds the number h
    return [
        case("2 key/value heads for 4 query heads: 0, 0, 1, 1 (not 0, 1, 0, 1)", labelled, 4),
        case("as many key/value heads as query heads: unchanged", torch.randn(2, 4, 5, 3, generator=g), 4),
        case("one key/value head for 6 query heads (multi-query)", torch.randn(2, 1, 5, 3, generator=g), 6),
        case("3 key/value heads for 12 query heads", torch.randn(1, 3, 4, 8, generator=g), 12),
    ]
