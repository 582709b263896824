"""Checkers for chapter 9 (multi-head attention): tasks the chapter leaves to the reader.

* ``ch09-head-contributions``: the layer's output taken apart into one term per head, each the head's
  output through its own block of ``W_o``.
* ``ch09-relative-bias``: multi-head self-attention with a learned bias per head and per (clipped)
  offset between query and key, added to the scores.

The expected contributions come from ``attn_utils.MultiHeadAttention`` itself, with the reader's
weight matrices loaded into it and every head but one zeroed before ``W_o`` (a forward pre-hook, as
in the chapter). The relative-bias layer is computed one head and one (query, key) pair at a time.
"""

from __future__ import annotations

import math

import torch

from ..attention import attend
from ..masking import causal_mask
from ..multihead import MultiHeadAttention
from .core import Case, register, seeded_randn


@torch.no_grad()
def multihead_with_weights(W_q, W_k, W_v, W_o, num_heads: int) -> MultiHeadAttention:
    """A ``MultiHeadAttention`` (eval mode) holding the four given (out_features, in_features) matrices."""
    layer = MultiHeadAttention(W_q.shape[0], num_heads, 0.0, query_size=W_q.shape[1], key_size=W_k.shape[1],
                               value_size=W_v.shape[1])
    for linear, W in ((layer.W_q, W_q), (layer.W_k, W_k), (layer.W_v, W_v), (layer.W_o, W_o)):
        linear.weight.copy_(W)
    return layer.eval()


@torch.no_grad()
def _contributions(queries, keys, values, W_q, W_k, W_v, W_o, num_heads, valid_lens=None) -> torch.Tensor:
    """(batch, heads, Q, d): the layer's output with every head but head i zeroed before ``W_o``."""
    layer = multihead_with_weights(W_q, W_k, W_v, W_o, num_heads)
    d_h = W_q.shape[0] // num_heads
    terms = []
    for head in range(num_heads):
        def keep_one_head(module, inputs, head=head):  # inputs[0]: (batch, Q, d), the heads side by side
            kept = torch.zeros_like(inputs[0])
            kept[..., head * d_h:(head + 1) * d_h] = inputs[0][..., head * d_h:(head + 1) * d_h]
            return (kept,)

        hook = layer.W_o.register_forward_pre_hook(keep_one_head)
        try:
            terms.append(layer(queries, keys, values, valid_lens))  # (batch, Q, d)
        finally:
            hook.remove()
    return torch.stack(terms, dim=1)


def _weights(d, seed, query_size=None, key_size=None):
    """Four (out, in) matrices at the scale of nn.Linear's initialisation."""
    q_in, k_in = query_size or d, key_size or d
    return (seeded_randn(d, q_in, seed=seed, scale=q_in ** -0.5),
            seeded_randn(d, k_in, seed=seed + 1, scale=k_in ** -0.5),
            seeded_randn(d, k_in, seed=seed + 2, scale=k_in ** -0.5),
            seeded_randn(d, d, seed=seed + 3, scale=d ** -0.5))


@register("ch09-head-contributions")
def head_contributions_cases(device: torch.device) -> list[Case]:
    def case(name, queries, keys, values, W, num_heads, valid_lens=None):
        args = (queries, keys, values, *W, num_heads, valid_lens)
        return Case(name, args, _contributions(*args))

    # By hand: W_q = 0 gives uniform weights, W_v = I: head i's output is the mean of the visible values'
    # features i d_h .. (i + 1) d_h - 1, and W_o = I puts it in those columns of its term, zeros elsewhere.
    hand = torch.tensor([[[2.0, 0.0, 4.0, 8.0], [0.0, 6.0, 0.0, 4.0], [7.0, 7.0, 7.0, 7.0]]])  # (1, 3, 4)
    eye = torch.eye(4)
    hand_W = (torch.zeros(4, 4), eye, eye, eye)
    # W_o, as nn.Linear stores it (out, in): out[0:2] = in[2:4] and out[2:4] = 2 in[0:2], so head 0's
    # term is twice its output in columns 2-3, head 1's its output in columns 0-1 (not symmetric).
    swap = torch.cat([eye[2:], 2 * eye[:2]])
    X = seeded_randn(2, 5, 8, seed=10)
    X4 = seeded_randn(4, 6, 8, seed=11)
    per_sequence = torch.stack([causal_mask(5, 5), ~causal_mask(5, 5) | torch.eye(5, dtype=torch.bool)])  # (2, 5, 5)
    return [
        case("by hand, W_q = 0, W_v = W_o = I, 2 heads, valid length 2: the term of head i is the mean of x1, "
             "x2 in its own 2 columns", hand, hand, hand, hand_W, 2, torch.tensor([2])),
        case("W_o sends head 1 to columns 0-1 and twice head 0 to 2-3: the block of head i is columns of W_o",
             hand, hand, hand, (*hand_W[:3], swap), 2),
        case("self-attention, no mask, 2 heads of 4 features (scores scaled by sqrt(4), not sqrt(8))",
             X, X, X, _weights(8, 20), 2),
        case("valid lengths (5, 3), 4 heads", X, X, X, _weights(8, 24), 4, torch.tensor([5, 3])),
        case("a sequence of valid length 0: its terms are zeros, not NaN", X4, X4, X4, _weights(8, 28), 2,
             torch.tensor([6, 0, 3, 1])),
        case("a (batch, Q, K) mask that differs by sequence, with batch = heads = 2", X, X, X, _weights(8, 36), 2,
             per_sequence),
        case("cross-attention: 3 queries of size 6, 7 keys and values of size 8, 4 heads",
             seeded_randn(2, 3, 6, seed=12), seeded_randn(2, 7, 8, seed=13), seeded_randn(2, 7, 8, seed=14),
             _weights(8, 40, query_size=6), 4, torch.tensor([7, 2])),
        case("1 head: its term is the whole output", X, X, X, _weights(8, 44), 1, torch.tensor([4, 5])),
    ]


@torch.no_grad()
def _relative_bias(X, W_q, W_k, W_v, W_o, bias, num_heads, valid_lens=None) -> torch.Tensor:
    """Head by head and pair by pair, in float64: scores q_i . k_j / sqrt(d_h) + bias[head, clip(j - i) + R].

    The result is returned in ``X``'s dtype: rounded once, so a float32 answer is compared with the
    exact value, not with another float32 summation order.
    """
    dtype = X.dtype
    X, W_q, W_k, W_v, W_o, bias = (t.double() for t in (X, W_q, W_k, W_v, W_o, bias))
    batch, n, _ = X.shape
    d = W_q.shape[0]
    d_h, reach = d // num_heads, (bias.shape[1] - 1) // 2
    Q, K, V = X @ W_q.T, X @ W_k.T, X @ W_v.T  # (batch, n, d)
    heads = []
    for head in range(num_heads):
        cols = slice(head * d_h, (head + 1) * d_h)
        scores = Q[..., cols] @ K[..., cols].transpose(1, 2) / math.sqrt(d_h)  # (batch, n, n)
        added = torch.empty(n, n, dtype=scores.dtype)
        for i in range(n):
            for j in range(n):
                added[i, j] = bias[head, min(max(j - i, -reach), reach) + reach]
        heads.append(attend(scores, V[..., cols], valid_lens, attn_bias=added)[0])  # (batch, n, d_h)
    return (torch.cat(heads, dim=-1) @ W_o.T).to(dtype)  # (batch, n, d)


@register("ch09-relative-bias")
def relative_bias_cases(device: torch.device) -> list[Case]:
    def case(name, X, W, bias, num_heads, valid_lens=None):
        args = (X, *W, bias, num_heads, valid_lens)
        return Case(name, args, _relative_bias(*args))

    # By hand: W_q = 0 leaves only the bias; head 0 puts 50 on offset -1 (the key before), head 1 on
    # offset +1 (the key after), so with W_v = W_o = I the output at i is (x_(i-1) in head 0's columns,
    # x_(i+1) in head 1's); where that key does not exist (head 0 of the first query, head 1 of the
    # last), every key has bias 0 and the head averages all four.
    hand = torch.tensor([[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0],
                          [13.0, 14.0, 15.0, 16.0]]])  # (1, 4, 4)
    eye = torch.eye(4)
    hand_W = (torch.zeros(4, 4), eye, eye, eye)
    hand_bias = torch.zeros(2, 7)  # (heads, offsets -3..3)
    hand_bias[0, 2], hand_bias[1, 4] = 50.0, 50.0  # offset -1 for head 0, +1 for head 1
    X = seeded_randn(2, 5, 8, seed=10)
    X_long = seeded_randn(2, 9, 8, seed=11)
    return [
        case("by hand, W_q = 0, W_v = W_o = I: head 0 reads the key before (offset j - i = -1), head 1 the key "
             "after (+1)", hand, hand_W, hand_bias, 2),
        case("2 heads, biases for offsets -4..4, no mask", X, _weights(8, 20), seeded_randn(2, 9, seed=1), 2),
        case("9 tokens, offsets clipped at 2: every key 2 or more before the query gets bias[h, 0], every key "
             "2 or more after it bias[h, 4]", X_long, _weights(8, 24), seeded_randn(2, 5, seed=2, scale=3.0), 2),
        case("valid lengths (5, 2): padding keys get no weight, whatever their bias", X, _weights(8, 28),
             seeded_randn(4, 9, seed=3), 4, torch.tensor([5, 2])),
        case("a sequence of valid length 0: zeros, not NaN", X, _weights(8, 32), seeded_randn(2, 9, seed=4), 2,
             torch.tensor([0, 4])),
        case("large scores: the bias is added after the 1/sqrt(d_h) scaling", X,
             tuple(4.0 * W for W in _weights(8, 36)), seeded_randn(2, 9, seed=5), 2),
        case("1 head and reach 0: one bias for every pair, which the softmax ignores", X, _weights(8, 40),
             torch.tensor([[7.0]]), 1, torch.tensor([3, 5])),
    ]
