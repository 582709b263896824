"""Checkers for chapter 10 (the Transformer): tasks the chapter leaves to the reader.

* ``ch10-write-smoothed-loss``: the paper's label-smoothed cross-entropy over a padded batch of
  target sequences, the mean over the real tokens only, finite for logits far apart.
* ``ch10-write-cached-attention-step``: one step of cached multi-head self-attention.

The expected results come from ``attn_utils.sequence_loss`` (PyTorch's ``label_smoothing``) and
from ``attn_utils.MultiHeadAttention`` run on the whole sequence with a causal mask (its last row),
with the reader's matrices loaded.
"""

from __future__ import annotations

import math

import torch

from ..losses import sequence_loss
from ..masking import causal_mask
from .ch09 import multihead_with_weights
from .core import Case, register, seeded_randn


def _padded_labels(batch: int, steps: int, vocab: int, lengths, seed: int, pad: int = 0):
    """Labels ``(batch, steps)`` of real tokens (never ``pad``) followed by ``pad``."""
    gen = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, vocab - 1, (batch, steps), generator=gen)
    labels = labels + (labels >= pad).long()  # every index but pad
    labels[torch.arange(steps) >= torch.tensor(lengths)[:, None]] = pad
    return labels


@register("ch10-write-smoothed-loss")
def smoothed_loss_cases(device: torch.device) -> list[Case]:
    def case(name, logits, labels, pad, epsilon):
        expected = sequence_loss(logits, labels, pad=pad, label_smoothing=epsilon)
        return Case(name, (logits, labels, pad, epsilon), expected)

    hand = torch.tensor([[[0.0, math.log(3.0)]]])  # p = (1/4, 3/4): loss 0.1 ln 4 + 0.9 ln(4/3)
    logits = seeded_randn(3, 6, 7, seed=1)
    full = _padded_labels(3, 6, 7, [6, 6, 6], seed=2)
    padded = _padded_labels(3, 6, 7, [6, 2, 4], seed=3)
    pad3 = _padded_labels(3, 6, 7, [3, 6, 1], seed=4, pad=3)
    empty_row = _padded_labels(3, 6, 7, [5, 0, 2], seed=5)
    return [
        case("by hand: vocabulary 2, logits (0, ln 3), label 1, epsilon 0.2 gives 0.3975",
             hand, torch.tensor([[1]]), 0, 0.2),
        case("epsilon 0, no padding: the plain cross-entropy", logits, full, 0, 0.0),
        case("epsilon 0.1, no padding", logits, full, 0, 0.1),
        case("epsilon 1: the target is uniform over all 7 tokens, the right one included",
             logits, full, 0, 1.0),
        case("rows of 6, 2 and 4 real tokens: the mean is over the 12 real tokens only",
             logits, padded, 0, 0.1),
        case("the padding index is 3, not 0", logits, pad3, 3, 0.1),
        case("a row with no real token at all, beside rows of 5 and 2", logits, empty_row, 0, 0.1),
        case("logits 300 apart: exp underflows to 0, log(softmax) would give inf",
             300 * logits, padded, 0, 0.1),
    ]


@torch.no_grad()
def _cached_case(batch: int, past: int, d: int, heads: int, seed: int, scale: float = 1.0):
    """Arguments and expected output of one cached step, from a full sequence of ``past + 1`` tokens."""
    W = [seeded_randn(d, d, seed=seed + i, scale=scale * d ** -0.5) for i in range(4)]  # W_q, W_k, W_v, W_o
    layer = multihead_with_weights(*W, heads)
    X = seeded_randn(batch, past + 1, d, seed=seed + 10)  # (batch, past + 1, d): the last row is the new token
    past_k, past_v = layer.project_kv(X[:, :past], X[:, :past])  # (batch, heads, past, d / heads) each
    full = layer(X, X, X, causal_mask(past + 1, past + 1))  # every position at once, causally masked
    return (X[:, past:], past_k, past_v, *W), full[:, past:]  # the new token's output (batch, 1, d)


@register("ch10-write-cached-attention-step")
def cached_step_cases(device: torch.device) -> list[Case]:
    def case(name, *shape, **kwargs):
        args, expected = _cached_case(*shape, **kwargs)
        return Case(name, args, expected)

    return [
        case("3 cached tokens, 2 heads", 2, 3, 8, 2, seed=0),
        case("an empty cache (the first token attends to itself only)", 2, 0, 8, 2, seed=20),
        case("1 head", 1, 4, 6, 1, seed=40),
        case("4 heads of 2 features, a batch of 3, 7 cached tokens", 3, 7, 8, 4, seed=60),
        case("8 heads of 1 feature each", 2, 5, 8, 8, seed=80),
        case("large weights: sharp attention, still no overflow", 2, 6, 8, 2, seed=100, scale=8.0),
    ]
