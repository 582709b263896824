"""Checkers for the section on attention in today's models (chapter 11): tasks it leaves to the reader.

* ``ch11-modern-write-alibi-attention``: causal attention with ALiBi's bias, the queries being the last
  positions of the keys (a decoding step, a chunk of a prompt), with slopes given per head.
* ``ch11-modern-write-grouped-decode``: a decoding step of grouped-query attention that never copies
  the cached keys and values for each query head.

The expected results come from the explicit computation (``attend`` with ``causal_mask``, the
bias written out from its definition, and a case worked by hand) and from attention over the
key/value heads repeated by ``attn_utils.multihead.repeat_kv_heads`` (tested through grouped-query
attention computed head by head in tests/test_modern_attention.py).
"""

from __future__ import annotations

import math

import torch

from ..alibi import alibi_slopes
from ..attention import attend
from ..masking import causal_mask
from ..multihead import repeat_kv_heads
from .core import Case, refuse_large, register


def alibi_attention(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, slopes: torch.Tensor) -> torch.Tensor:
    """Causal attention with ALiBi's bias -slope_h * (i - j), the queries being the last positions,
    computed explicitly: (batch, heads, n_q, d), (batch, heads, n_k, d), ... -> (batch, heads, n_q, d_v)."""
    n_q, n_k = Q.shape[-2], K.shape[-2]
    query_positions = torch.arange(n_k - n_q, n_k, dtype=Q.dtype)
    distance = query_positions[:, None] - torch.arange(n_k, dtype=Q.dtype)[None, :]  # (n_q, n_k): i - j
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]) - slopes[:, None, None] * distance
    return attend(scores, V, causal_mask(n_q, n_k))[0]


def grouped_step(q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
    """One decoding step of grouped-query attention, computed with the key/value heads repeated:
    q (batch, h, d_h), K and V (batch, g, n, d_h) -> (batch, h, d_h)."""
    K, V = repeat_kv_heads(K, q.shape[1]), repeat_kv_heads(V, q.shape[1])  # (batch, h, n, d_h)
    weights = torch.softmax(K @ q[..., None] / math.sqrt(q.shape[-1]), dim=-2)  # (batch, h, n, 1)
    return (weights * V).sum(dim=-2)


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


@register("ch11-modern-write-grouped-decode")
def grouped_decode_cases(device: torch.device) -> list[Case]:
    def case(name, q, K, V):
        return Case(name, (q, K, V), grouped_step(q, K, V))

    def qkv(batch, heads, groups, n, d, seed):
        g = torch.Generator().manual_seed(seed)
        q = torch.randn(batch, heads, d, generator=g, dtype=torch.float64)
        K, V = (torch.randn(batch, groups, n, d, generator=g, dtype=torch.float64) for _ in range(2))
        return q, K, V

    # One shared head, keys 0 and 1, values 0 and 1; query 0 scores them 0 and ln 3 (weights 1/4,
    # 3/4), query 1 scores them 0 and 0 (weights 1/2, 1/2).
    hand_q = torch.tensor([[[math.log(3.0)], [0.0]]], dtype=torch.float64)  # (1, 2, 1)
    keys = torch.tensor([[[[0.0], [1.0]]]], dtype=torch.float64)  # (1, 1, 2, 1)
    hand = Case("by hand: 2 query heads share 1 key/value head: weights (1/4, 3/4) and (1/2, 1/2) "
                "give 0.75 and 0.5", (hand_q, keys, keys.clone()),
                torch.tensor([[[0.75], [0.5]]], dtype=torch.float64))
    labelled = qkv(1, 4, 2, 6, 8, seed=1)
    labelled[2][:, 1] += 100.0  # every value of key/value head 1 is about 100, of head 0 about 0
    q, K, V = qkv(2, 8, 2, 64, 16, seed=5)
    advice = ("as large as the cache repeated for every query head; reshape the queries into "
              "groups instead of copying the keys and values")
    no_copy = Case("8 query heads, 2 key/value heads, 64 cached positions: no copy of the cache "
                   "per query head", (q, *refuse_large((K, V), 2 * K.numel(), advice)), grouped_step(q, K, V))
    return [
        hand,
        case("one key/value head for 6 query heads (multi-query), d_h = 32: scores scaled by 1/sqrt(32)",
             *qkv(2, 6, 1, 9, 32, seed=3)),
        case("4 query heads, 2 key/value heads: heads 0, 1 read group 0, heads 2, 3 group 1 (values "
             "of group 1 are near 100)", *labelled),
        case("as many key/value heads as query heads: ordinary multi-head attention", *qkv(2, 4, 4, 7, 8, seed=2)),
        case("12 query heads, 3 key/value heads, batch of 3", *qkv(3, 12, 3, 5, 8, seed=4)),
        no_copy,
    ]
