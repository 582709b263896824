"""Checkers for Chapter 5 (Bahdanau attention): tasks the chapter leaves to the reader.

* ``ch05-backward-states``: the backward half of the annotations, from a forward GRU, for a padded
  batch: each sentence reversed within its own length, so that no state reads the padding.
* ``ch05-attention-aer``: the alignment error rate of teacher-forced attention over a padded batch,
  with sure *and* possible gold links, counts summed over the corpus.

The expected states come from ``torch.nn.GRU``'s own bidirectional mode on packed sequences (its
backward direction holding the reader's weights); the expected AER from ``attn_utils.attention_aer``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..metrics import attention_aer
from .core import Case, register, seeded_randn


@torch.no_grad()
def _backward_states(rnn: nn.GRU, x: torch.Tensor, lens: torch.Tensor) -> torch.Tensor:
    """The backward direction of a bidirectional GRU with ``rnn``'s weights, on packed sequences.

    Computed in float64 on the CPU and rounded once to ``x``'s dtype, so that a float32 answer is
    compared with the exact states rather than with another kernel's rounding.
    """
    both = nn.GRU(rnn.input_size, rnn.hidden_size, batch_first=True, bidirectional=True, dtype=torch.float64)
    for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
        getattr(both, name + "_reverse").copy_(getattr(rnn, name))
    packed = nn.utils.rnn.pack_padded_sequence(x.cpu().double(), lens.cpu(), batch_first=True,
                                               enforce_sorted=False)
    out, _ = both(packed)
    out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
    return out[..., rnn.hidden_size:].to(x.dtype)  # (batch, steps, hidden): zeros at the padding


def _gru(inputs: int, hidden: int, seed: int) -> nn.GRU:
    torch.manual_seed(seed)
    return nn.GRU(inputs, hidden, batch_first=True)


@register("ch05-backward-states")
def backward_states_cases(device: torch.device) -> list[Case]:
    def case(name, rnn, x, lens):
        return Case(name, (x, torch.tensor(lens), rnn.to(device)), _backward_states(rnn, x, torch.tensor(lens)))

    # By hand: zero weights and a candidate bias of atanh(1/2) make every step h <- 1/4 + h/2, whatever
    # the input, so the state after k steps is 1/2 - 1/2^(k+1): it counts the tokens read.
    counter = _gru(2, 1, seed=0)
    with torch.no_grad():
        for p in counter.parameters():
            p.zero_()
        counter.bias_ih_l0[2] = math.atanh(0.5)  # the candidate's input bias b_in
    padded = seeded_randn(3, 5, 3, seed=5)
    padded[1, 2:], padded[2, 1:] = 100.0, -100.0  # huge inputs at the padding
    return [
        case("by hand: every step adds 1/4 and halves the state, lengths 3 and 2 padded to 4 "
             "(expected [[0.4375, 0.375, 0.25, 0], [0.375, 0.25, 0, 0]])", counter, torch.ones(2, 4, 2), [3, 2]),
        case("no padding: three sentences of 6 tokens", _gru(3, 4, seed=1), seeded_randn(3, 6, 3, seed=2),
             [6, 6, 6]),
        case("lengths 5, 2 and 1, huge inputs at the padding: no state may read them", _gru(3, 4, seed=3),
             padded, [5, 2, 1]),
        case("one sentence of one token", _gru(3, 2, seed=6), seeded_randn(1, 1, 3, seed=7), [1]),
        case("lengths 4, 7 and 3 (the longest is not first), 5 units", _gru(2, 5, seed=8),
             seeded_randn(3, 7, 2, seed=9), [4, 7, 3]),
    ]


def _links(mask: torch.Tensor) -> set:
    """``(source, target)`` links of a boolean ``(target, source)`` matrix."""
    return {(i, j) for j, i in mask.nonzero().tolist()}


def _aer(weights, src_valid_lens, sure, possible) -> torch.Tensor:
    """``attn_utils.attention_aer`` over the batch: one matrix and one set of links per sentence."""
    aer = attention_aer(list(weights), [_links(m) for m in sure], [_links(m) for m in possible],
                        src_valid_lens=src_valid_lens.tolist())
    return torch.tensor(aer, dtype=torch.float64)


def _one_hot_rows(best: list[list[int]], source: int) -> torch.Tensor:
    """Attention whose row ``j`` of sentence ``b`` puts 0.7 on ``best[b][j]`` and spreads the rest."""
    weights = torch.full((len(best), len(best[0]), source), 0.3 / (source - 1))
    for b, row in enumerate(best):
        for j, i in enumerate(row):
            weights[b, j, i] = 0.7
    return weights


def _gold(shape, links) -> torch.Tensor:
    """A boolean ``(batch, target, source)`` tensor with ``links`` as ``(batch, source, target)``."""
    mask = torch.zeros(shape, dtype=torch.bool)
    for b, i, j in links:
        mask[b, j, i] = True
    return mask


@register("ch05-attention-aer")
def attention_aer_cases(device: torch.device) -> list[Case]:
    def case(name, weights, src_valid_lens, sure, possible=None):
        possible = sure if possible is None else possible | sure
        lens = torch.tensor(src_valid_lens)
        return Case(name, (weights, lens, sure, possible), _aer(weights, lens, sure, possible), atol=1e-6)

    # "the red cats ." -> "les chats rouges .": 4 English words and <eos>, 4 French words and <eos>.
    hand = _one_hot_rows([[0, 1, 1, 3, 4]], 5)  # "chats" looks at "red", like "rouges"
    hand_gold = _gold((1, 5, 5), [(0, 0, 0), (0, 2, 1), (0, 1, 2), (0, 3, 3)])
    unlinked = _one_hot_rows([[0, 2, 1, 0]], 4)  # row 3 has no gold link but looks at a real word
    unlinked_gold = _gold((1, 4, 4), [(0, 0, 0), (0, 2, 1), (0, 1, 2)])
    at_end = _one_hot_rows([[0, 3, 4, 1], [0, 4, 4, 0]], 5)  # rows at <eos> (3, then 4) or padding (4)
    at_end_gold = _gold((2, 4, 5), [(0, 0, 0), (0, 1, 1), (0, 2, 2), (1, 0, 0), (1, 1, 1), (1, 2, 2)])
    # Rows 3 and 4 have only possible links: row 3 finds one, row 4 looks elsewhere.
    maybe = _one_hot_rows([[0, 1, 2, 1, 0]], 4)
    maybe_sure = _gold((1, 5, 4), [(0, 0, 0), (0, 1, 1), (0, 2, 2)])
    maybe_possible = _gold((1, 5, 4), [(0, 1, 3), (0, 2, 3), (0, 2, 4)])
    # One long sentence aligned perfectly, one short one aligned wrongly: the corpus AER weighs the
    # links, not the sentences (the mean of the two sentences' AERs would be 0.5).
    long_short = _one_hot_rows([[0, 1, 2, 3, 4, 5, 6, 7], [1, 0, 0, 0, 0, 0, 0, 0]], 9)  # short: 2 words
    long_short_gold = _gold((2, 8, 9), [(0, i, i) for i in range(8)] + [(1, 0, 0)])
    g = torch.Generator().manual_seed(3)
    random_weights = torch.softmax(seeded_randn(3, 6, 7, seed=4, scale=3.0), dim=-1)
    random_sure = torch.rand(3, 6, 7, generator=g) < 0.2
    random_sure[..., 6] = False  # no gold link to <eos> or padding
    random_possible = torch.rand(3, 6, 7, generator=g) < 0.15
    random_possible[..., 6] = False
    return [
        case("by hand: les chats rouges . with chats looking at red: 3 of 4 links right, "
             "AER = 1 - 2*3/(4 + 4) = 0.25", hand, [4], hand_gold),
        case("a French word with no gold link is not scored, wherever it looks", unlinked, [3], unlinked_gold),
        case("rows whose strongest weight is on <eos> (position src_len) or padding give no link", at_end,
             [3, 4], at_end_gold),
        case("rows with only possible links are scored; a possible link counts in |A & P|, not in |A & S| "
             "(AER = 1 - (3 + 4)/(5 + 3) = 0.125)", maybe, [3], maybe_sure, maybe_possible),
        case("counts summed over the corpus: a long sentence aligned right, a short one wrong "
             "(AER = 1 - 16/18 = 0.111, not the mean 0.5 of the per-sentence AERs)", long_short, [8, 2],
             long_short_gold),
        case("three random sentences with sure and possible links", random_weights, [6, 4, 5], random_sure,
             random_possible),
    ]
