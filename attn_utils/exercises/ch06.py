"""Checkers for Chapter 6 (Luong attention): local-p's predicted centre and the attentional state.

The expected results come from ``attn_utils.LuongDecoder`` itself: its ``centre`` (local-p) and its
``attend`` (global attention with the dot score), with the reader's matrices loaded into it.
"""

from __future__ import annotations

import torch

from ..luong import LuongDecoder
from .core import Case, register, seeded_randn


@torch.no_grad()
def _predictive_centre(h_t, W_p, v_p, src_lens) -> torch.Tensor:
    """``LuongDecoder.centre`` of a local-p decoder holding ``W_p`` (h, h) and ``v_p`` (h,)."""
    h = h_t.shape[-1]
    decoder = LuongDecoder(vocab_size=4, embed_size=2, num_hiddens=h, num_layers=1, local="predictive", window=2)
    decoder.W_p.weight.copy_(W_p)
    decoder.v_p.weight.copy_(v_p.unsqueeze(0))
    return decoder.centre(h_t, src_lens, first_step=0)


@register("ch06-write-predictive-centre")
def predictive_centre_cases(device: torch.device) -> list[Case]:
    def case(name, h_t, W_p, v_p, src_lens):
        return Case(name, (h_t, W_p, v_p, src_lens), _predictive_centre(h_t, W_p, v_p, src_lens))

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
        case("a larger state (h = 6), one target step", seeded_randn(2, 1, 6, seed=6), seeded_randn(6, 6, seed=7),
             seeded_randn(6, seed=8), torch.tensor([11, 8])),
    ]


@torch.no_grad()
def _attention_case(name: str, batch: int, queries: int, src: int, h: int, src_lens, seed: int) -> Case:
    """A case whose context comes from ``LuongDecoder.attend`` and whose answer is its ``h̃_t``."""
    decoder = LuongDecoder(vocab_size=4, embed_size=2, num_hiddens=h, num_layers=1, score="dot")
    W_c = seeded_randn(h, 2 * h, seed=seed)
    decoder.W_c.weight.copy_(W_c)
    h_t, enc = seeded_randn(batch, queries, h, seed=seed + 1), seeded_randn(batch, src, h, seed=seed + 2)
    lens = torch.tensor(src_lens)
    attentional, weights, _ = decoder.attend(h_t, enc, lens, 0)  # (batch, Q, h), (batch, Q, src)
    context = weights @ enc  # (batch, Q, h)
    return Case(name, (context, h_t, W_c), attentional)


@register("ch06-write-attentional-state")
def attentional_state_cases(device: torch.device) -> list[Case]:
    return [
        _attention_case("two sentences, three target steps", 2, 3, 5, 4, [5, 3], seed=10),
        _attention_case("one target step (decoding)", 3, 1, 4, 4, [4, 4, 2], seed=20),
        _attention_case("an empty source: the context is zero, h̃_t = tanh(W_c [0; h_t])", 2, 2, 3, 4, [0, 3],
                        seed=30),
        _attention_case("a larger state (h = 8)", 1, 4, 6, 8, [6], seed=40),
    ]
