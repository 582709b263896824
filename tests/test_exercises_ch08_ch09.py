"""Chapters 8-9's checkers: the typical wrong answer of each exercise fails on the case that names its trap."""

from __future__ import annotations

import math

import torch

from attn_utils import masked_softmax, split_heads
from attn_utils.exercises import grade


def _failed(label, fn) -> str:
    result = grade(label, fn)
    assert not result.passed
    return result.message


def _first_failure(message: str) -> str:
    """The name of the case a failing checker reports first."""
    return message.split("Case '", 1)[1].split("' failed", 1)[0]


def _packed(X, W_q, W_k, W_v, mask):
    Q, K, V = X @ W_q, X @ W_k, X @ W_v
    return masked_softmax(Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1]), mask) @ V


def _causal(n):
    positions = torch.arange(n)
    return positions[None, :] <= positions[:, None]  # (n, n)


def test_packed_causal_attention_traps_are_named():
    def right(X, W_q, W_k, W_v, doc_ids):
        same = doc_ids[:, :, None] == doc_ids[:, None, :]
        return _packed(X, W_q, W_k, W_v, _causal(X.shape[1]) & same)

    assert grade("ch08-packed-causal", right).passed

    def plain_causal(X, W_q, W_k, W_v, doc_ids):  # documents ignored: a token reads the one before
        return _packed(X, W_q, W_k, W_v, _causal(X.shape[1]))

    assert _first_failure(_failed("ch08-packed-causal", plain_causal)).startswith("by hand, W_q = 0")

    def blocks_only(X, W_q, W_k, W_v, doc_ids):  # documents kept apart, but the future is visible
        return _packed(X, W_q, W_k, W_v, doc_ids[:, :, None] == doc_ids[:, None, :])

    assert _first_failure(_failed("ch08-packed-causal", blocks_only)).startswith("by hand, W_q = 0")

    def first_row_for_all(X, W_q, W_k, W_v, doc_ids):  # one packing for the whole batch
        same = doc_ids[0][:, None] == doc_ids[0][None, :]
        return _packed(X, W_q, W_k, W_v, _causal(X.shape[1]) & same)

    assert _first_failure(_failed("ch08-packed-causal", first_row_for_all)).startswith("three rows packed")

    def unscaled(X, W_q, W_k, W_v, doc_ids):
        same = doc_ids[:, :, None] == doc_ids[:, None, :]
        Q, K, V = X @ W_q, X @ W_k, X @ W_v
        return masked_softmax(Q @ K.transpose(1, 2), _causal(X.shape[1]) & same) @ V

    message = _failed("ch08-packed-causal", unscaled)
    assert "large entries: the 1/sqrt(d_k) matters" in message


def _slowest_pair(P):
    d = P.shape[-1]
    return P[:, -2].double(), P[:, -1].double(), 10000.0 ** (-(d - 2) / d)


def test_position_from_encoding_traps_are_named():
    def right(P):
        sin, cos, omega = _slowest_pair(P)
        return torch.round((torch.atan2(sin, cos) % (2 * math.pi)) / omega).long()

    assert grade("ch08-position-from-encoding", right).passed

    def fastest_pair(P):  # the first pair turns once every 6.3 positions
        return torch.round(torch.atan2(P[:, 0], P[:, 1]).double() % (2 * math.pi)).long()

    assert _first_failure(_failed("ch08-position-from-encoding", fastest_pair)).startswith(
        "positions 0..999 shuffled")

    def atan2_without_wrap(P):  # atan2 returns angles in (-pi, pi]
        sin, cos, omega = _slowest_pair(P)
        return torch.round(torch.atan2(sin, cos) / omega).long()

    assert _first_failure(_failed("ch08-position-from-encoding", atan2_without_wrap)).startswith("d = 2")

    def arcsine(P):  # only right below a quarter turn
        sin, _, omega = _slowest_pair(P)
        return torch.round(torch.asin(sin) / omega).long()

    assert _first_failure(_failed("ch08-position-from-encoding", arcsine)).startswith("d = 2")

    def arccosine_with_the_sign(P):  # right quadrant, but acos of a cosine near 1 has lost its digits
        sin, cos, omega = _slowest_pair(P)
        angle = torch.where(sin >= 0, torch.acos(cos.clamp(-1, 1)), 2 * math.pi - torch.acos(cos.clamp(-1, 1)))
        return torch.round(angle / omega).long()

    message = _failed("ch08-position-from-encoding", arccosine_with_the_sign)
    assert "'d = 512, positions 0..49: the slowest pair turns by 1e-4 a position" in message

    def unrounded(P):
        sin, cos, omega = _slowest_pair(P)
        return (torch.atan2(sin, cos) % (2 * math.pi)) / omega

    assert _first_failure(_failed("ch08-position-from-encoding", unrounded)).startswith("d = 2")


def _heads(queries, keys, values, W_q, W_k, W_v, num_heads, valid_lens, scale_by_model_width=False):
    q = split_heads(queries @ W_q.T, num_heads)
    k, v = split_heads(keys @ W_k.T, num_heads), split_heads(values @ W_v.T, num_heads)
    if valid_lens is not None and valid_lens.dim() == 3:
        valid_lens = valid_lens.unsqueeze(1)
    width = W_q.shape[0] if scale_by_model_width else q.shape[-1]
    return masked_softmax(q @ k.transpose(-2, -1) / math.sqrt(width), valid_lens) @ v  # (b, heads, Q, d_h)


def test_head_contributions_traps_are_named():
    def right(queries, keys, values, W_q, W_k, W_v, W_o, num_heads, valid_lens=None):
        heads = _heads(queries, keys, values, W_q, W_k, W_v, num_heads, valid_lens)
        return heads @ split_heads(W_o[None], num_heads).transpose(-2, -1)

    assert grade("ch09-head-contributions", right).passed

    def rows_of_W_o(queries, keys, values, W_q, W_k, W_v, W_o, num_heads, valid_lens=None):
        heads = _heads(queries, keys, values, W_q, W_k, W_v, num_heads, valid_lens)
        d_h = W_o.shape[0] // num_heads
        blocks = torch.stack([W_o[i * d_h:(i + 1) * d_h] for i in range(num_heads)])  # (heads, d_h, d)
        return heads @ blocks

    assert _first_failure(_failed("ch09-head-contributions", rows_of_W_o)).startswith("W_o sends head 1 to columns 0-1")

    def scaled_by_d(queries, keys, values, W_q, W_k, W_v, W_o, num_heads, valid_lens=None):
        heads = _heads(queries, keys, values, W_q, W_k, W_v, num_heads, valid_lens, scale_by_model_width=True)
        return heads @ split_heads(W_o[None], num_heads).transpose(-2, -1)

    assert _first_failure(_failed("ch09-head-contributions", scaled_by_d)).startswith("self-attention, no mask")

    def output_shared_equally(queries, keys, values, W_q, W_k, W_v, W_o, num_heads, valid_lens=None):
        heads = _heads(queries, keys, values, W_q, W_k, W_v, num_heads, valid_lens)
        output = heads.transpose(1, 2).flatten(2) @ W_o.T  # (b, Q, d)
        return (output / num_heads).unsqueeze(1).expand(-1, num_heads, -1, -1)

    assert _first_failure(_failed("ch09-head-contributions", output_shared_equally)).startswith("by hand")

    def mask_against_the_heads_axis(queries, keys, values, W_q, W_k, W_v, W_o, num_heads, valid_lens=None):
        q = split_heads(queries @ W_q.T, num_heads)
        k, v = split_heads(keys @ W_k.T, num_heads), split_heads(values @ W_v.T, num_heads)
        heads = masked_softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), valid_lens) @ v
        return heads @ split_heads(W_o[None], num_heads).transpose(-2, -1)

    assert _first_failure(_failed("ch09-head-contributions", mask_against_the_heads_axis)).startswith(
        "a (batch, Q, K) mask that differs by sequence, with batch = heads = 2")


def _relative(X, W_q, W_k, W_v, W_o, bias, num_heads, valid_lens, index, before_scaling=False):
    q = split_heads(X @ W_q.T, num_heads)
    k, v = split_heads(X @ W_k.T, num_heads), split_heads(X @ W_v.T, num_heads)
    scores = q @ k.transpose(-2, -1)
    if before_scaling:
        scores = (scores + bias[:, index]) / math.sqrt(q.shape[-1])
    else:
        scores = scores / math.sqrt(q.shape[-1]) + bias[:, index]
    heads = masked_softmax(scores, valid_lens) @ v
    return heads.transpose(1, 2).flatten(2) @ W_o.T


def _offsets(n):
    positions = torch.arange(n)
    return positions[None, :] - positions[:, None]  # j - i


def test_relative_bias_traps_are_named():
    def right(X, W_q, W_k, W_v, W_o, bias, num_heads, valid_lens=None):
        reach = (bias.shape[1] - 1) // 2
        index = _offsets(X.shape[1]).clamp(-reach, reach) + reach
        return _relative(X, W_q, W_k, W_v, W_o, bias, num_heads, valid_lens, index)

    assert grade("ch09-relative-bias", right).passed

    def offset_i_minus_j(X, W_q, W_k, W_v, W_o, bias, num_heads, valid_lens=None):
        reach = (bias.shape[1] - 1) // 2
        index = (-_offsets(X.shape[1])).clamp(-reach, reach) + reach
        return _relative(X, W_q, W_k, W_v, W_o, bias, num_heads, valid_lens, index)

    assert _first_failure(_failed("ch09-relative-bias", offset_i_minus_j)).startswith("by hand")

    def unclipped(X, W_q, W_k, W_v, W_o, bias, num_heads, valid_lens=None):  # far offsets wrap around
        reach = (bias.shape[1] - 1) // 2
        index = (_offsets(X.shape[1]) + reach) % bias.shape[1]
        return _relative(X, W_q, W_k, W_v, W_o, bias, num_heads, valid_lens, index)

    message = _failed("ch09-relative-bias", unclipped)
    assert _first_failure(message).startswith("9 tokens, offsets clipped at 2")

    def bias_before_scaling(X, W_q, W_k, W_v, W_o, bias, num_heads, valid_lens=None):
        reach = (bias.shape[1] - 1) // 2
        index = _offsets(X.shape[1]).clamp(-reach, reach) + reach
        return _relative(X, W_q, W_k, W_v, W_o, bias, num_heads, valid_lens, index, before_scaling=True)

    assert "'large scores: the bias is added after the 1/sqrt(d_h) scaling'" in _failed(
        "ch09-relative-bias", bias_before_scaling)

    def padding_ignored(X, W_q, W_k, W_v, W_o, bias, num_heads, valid_lens=None):
        return right(X, W_q, W_k, W_v, W_o, bias, num_heads)

    assert _first_failure(_failed("ch09-relative-bias", padding_ignored)).startswith("valid lengths (5, 2)")
