"""Checkers for Chapter 4 (the encoder–decoder): tasks the chapter leaves to the reader.

* ``ch04-write-sequence-loss``: the cross-entropy over the real target tokens only.
* ``ch04-write-gnmt-penalty``: GNMT's length penalty ``((5 + L) / 6) ** alpha`` (Wu et al. 2016) applied to
  candidates as a batched decoder leaves them, each cut at its first ``<eos>``.
"""

from __future__ import annotations

import itertools
import math

import torch

from ..losses import sequence_loss
from .core import Case, register


def _logits(batch: int, steps: int, vocab: int, seed: int) -> torch.Tensor:
    return torch.randn(batch, steps, vocab, generator=torch.Generator().manual_seed(seed))


@register("ch04-write-sequence-loss")
def sequence_loss_cases(device: torch.device) -> list[Case]:
    def case(name, logits, labels, valid_len):
        return Case(name, (logits, labels, valid_len), sequence_loss(logits, labels, valid_len))

    labels = torch.tensor([[4, 5, 2, 0], [6, 2, 0, 0], [7, 8, 9, 2]])
    return [
        case("three rows of different lengths", _logits(3, 4, 10, 0), labels, torch.tensor([3, 2, 4])),
        case("padded labels that are not <pad> still do not count", _logits(3, 4, 10, 1),
             torch.tensor([[4, 5, 2, 9], [6, 2, 7, 7], [7, 8, 9, 2]]), torch.tensor([3, 2, 4])),
        case("a long row and a short one: the mean is over tokens, not rows", _logits(2, 5, 6, 2),
             torch.tensor([[4, 5, 4, 5, 2], [2, 0, 0, 0, 0]]), torch.tensor([5, 1])),
        case("no padding at all", _logits(2, 3, 5, 3), torch.tensor([[4, 4, 2], [3, 4, 2]]), torch.tensor([3, 3])),
        case("one sentence", _logits(1, 2, 5, 4), torch.tensor([[4, 2]]), torch.tensor([2])),
    ]


EOS = 2


def gnmt_reference(tokens: torch.Tensor, logprobs: torch.Tensor, alpha: float, eos: int) -> torch.Tensor:
    """Reference, one candidate at a time in Python: the log-probabilities of the tokens up to and including
    the first ``eos`` (all of them without one), summed, divided by ``((5 + L) / 6) ** alpha``."""
    scores = torch.empty(tokens.shape[:-1], dtype=torch.float64)
    for index in itertools.product(*map(range, tokens.shape[:-1])):
        row = tokens[index].tolist()
        length = row.index(eos) + 1 if eos in row else len(row)
        total = math.fsum(logprobs[index].double().tolist()[:length])
        scores[index] = total / ((5 + length) / 6) ** alpha
    return scores.to(logprobs.dtype)


def _candidates(batch: int, beams: int, steps: int, seed: int, dtype=torch.float32):
    """Random tokens 3..19 (no ``<eos>``) and log-probabilities in (-3, 0)."""
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(3, 20, (batch, beams, steps), generator=generator)
    logprobs = -3 * torch.rand(batch, beams, steps, generator=generator, dtype=dtype)
    return tokens, logprobs


def _end_at(tokens, logprobs, ends, after_token=None, after_logprob=None):
    """Copies with ``<eos>`` at step ``ends[b][k]`` of each candidate (None: no ``<eos>``), and what follows it
    replaced by ``after_token`` and ``after_logprob`` where given."""
    tokens, logprobs = tokens.clone(), logprobs.clone()
    for b, row in enumerate(ends):
        for k, end in enumerate(row):
            if end is None:
                continue
            tokens[b, k, end] = EOS
            if after_token is not None:
                tokens[b, k, end + 1:] = after_token
            if after_logprob is not None:
                logprobs[b, k, end + 1:] = after_logprob
    return tokens, logprobs


@register("ch04-write-gnmt-penalty")
def gnmt_penalty_cases(device: torch.device) -> list[Case]:
    def case(name, tokens, logprobs, alpha, expected=None):
        if expected is None:
            expected = gnmt_reference(tokens, logprobs, alpha, EOS)
        return Case(name, (tokens, logprobs, alpha, EOS), expected)

    log = math.log
    hand_tokens = torch.tensor([[[EOS, 0], [7, EOS]]])  # (1 source, 2 beams, 2 steps)
    hand_logprobs = torch.tensor([[[log(0.4), 0.0], [log(0.6), log(0.6)]]])
    ends = [[0, 3, 5], [2, 6, 1]]  # where each of 2 x 3 candidates emits its <eos> (7 steps)
    padded = _end_at(*_candidates(2, 3, 7, seed=1), ends, after_token=0, after_logprob=0.0)
    infinite = _end_at(*_candidates(2, 3, 7, seed=2), ends, after_token=0, after_logprob=-math.inf)
    ran_on_tokens, ran_on_logprobs = _end_at(*_candidates(2, 3, 7, seed=3), ends)  # words after <eos>
    ran_on_tokens[0, 1, 5] = ran_on_tokens[1, 0, 4] = EOS  # and a second <eos> after the first
    cut = _end_at(*_candidates(2, 3, 6, seed=4), [[None, 2, None], [4, None, 0]], after_token=0,
                  after_logprob=0.0)
    mixed = _end_at(*_candidates(3, 4, 8, seed=5, dtype=torch.float64),
                    [[0, 7, None, 3], [5, 1, 2, None], [6, 4, 0, 2]])
    return [
        case("by hand: <eos> alone (probability 0.4) against a word and <eos> (0.6 x 0.6), alpha = 1",
             hand_tokens, hand_logprobs, 1.0, expected=torch.tensor([[log(0.4), 2 * log(0.6) / (7 / 6)]])),
        case("alpha = 0: the plain log-probability of each candidate", *padded, 0.0),
        case("alpha = 0.6, padded after <eos> with <pad>, whose log-probability is -inf", *infinite, 0.6),
        case("the decoder ran on after <eos>: words (one a second <eos>) with finite log-probabilities",
             ran_on_tokens, ran_on_logprobs, 0.6),
        case("no <eos> within the 6 steps of candidates cut off at the limit: every token counts", *cut, 0.6),
        case("float64: 3 sources x 4 beams, alpha = 1.5", *mixed, 1.5),
    ]
