"""Checkers for Chapter 6 (Luong attention): tasks the chapter leaves to the reader.

* ``ch06-coverage-weights``: the concat score with See et al.'s coverage term, the running sum of the
  weights of the earlier steps, for a decoder without input feeding.
* ``ch06-window-context``: local-p's context vector from the ``2D + 1`` encoder states of each
  window, gathered, without the ``(batch, Q, S)`` scores of every source position.

The expected results come from an independent computation and from ``attn_utils``: coverage one
sentence and one step at a time in float64, with ``[h_t; h̄_s]`` concatenated as the formula writes it;
and the general score over every position followed by ``local_attention_weights``.
"""

from __future__ import annotations

import math

import torch

from ..luong import local_attention_weights
from ..scoring import general_score
from .core import Case, refuse_large, register, seeded_randn


@torch.no_grad()
def coverage_weights_reference(h_t, enc, src_valid_lens, W_a, v_a, w_c) -> torch.Tensor:
    """The reference, one sentence and one step at a time in float64: ``[h_t; h̄_s]`` concatenated as the
    formula writes it, the softmax over the sentence's own positions only, and the coverage a running sum."""
    batch, Q, _ = h_t.shape
    W_a, v_a, w_c = W_a.double(), v_a.double(), w_c.double()
    weights = torch.zeros(batch, Q, enc.shape[1], dtype=torch.float64)
    for b in range(batch):
        S = int(src_valid_lens[b])
        states = enc[b, :S].double()  # the real source states only: (S, d_hid)
        coverage = torch.zeros(S, dtype=torch.float64)  # cov_0 = 0
        for t in range(Q):
            pairs = torch.cat([h_t[b, t].double().expand(S, -1), states], dim=-1)  # [h_t; h̄_s]: (S, 2 d_hid)
            scores = torch.tanh(pairs @ W_a.T + coverage[:, None] * w_c) @ v_a  # (S,)
            weights[b, t, :S] = torch.softmax(scores, dim=0)
            coverage = coverage + weights[b, t, :S]
    return weights.to(h_t.dtype)


@register("ch06-coverage-weights")
def coverage_weight_cases(device: torch.device) -> list[Case]:
    def case(name, h_t, enc, src_valid_lens, W_a, v_a, w_c):
        args = (h_t, enc, torch.tensor(src_valid_lens), W_a, v_a, w_c)
        return Case(name, args, coverage_weights_reference(*args))

    def params(d, seed, coverage=1.0):
        W_a, v_a = seeded_randn(d, 2 * d, seed=seed), seeded_randn(d, seed=seed + 1)
        return W_a, v_a, coverage * seeded_randn(d, seed=seed + 2)

    # By hand (d_hid = 1): W_a = (0, 1) reads only h̄_s = +20 or -20, tanh = +1 or -1, and v_a = ln(3)/2
    # gives the scores +-ln(3)/2: weights (3/4, 1/4) at t = 0. With w_c = -40 the coverage pushes both
    # arguments of tanh below -10 from t = 1 on: tanh = -1 at both positions, weights (1/2, 1/2).
    hand_enc = torch.tensor([[[20.0], [-20.0]]])
    padded_enc = seeded_randn(2, 6, 3, seed=40)
    padded_enc[0, 4:] = 100.0  # huge values after the first sentence's 4 positions
    padded_enc[1, 2:] = -100.0
    return [
        case("w_c = 0: no coverage, the concat weights of every step (the first d_hid columns of W_a "
             "read h_t, the last ones h̄_s)", seeded_randn(2, 3, 4, seed=10), seeded_randn(2, 5, 4, seed=11), [5, 5],
             *params(4, seed=12, coverage=0.0)),
        case("by hand: weights (3/4, 1/4) at t = 0, then the coverage (3/4, 1/4) and (5/4, 3/4) makes "
             "both scores -ln(3)/2: (1/2, 1/2) at t = 1 and t = 2", torch.zeros(1, 3, 1), hand_enc, [2],
             torch.tensor([[0.0, 1.0]]), torch.tensor([math.log(3) / 2]), torch.tensor([-40.0])),
        case("six steps with a strong coverage term (w_c x 4): the coverage at step t sums the weights "
             "of ALL earlier steps, each computed with its own coverage", seeded_randn(2, 6, 3, seed=30),
             seeded_randn(2, 4, 3, seed=31), [4, 4], *params(3, seed=32, coverage=4.0)),
        case("two sentences of 5 positions, four steps", seeded_randn(2, 4, 3, seed=20),
             seeded_randn(2, 5, 3, seed=21), [5, 5], *params(3, seed=22)),
        case("lengths 4 and 2, padding holding +-100: weight 0 on padding at every step",
             seeded_randn(2, 5, 3, seed=41), padded_enc, [4, 2], *params(3, seed=42)),
        case("a source of one token: weight 1 on it at every step", seeded_randn(1, 3, 2, seed=50),
             seeded_randn(1, 1, 2, seed=51), [1], *params(2, seed=52)),
        case("d_hid = 6, lengths 9 and 7, ten steps", seeded_randn(2, 10, 6, seed=60), seeded_randn(2, 9, 6, seed=61),
             [9, 7], *params(6, seed=62)),
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
