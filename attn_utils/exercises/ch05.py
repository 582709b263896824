"""Checkers for Chapter 5 (Bahdanau attention): one step of additive attention, and maxout.

The attention weights expected come from ``attn_utils.BahdanauDecoder.attend`` itself, with the
reader's matrices loaded into a decoder; maxout is checked against ``torch.nn.functional.max_pool1d``
and, for pools of 2, against the decoder's own deep-output formula.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from ..bahdanau import BahdanauDecoder
from .core import Case, register, seeded_randn


@torch.no_grad()
def _attention_weights(s_prev, keys, src_lens, W_a, v_a) -> torch.Tensor:
    """``BahdanauDecoder.attend``'s weights ``(batch, src)`` with ``W_a`` (a, h) and ``v_a`` (a,) loaded."""
    a, h = W_a.shape
    decoder = BahdanauDecoder(vocab_size=4, embed_size=2, num_hiddens=h, attention_hiddens=a)
    decoder.W_a.weight.copy_(W_a)
    decoder.v_a.weight.copy_(v_a.unsqueeze(0))
    annotations = torch.zeros(keys.shape[0], keys.shape[1], 2 * h)  # (batch, src, 2h): only the weights matter
    _, weights = decoder.attend(s_prev, annotations, keys, src_lens)
    return weights


@register("ch05-write-attention-weights")
def attention_weights_cases(device: torch.device) -> list[Case]:
    def case(name, s_prev, keys, src_lens, W_a, v_a):
        return Case(name, (s_prev, keys, src_lens, W_a, v_a), _attention_weights(s_prev, keys, src_lens, W_a, v_a))

    h, a = 4, 3
    W_a, v_a = seeded_randn(a, h, seed=1), seeded_randn(a, seed=2)
    padded_keys = seeded_randn(2, 5, a, seed=5)
    padded_keys[1, 3:] = 100.0  # huge keys at the padded positions of the second sentence
    return [
        case("two sentences, the second padded after 3 tokens", seeded_randn(2, h, seed=3),
             seeded_randn(2, 5, a, seed=4), torch.tensor([5, 3]), W_a, v_a),
        case("padding with huge keys still gets zero weight", seeded_randn(2, h, seed=6), padded_keys,
             torch.tensor([5, 3]), W_a, v_a),
        case("a one-token source puts all its weight on that token", seeded_randn(3, h, seed=7),
             seeded_randn(3, 4, a, seed=8), torch.tensor([1, 4, 2]), W_a, v_a),
        case("large scores (v_a times 1000): no overflow, no NaN", seeded_randn(2, h, seed=9),
             seeded_randn(2, 6, a, seed=10), torch.tensor([6, 4]), W_a, 1000 * v_a),
        case("a zero state and zero keys: uniform weights over the real tokens", torch.zeros(2, h),
             torch.zeros(2, 5, a), torch.tensor([5, 2]), W_a, v_a),
        case("a larger attention layer (a = 8, h = 6), no padding", seeded_randn(1, 6, seed=11),
             seeded_randn(1, 7, 8, seed=12), torch.tensor([7]), seeded_randn(8, 6, seed=13), seeded_randn(8, seed=14)),
    ]


def _maxout(t: torch.Tensor, pool: int) -> torch.Tensor:
    """Maximum over consecutive groups of ``pool`` units of the last axis, by ``max_pool1d``."""
    units = t.shape[-1]
    pooled = F.max_pool1d(t.reshape(-1, 1, units), kernel_size=pool)  # (rows, 1, units // pool)
    expected = pooled.reshape(*t.shape[:-1], units // pool)
    if pool == 2:  # the formula of BahdanauDecoder.forward must agree
        assert torch.equal(expected, t.unflatten(-1, (units // 2, 2)).amax(dim=-1))
    return expected


@register("ch05-write-maxout")
def maxout_cases(device: torch.device) -> list[Case]:
    def case(name, t, pool=2):
        return Case(name, (t,), _maxout(t, pool), kwargs={"pool": pool})

    return [
        case("pairs of neighbours, (1, 5), (-2, -3), (0, 4): not the two halves",
             torch.tensor([[1.0, 5.0, -2.0, -3.0, 0.0, 4.0]])),
        case("decoder outputs (batch, steps, 2l)", seeded_randn(2, 3, 8, seed=20)),
        case("negative numbers only", -seeded_randn(3, 4, seed=21).abs() - 1),
        case("groups of 3", seeded_randn(4, 9, seed=22), pool=3),
        case("a pool of 1 changes nothing", seeded_randn(2, 5, seed=23), pool=1),
        case("a single vector (2l,)", seeded_randn(10, seed=24)),
    ]
