"""Checkers for chapter 7's relations section: the no-attention readout of a BiLSTM, Zhou et al.'s
attention pooling, and SemEval-2010 Task 8's official macro-F1.

The expected values come from the tested code: ``attn_utils.relation.last_states`` (checked in the
tests against ``torch.nn.LSTM``'s own final states), ``attn_utils.pooling.LearnedQueryPooling`` with the
reader's query loaded (then ``tanh``), and ``attn_utils.metrics.semeval_macro_f1``.
"""

from __future__ import annotations

import torch

from ..data.relations import LABELS
from ..metrics import semeval_macro_f1
from ..pooling import LearnedQueryPooling
from ..relation import last_states
from .core import Case, register, seeded_randn


def _padded_output(batch: int, steps: int, hidden: int, lengths: list[int], seed: int, padding: float = 0.0):
    """A made-up BiLSTM output (batch, steps, 2 * hidden) whose steps past each length hold ``padding``."""
    output = seeded_randn(batch, steps, 2 * hidden, seed=seed)
    for row, length in enumerate(lengths):
        output[row, length:] = padding
    return output, torch.tensor(lengths)


@register("ch07-relation-write-last-state")
def last_state_cases(device: torch.device) -> list[Case]:
    def case(name, output, lengths):
        return Case(name, (output, lengths), last_states(output, lengths))

    return [
        case("three sentences of full length (no padding)", *_padded_output(3, 5, 4, [5, 5, 5], seed=1)),
        case("padded with zeros, as pad_packed_sequence leaves it", *_padded_output(3, 6, 4, [6, 3, 1], seed=2)),
        case("padded with large values: never read them", *_padded_output(2, 7, 3, [2, 7], seed=3, padding=50.0)),
        case("a one-token sentence: both directions end on the same token", *_padded_output(1, 4, 2, [1], seed=4)),
        case("hidden size 1", *_padded_output(4, 5, 1, [5, 4, 2, 3], seed=5)),
    ]


@torch.no_grad()
def _zhou(H: torch.Tensor, w: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """``h* = tanh(H alpha^T)``, ``alpha = softmax(w^T tanh(H))`` over the real steps, by LearnedQueryPooling."""
    pool = LearnedQueryPooling(H.shape[-1]).to(H.dtype)
    pool.query.copy_(w)
    return torch.tanh(pool(H, lengths))


@register("ch07-relation-write-zhou-pooling")
def zhou_pooling_cases(device: torch.device) -> list[Case]:
    def case(name, H, w, lengths):
        return Case(name, (H, w, torch.tensor(lengths)), _zhou(H, w, torch.tensor(lengths)))

    padded = seeded_randn(2, 5, 4, seed=11)
    padded[0, 3:] = 100.0  # huge values at the padded steps of the first sentence
    return [
        case("two sentences of full length", seeded_randn(2, 4, 3, seed=10), seeded_randn(3, seed=20), [4, 4]),
        case("padding with huge values gets weight 0", padded, seeded_randn(4, seed=21), [3, 5]),
        case("one-token sentences: alpha = 1 on that token", seeded_randn(3, 6, 2, seed=12), seeded_randn(2, seed=22),
             [1, 1, 1]),
        case("a long query (w times 1000): no overflow, no NaN", seeded_randn(2, 6, 5, seed=13),
             1000 * seeded_randn(5, seed=23), [6, 2]),
        case("equal columns in H: uniform weights, h* = tanh(h)", torch.ones(2, 4, 3) * torch.tensor([0.5, -1.0, 2.0]),
             seeded_randn(3, seed=24), [4, 2]),
        case("hidden size 1", seeded_randn(3, 5, 1, seed=14), torch.tensor([2.0]), [5, 3, 1]),
    ]


def _f1(predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return torch.tensor(semeval_macro_f1(predictions, targets))


@register("ch07-relation-write-macro-f1")
def macro_f1_cases(device: torch.device) -> list[Case]:
    def case(name, predictions, targets):
        predictions, targets = torch.tensor(predictions), torch.tensor(targets)
        return Case(name, (predictions, targets), _f1(predictions, targets))

    other = LABELS.index("Other")
    g = torch.Generator().manual_seed(7)
    targets = torch.randint(0, len(LABELS), (80,), generator=g)
    noisy = torch.where(torch.rand(80, generator=g) < 0.6, targets, torch.randint(0, len(LABELS), (80,), generator=g))
    return [
        case("every prediction right", [0, 1, 2, 5, 18, 18, 17], [0, 1, 2, 5, 18, 18, 17]),
        case("80 sentences, 60 % copied from the targets", noisy.tolist(), targets.tolist()),
        case("right types, wrong directions: all wrong", [1, 0, 3, 2], [0, 1, 2, 3]),
        case("everything predicted Other", [other] * 5, [0, 3, 5, other, 16]),
        case("Other sentences given a relation lower its precision", [4, 4, 4, 4, 9], [4, 4, other, other, 9]),
        case("a type predicted but absent from the targets is not averaged", [0, 0, 14, 2], [0, 0, 2, 2]),
    ]
