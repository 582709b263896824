"""Checkers for Chapter 4 (the encoder–decoder): the masked sequence loss and length normalisation."""

from __future__ import annotations

import torch

from ..decoding import length_normalised
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


@register("ch04-write-length-normalisation")
def length_normalisation_cases(device: torch.device) -> list[Case]:
    def case(name, scores, lengths, alpha):
        return Case(name, (scores, lengths, alpha), length_normalised(scores, lengths, alpha))

    scores = torch.tensor([[-0.92, -1.02, -2.5], [-3.0, -4.2, -6.1]])  # (batch, beams) log-probabilities
    lengths = torch.tensor([[1, 2, 4], [3, 5, 8]])
    return [
        case("alpha = 1: the mean log-probability per token", scores, lengths, 1.0),
        case("alpha = 0.7", scores, lengths, 0.7),
        case("alpha = 0 changes nothing", scores, lengths, 0.0),
        case("a length of 0 (nothing emitted) counts as 1", torch.tensor([[-0.5, -2.0]]), torch.tensor([[0, 4]]), 1.0),
    ]
