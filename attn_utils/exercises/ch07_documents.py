"""Checkers for chapter 7's documents section (hierarchical attention).

* ``ch07-han-ragged-sentence-vectors``: word attention over sentences stored one after another,
  without padding (a softmax per segment); the reference pools each sentence on its own with
  ``attn_utils.pooling.LearnedQueryPooling``.
* ``ch07-han-per-class-attention``: sentence attention with one context vector per class and one
  document vector per class, each scored by its own row of weights (Mullenbach et al.'s per-label
  attention on the HAN's sentence level); the reference pools once per class with
  ``LearnedQueryPooling``, in float64.
"""

from __future__ import annotations

import math

import torch

from ..pooling import LearnedQueryPooling
from .core import Case, register, seeded_randn


def _pooling(W: torch.Tensor, b: torch.Tensor, u: torch.Tensor) -> LearnedQueryPooling:
    """Yang et al.'s attention pooling with ``W`` (k, d), ``b`` (k,) and the context vector ``u`` (k,) loaded."""
    k, d = W.shape
    pooling = LearnedQueryPooling(d, projection_size=k)
    with torch.no_grad():
        pooling.projection.weight.copy_(W)
        pooling.projection.bias.copy_(b)
        pooling.query.copy_(u)
    return pooling


@torch.no_grad()
def _ragged_sentence_vectors(H, lengths, W, b, u) -> torch.Tensor:
    """The reference: each sentence's rows of ``H`` on their own, pooled by LearnedQueryPooling."""
    pooling = _pooling(W.double(), b.double(), u.double()).double()
    vectors, start = [], 0
    for length in lengths.tolist():
        words = H[start:start + length].double()  # (length, d)
        if length == 0:
            vectors.append(torch.zeros(H.shape[-1], dtype=torch.float64))
        else:
            vectors.append(pooling(words[None], torch.tensor([length]))[0])
        start += length
    return torch.stack(vectors).to(H.dtype)  # (sentences, d)


@register("ch07-han-ragged-sentence-vectors")
def ragged_sentence_vector_cases(device: torch.device) -> list[Case]:
    def case(name, H, lengths, W, b, u):
        lengths = torch.tensor(lengths)
        return Case(name, (H, lengths, W, b, u), _ragged_sentence_vectors(H, lengths, W, b, u))

    d, k = 4, 3
    W, b, u = seeded_randn(k, d, seed=1), seeded_randn(k, seed=2), seeded_randn(k, seed=3)
    by_hand = torch.tensor([[0.0, 1.0], [20.0, 4.0], [5.0, 5.0]])  # tanh(20) = 1 in float32
    return [
        case("by hand: W = I, b = 0, u = (ln 2, 0); words (0, 1), (20, 4) score 0 and ln 2, weights "
             "(1/3, 2/3), vector (40/3, 3); a lone word (5, 5) is its own vector", by_hand, [2, 1],
             torch.eye(2), torch.zeros(2), torch.tensor([0.6931472, 0.0])),
        case("four sentences of 3, 1, 4 and 2 words", seeded_randn(10, d, seed=4), [3, 1, 4, 2], W, b, u),
        case("a sentence of 0 words (between two others) gets the zero vector",
             seeded_randn(5, d, seed=5), [2, 0, 3], W, b, u),
        case("a zero context vector: each sentence vector is the mean of its words",
             seeded_randn(9, d, seed=6), [4, 2, 3], W, b, torch.zeros(k)),
        case("a large context vector (u x 1000): each sentence needs its own maximum, not the batch's",
             seeded_randn(12, d, seed=7), [5, 3, 4], W, b, 1000 * u),
        case("200 sentences of 1 to 5 words", seeded_randn(600, d, seed=8),
             (torch.arange(200) % 5 + 1).tolist(), W, b, u),
    ]


@torch.no_grad()
def _per_class_logits(H, doc_lens, W_s, b_s, U, beta, b) -> torch.Tensor:
    """The reference, one class at a time in float64: class ``c``'s document vectors from
    LearnedQueryPooling with ``U[c]`` as its context vector, then ``beta[c] . v_c + b[c]``."""
    logits = []
    for c in range(U.shape[0]):
        pooling = _pooling(W_s.double(), b_s.double(), U[c].double()).double()
        v_c = pooling(H.double(), doc_lens)  # (batch, d); a document without sentences: 0
        logits.append(v_c @ beta[c].double() + b[c].double())
    return torch.stack(logits, dim=-1).to(H.dtype)  # (batch, C)


@register("ch07-han-per-class-attention")
def per_class_cases(device: torch.device) -> list[Case]:
    def case(name, H, doc_lens, W_s, b_s, U, beta, b):
        args = (H, torch.tensor(doc_lens), W_s, b_s, U, beta, b)
        return Case(name, args, _per_class_logits(*args))

    def params(d, k, C, seed, scale=1.0):
        W_s, b_s = seeded_randn(k, d, seed=seed), seeded_randn(k, seed=seed + 1)
        U = scale * seeded_randn(C, k, seed=seed + 2)
        return W_s, b_s, U, seeded_randn(C, d, seed=seed + 3), seeded_randn(C, seed=seed + 4)

    # By hand: W_s = I, b_s = 0 and the sentences (20, 0), (0, 20) have the keys (1, 0), (0, 1) (tanh(20) = 1
    # in float32); u_0 = (ln 3, 0) scores them ln 3 and 0, weights (3/4, 1/4), v_0 = (15, 5); u_1 = 0 weighs
    # them equally, v_1 = (10, 10). With beta_0 = (1, 1), beta_1 = (1, -1), b = (0.5, -0.5): logits (20.5, -0.5).
    ln3 = math.log(3)
    padded = seeded_randn(2, 5, 4, seed=30)
    padded[0, 3:] = 100.0  # huge values in the padding sentences of the first document
    padded[1, 1:] = -100.0
    d, k = 4, 3
    return [
        case("by hand: keys (1, 0) and (0, 1); u_0 = (ln 3, 0) weighs the sentences (3/4, 1/4), u_1 = 0 equally: "
             "v_0 = (15, 5), v_1 = (10, 10), logits (1, 1) . v_0 + 0.5 = 20.5 and (1, -1) . v_1 - 0.5 = -0.5",
             torch.tensor([[[20.0, 0.0], [0.0, 20.0]]]), [2], torch.eye(2), torch.zeros(2),
             torch.tensor([[ln3, 0.0], [0.0, 0.0]]), torch.tensor([[1.0, 1.0], [1.0, -1.0]]),
             torch.tensor([0.5, -0.5])),
        case("three classes, three documents of 4 sentences", seeded_randn(3, 4, d, seed=10), [4, 4, 4],
             *params(d, k, 3, seed=11)),
        case("documents of 3 and 1 sentences, padding sentences holding +-100: they change nothing", padded, [3, 1],
             *params(d, k, 2, seed=31)),
        case("a document without sentences gets the biases b, not NaN", seeded_randn(2, 3, d, seed=40), [0, 2],
             *params(d, k, 2, seed=41)),
        case("all context vectors equal: one shared v, the HAN's logits beta v + b", seeded_randn(2, 5, d, seed=50),
             [5, 3], seeded_randn(k, d, seed=51), seeded_randn(k, seed=52), seeded_randn(k, seed=53).expand(4, k),
             seeded_randn(4, d, seed=54), seeded_randn(4, seed=55)),
        case("large context vectors (U x 1000): no overflow", seeded_randn(2, 6, d, seed=60), [6, 4],
             *params(d, k, 2, seed=61, scale=1000.0)),
        case("d = 6, k = 5, five classes, three documents", seeded_randn(3, 7, 6, seed=70), [7, 2, 5],
             *params(6, 5, 5, seed=71)),
    ]
