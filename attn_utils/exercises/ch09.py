"""Checkers for chapter 9 (multi-head attention): splitting features into heads, and the whole layer.

The expected results come from ``attn_utils.transpose_qkv`` and from ``attn_utils.MultiHeadAttention``
itself, with the reader's weight matrices loaded into it.
"""

from __future__ import annotations

import torch

from ..masking import causal_mask
from ..multihead import MultiHeadAttention, transpose_qkv
from .core import Case, register, seeded_randn


@register("ch09-write-split-heads")
def split_heads_cases(device: torch.device) -> list[Case]:
    def case(name, X, num_heads):
        return Case(name, (X, num_heads), transpose_qkv(X, num_heads))

    return [
        case("one sequence, 4 features, 2 heads (features 0-1 and 2-3)", torch.arange(12.0).reshape(1, 3, 4), 2),
        case("a batch of 2, d = 8, 2 heads", seeded_randn(2, 3, 8, seed=1), 2),
        case("a batch of 3, d = 12, 4 heads: row b * heads + i is head i of sequence b",
             seeded_randn(3, 5, 12, seed=2), 4),
        case("1 head: the input, unchanged", seeded_randn(2, 4, 6, seed=3), 1),
        case("heads = d = 6: one feature per head", seeded_randn(2, 4, 6, seed=4), 6),
        case("a single position (n = 1)", seeded_randn(2, 1, 8, seed=5), 4),
    ]


@torch.no_grad()
def multihead_with_weights(W_q, W_k, W_v, W_o, num_heads: int) -> MultiHeadAttention:
    """A ``MultiHeadAttention`` (eval mode) holding the four given (out_features, in_features) matrices."""
    layer = MultiHeadAttention(W_q.shape[0], num_heads, 0.0, query_size=W_q.shape[1], key_size=W_k.shape[1],
                               value_size=W_v.shape[1])
    for linear, W in ((layer.W_q, W_q), (layer.W_k, W_k), (layer.W_v, W_v), (layer.W_o, W_o)):
        linear.weight.copy_(W)
    return layer.eval()


@torch.no_grad()
def _multihead(queries, keys, values, W_q, W_k, W_v, W_o, num_heads, valid_lens=None) -> torch.Tensor:
    """``MultiHeadAttention``'s output with the four matrices loaded."""
    return multihead_with_weights(W_q, W_k, W_v, W_o, num_heads)(queries, keys, values, valid_lens)


@register("ch09-write-multihead")
def multihead_cases(device: torch.device) -> list[Case]:
    def weights(d, seed, query_size=None, key_size=None):
        q_in, k_in = query_size or d, key_size or d
        return (seeded_randn(d, q_in, seed=seed, scale=q_in ** -0.5),
                seeded_randn(d, k_in, seed=seed + 1, scale=k_in ** -0.5),
                seeded_randn(d, k_in, seed=seed + 2, scale=k_in ** -0.5),
                seeded_randn(d, d, seed=seed + 3, scale=d ** -0.5))

    def case(name, queries, keys, values, W, num_heads, valid_lens=None):
        args = (queries, keys, values, *W, num_heads, valid_lens)
        return Case(name, args, _multihead(*args))

    X = seeded_randn(2, 5, 8, seed=10)
    X4 = seeded_randn(4, 6, 8, seed=11)
    per_sequence = torch.stack([causal_mask(5, 5), ~causal_mask(5, 5) | torch.eye(5, dtype=torch.bool)])  # (2, 5, 5)
    return [
        case("self-attention, no mask, 2 heads", X, X, X, weights(8, 20), 2),
        case("valid lengths (5, 3), 4 heads", X, X, X, weights(8, 24), 4, torch.tensor([5, 3])),
        case("a sequence of valid length 0: its output is zeros, not NaN", X4, X4, X4, weights(8, 28), 2,
             torch.tensor([6, 0, 3, 1])),
        case("a causal mask (n, n) shared by the batch", X, X, X, weights(8, 32), 2, causal_mask(5, 5)),
        case("a (batch, Q, K) mask that differs by sequence, with batch = heads = 2", X, X, X, weights(8, 36), 2,
             per_sequence),
        case("cross-attention: 3 queries of size 6, 7 keys and values of size 8", seeded_randn(2, 3, 6, seed=12),
             seeded_randn(2, 7, 8, seed=13), seeded_randn(2, 7, 8, seed=14), weights(8, 40, query_size=6), 4,
             torch.tensor([7, 2])),
        case("1 head: plain scaled dot-product attention on the projections", X, X, X, weights(8, 44), 1,
             torch.tensor([4, 5])),
        case("8 heads of 1 feature each (d / heads = 1)", X, X, X, weights(8, 48), 8, torch.tensor([2, 5])),
    ]
