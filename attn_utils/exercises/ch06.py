"""Checkers for Chapter 6 (Luong attention): tasks the chapter leaves to the reader.

* ``ch06-write-predictive-centre``: local-p's predicted centre ``p_t`` for a batch of sentences.
* ``ch06-window-context``: local-p's context vector from the ``2D + 1`` encoder states of each
  window, gathered, without the ``(batch, Q, S)`` scores of every source position.

The expected results come from ``attn_utils``: ``LuongDecoder.centre`` with the reader's matrices
loaded, and the general score over every position followed by ``local_attention_weights``.
"""

from __future__ import annotations

import math

import torch

from ..luong import LuongDecoder, local_attention_weights
from ..scoring import general_score
from .core import Case, refuse_large, register, seeded_randn


@torch.no_grad()
def _predictive_centre(h_t, W_p, v_p, src_valid_lens) -> torch.Tensor:
    """``LuongDecoder.centre`` of a local-p decoder holding ``W_p`` (d_h, d_h) and ``v_p`` (d_h,)."""
    h = h_t.shape[-1]
    decoder = LuongDecoder(vocab_size=4, embed_size=2, num_hiddens=h, num_layers=1, local="predictive", half_width=2)
    decoder.W_p.weight.copy_(W_p)
    decoder.v_p.weight.copy_(v_p.unsqueeze(0))
    return decoder.centre(h_t, src_valid_lens, first_step=0)


@register("ch06-write-predictive-centre")
def predictive_centre_cases(device: torch.device) -> list[Case]:
    def case(name, h_t, W_p, v_p, src_valid_lens):
        return Case(name, (h_t, W_p, v_p, src_valid_lens), _predictive_centre(h_t, W_p, v_p, src_valid_lens))

    h = 4
    W_p, v_p = seeded_randn(h, h, seed=1), seeded_randn(h, seed=2)
    return [
        case("two sentences of different lengths, three target steps", seeded_randn(2, 3, h, seed=3), W_p, v_p,
             torch.tensor([7, 4])),
        case("a zero state: sigmoid(0) = 1/2, so p_t = S/2", torch.zeros(2, 2, h), W_p, v_p, torch.tensor([6, 3])),
        case("a sentence of one token (S = 1): 0 <= p_t <= 1", seeded_randn(1, 4, h, seed=4), W_p, v_p,
             torch.tensor([1])),
        case("saturated states: p_t reaches 0 or S but never leaves [0, S]", seeded_randn(3, 2, h, seed=5, scale=50.0),
             W_p, 20 * v_p, torch.tensor([9, 5, 2])),
        case("a larger state (d_h = 6), one target step", seeded_randn(2, 1, 6, seed=6), seeded_randn(6, 6, seed=7),
             seeded_randn(6, seed=8), torch.tensor([11, 8])),
    ]


@torch.no_grad()
def _window_context(h_t, enc, src_valid_lens, centres, W_a, window) -> torch.Tensor:
    """The reference: general scores at every position, local-p weights, then their average of ``enc``."""
    scores = general_score(h_t, enc, W_a)  # (batch, Q, S)
    return local_attention_weights(scores, src_valid_lens, centres, window, gaussian=True) @ enc  # (batch, Q, d_h)


@register("ch06-window-context")
def window_context_cases(device: torch.device) -> list[Case]:
    def case(name, h_t, enc, src_valid_lens, centres, W_a, window, watch=None):
        args = (h_t, enc, torch.tensor(src_valid_lens), torch.tensor(centres), W_a, window)
        expected = _window_context(*args)
        if watch is not None:  # the same inputs, as tensors that refuse to build a (batch, Q, S) result
            args = (*refuse_large(args[:5], *watch), window)
        return Case(name, args, expected)

    # By hand: 1-number states 0, 1, 2, 3, 4 and W_a = 0, so every score is 0: the window's softmax is
    # 1/5 everywhere, times the Gaussian (sigma = 1), and c = (1 e^-1/2 + 2 + 3 e^-1/2 + 4 e^-2) / 5.
    hand_enc = torch.arange(5.0).reshape(1, 5, 1)
    hand = (math.exp(-0.5) + 2 + 3 * math.exp(-0.5) + 4 * math.exp(-2)) / 5
    d, B, Q, S = 4, 2, 64, 4000
    big_limit = B * Q * S // 2
    names = (f"at least half as many numbers as the {B} x {Q} x {S} (batch x steps x source positions) "
             "scores; gather the 2D + 1 states of each window instead of scoring every position")
    big_centres = (torch.rand(B, Q, generator=torch.Generator().manual_seed(9)) * torch.tensor([[S], [3000]])).tolist()
    return [
        case(f"by hand: states 0..4, zero scores, p_t = 2, D = 2 (expected {hand:.4f})", torch.ones(1, 1, 1),
             hand_enc, [5], [[2.0]], torch.zeros(1, 1), 2),
        case("fractional centres 1.5 and 2.5: the window holds the 2D positions within D of p_t, "
             "not the 2D + 1 around the rounded centre", seeded_randn(2, 2, 3, seed=1), seeded_randn(2, 8, 3, seed=2),
             [8, 8], [[1.5, 2.5], [2.5, 5.5]], seeded_randn(3, 3, seed=3), 2),
        case("centres 0 and 0.4: the window runs off the start of the sentence (no position counted twice)",
             seeded_randn(1, 2, 3, seed=4), seeded_randn(1, 6, 3, seed=5), [6], [[0.0, 0.4]],
             seeded_randn(3, 3, seed=6), 2),
        case("lengths 7 and 3 with centres at 3 and S: the window stops at each sentence's last position",
             seeded_randn(2, 2, 3, seed=7), seeded_randn(2, 7, 3, seed=8), [7, 3], [[3.0, 7.0], [3.0, 2.0]],
             seeded_randn(3, 3, seed=9), 2),
        case("D = 3, states of 5 numbers, four target steps", seeded_randn(2, 4, 5, seed=10),
             seeded_randn(2, 12, 5, seed=11), [12, 9], [[0.0, 3.3, 7.5, 12.0], [1.0, 4.0, 8.6, 9.0]],
             seeded_randn(5, 5, seed=12), 3),
        case(f"{Q} target steps over sources of {S} positions: no tensor of {B} x {Q} x {S} scores",
             seeded_randn(B, Q, d, seed=13), seeded_randn(B, S, d, seed=14), [S, 3000], big_centres,
             seeded_randn(d, d, seed=15), 2, watch=(big_limit, names)),
    ]
