"""Checkers for chapter 7's documents section (hierarchical attention).

* ``ch07-han-ragged-sentence-vectors``: word attention over sentences stored one after another,
  without padding (a softmax per segment); the reference pools each sentence on its own with
  ``attn_utils.pooling.LearnedQueryPooling``.
* ``ch07-han-write-sentence-vectors``: the sentence vectors of a padded batch of documents, from
  ``attn_utils.han.pool_words``, the function the hierarchical attention network uses.
"""

from __future__ import annotations

import torch

from ..han import pool_words
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
def _sentence_vectors(H, sentence_lens, W, b, u) -> torch.Tensor:
    return pool_words(_pooling(W, b, u), H, sentence_lens)[0]


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


@register("ch07-han-write-sentence-vectors")
def sentence_vector_cases(device: torch.device) -> list[Case]:
    def case(name, H, sentence_lens, W, b, u):
        return Case(name, (H, sentence_lens, W, b, u), _sentence_vectors(H, sentence_lens, W, b, u))

    d, k = 4, 3
    W, b, u = seeded_randn(k, d, seed=21), seeded_randn(k, seed=22), seeded_randn(k, seed=23)
    noisy = seeded_randn(2, 3, 5, d, seed=25)
    noisy[0, 0, 2:] = -50.0  # padded words of a real sentence
    noisy[0, 2] = 50.0  # a padding sentence full of large values
    return [
        case("two documents of 3 and 2 sentences, padded to 3 sentences of 5 words", seeded_randn(2, 3, 5, d, seed=24),
             torch.tensor([[5, 2, 3], [4, 1, 0]]), W, b, u),
        case("values at padded words and padded sentences change nothing", noisy,
             torch.tensor([[2, 5, 0], [3, 3, 3]]), W, b, u),
        case("a document whose sentences are all padding: zero vectors, not NaN", seeded_randn(2, 2, 3, d, seed=26),
             torch.tensor([[0, 0], [3, 1]]), W, b, u),
        case("one-word sentences return that word's vector", seeded_randn(1, 3, 4, d, seed=27),
             torch.tensor([[1, 1, 1]]), W, b, u),
        case("a zero context vector: each sentence vector is the mean of its words", seeded_randn(3, 2, 4, d, seed=28),
             torch.tensor([[4, 2], [3, 0], [1, 4]]), W, b, torch.zeros(k)),
        case("a large context vector (u_w times 1000): no overflow", seeded_randn(2, 2, 6, d, seed=29),
             torch.tensor([[6, 3], [2, 5]]), W, b, 1000 * u),
    ]
