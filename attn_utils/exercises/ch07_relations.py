"""Checkers for chapter 7's relations section: the no-attention readout of a BiLSTM, Zhang et al.'s
position-aware attention pooling (which the section does not implement), and SemEval-2010 Task 8's
official macro-F1.

The expected values come from the tested code, ``attn_utils.relation.last_states`` (checked in the
tests against ``torch.nn.LSTM``'s own final states) and ``attn_utils.metrics.semeval_macro_f1``, and,
for the position-aware pooling, from a computation one sentence and one word at a time in float64,
with each word's distances to the two nominals found by comparisons rather than by tensor arithmetic.
"""

from __future__ import annotations

import math

import torch

from ..data.relations import LABELS
from ..metrics import semeval_macro_f1
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


def _distance(i: int, first: int, last: int) -> int:
    """Zhang et al.'s distance of word ``i`` to a nominal on tokens ``first`` to ``last``: ``i - first``
    before it, 0 on it, ``i - last`` after it."""
    if i < first:
        return i - first
    return i - last if i > last else 0


@torch.no_grad()
def _position_aware(H, lengths, spans, W_h, P, v) -> torch.Tensor:
    """The reference, one sentence and one word at a time in float64: each word's two distances by
    ``_distance``, clipped to ``[-K, K]``, pick its rows of ``P``; the softmax runs over the real words only."""
    K = (P.shape[1] - 1) // 2
    W_h, P, v = W_h.double(), P.double(), v.double()
    pooled = torch.zeros(H.shape[0], H.shape[-1], dtype=torch.float64)
    for b in range(H.shape[0]):
        words = H[b, :int(lengths[b])].double()  # (T, d)
        scores = []
        for i, h in enumerate(words):
            feature = W_h @ h
            for j in range(2):  # e1, then e2, each with its own table
                delta = _distance(i, int(spans[b, j, 0]), int(spans[b, j, 1]))
                feature = feature + P[j, K + max(-K, min(K, delta))]
            scores.append(v @ torch.tanh(feature))
        pooled[b] = torch.softmax(torch.stack(scores), dim=0) @ words
    return pooled.to(H.dtype)


@register("ch07-relation-position-aware-pooling")
def position_aware_cases(device: torch.device) -> list[Case]:
    def case(name, H, lengths, spans, W_h, P, v):
        args = (H, torch.tensor(lengths), torch.tensor(spans), W_h, P, v)
        return Case(name, args, _position_aware(*args))

    def params(d, k, K, seed, scale=1.0):
        return seeded_randn(k, d, seed=seed), seeded_randn(2, 2 * K + 1, k, seed=seed + 1), \
            scale * seeded_randn(k, seed=seed + 2)

    # By hand: W_h = 0 and K = 2; only e1's table is non-zero, 1 at the distances +1 and +2, and
    # v = ln(2) / tanh(1), so the words at distances 0, +1, +2 from e1 (word 0) score 0, ln 2, ln 2.
    hand_P = torch.zeros(2, 5, 1)
    hand_P[0, 3:] = 1.0
    padded, _ = _padded_output(2, 8, 2, [5, 8], seed=30, padding=100.0)  # huge values after 5 words
    return [
        case("by hand: e1 = word 0, e2 = word 2; only the distances +1 and +2 to e1 score ln 2: weights "
             "(1/5, 2/5, 2/5) on the rows (5, 0), (0, 5), (5, 5), r = (3, 4)",
             torch.tensor([[[5.0, 0.0], [0.0, 5.0], [5.0, 5.0]]]), [3], [[[0, 0], [2, 2]]], torch.zeros(1, 2),
             hand_P, torch.tensor([math.log(2) / math.tanh(1.0)])),
        case("e1 and e2 have tables of their own: P[0] for the distances to e1, P[1] for those to e2",
             seeded_randn(2, 7, 4, seed=60), [7, 7], [[[1, 1], [4, 4]], [[0, 0], [5, 5]]], *params(4, 3, 7, seed=61)),
        case("nominals of three tokens (a word and its two markers): distance 0 across the span, counted "
             "from its last token after it", seeded_randn(2, 12, 4, seed=10), [12, 12],
             [[[1, 3], [6, 8]], [[0, 2], [7, 9]]], *params(4, 3, 12, seed=11)),
        case("sentences of 15 words and K = 2: every distance beyond +-2 uses the row of +-2",
             seeded_randn(2, 15, 4, seed=20), [15, 15], [[[6, 6], [9, 9]], [[2, 4], [12, 14]]],
             *params(4, 3, 2, seed=21)),
        case("lengths 5 and 8, padding holding 100: weight 0 on padding", padded, [5, 8],
             [[[0, 0], [4, 4]], [[1, 1], [5, 6]]], *params(4, 3, 8, seed=31)),
        case("a long v (x 1000): no overflow, no NaN", seeded_randn(2, 6, 3, seed=40), [6, 4],
             [[[1, 1], [3, 4]], [[0, 0], [2, 2]]], *params(3, 2, 6, seed=41, scale=1000.0)),
        case("d = 6, k = 5, K = 3, four sentences", seeded_randn(4, 10, 6, seed=50), [10, 7, 9, 4],
             [[[0, 2], [7, 9]], [[2, 2], [4, 6]], [[3, 3], [8, 8]], [[0, 0], [3, 3]]], *params(6, 5, 3, seed=51)),
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
