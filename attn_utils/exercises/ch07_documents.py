"""Checkers for chapter 7's documents section (hierarchical attention): word attention with a mask,
and the sentence vectors of a batch of documents.

The expected values come from ``attn_utils.pooling.LearnedQueryPooling`` (with the reader's matrices
loaded) and from ``attn_utils.han.pool_words``, the function the hierarchical attention network uses.
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
def _word_weights(H, lengths, W, b, u) -> torch.Tensor:
    pooling = _pooling(W, b, u)
    pooling(H, lengths)
    return pooling.attention_weights


@torch.no_grad()
def _sentence_vectors(H, sentence_lens, W, b, u) -> torch.Tensor:
    return pool_words(_pooling(W, b, u), H, sentence_lens)[0]


@register("ch07-han-write-word-attention")
def word_attention_cases(device: torch.device) -> list[Case]:
    def case(name, H, lengths, W, b, u):
        return Case(name, (H, lengths, W, b, u), _word_weights(H, lengths, W, b, u))

    d, k = 6, 4
    W, b, u = seeded_randn(k, d, seed=1), seeded_randn(k, seed=2), seeded_randn(k, seed=3)
    huge = seeded_randn(2, 5, d, seed=5)
    huge[0, 3:] = 100.0  # the padded words of the first sentence hold huge values
    return [
        case("three sentences padded after 5, 2 and 4 words", seeded_randn(3, 5, d, seed=4),
             torch.tensor([5, 2, 4]), W, b, u),
        case("padded words with huge values still get weight 0", huge, torch.tensor([3, 5]), W, b, u),
        case("a one-word sentence puts all its weight on that word", seeded_randn(2, 4, d, seed=6),
             torch.tensor([1, 4]), W, b, u),
        case("an empty (padding) sentence gets zero weights, not NaN", seeded_randn(2, 4, d, seed=7),
             torch.tensor([0, 3]), W, b, u),
        case("a zero context vector u_w: equal weights on the real words", seeded_randn(2, 6, d, seed=8),
             torch.tensor([6, 3]), W, b, torch.zeros(k)),
        case("a large context vector (u_w times 1000): no overflow, no NaN", seeded_randn(2, 6, d, seed=9),
             torch.tensor([6, 4]), W, b, 1000 * u),
        case("a larger attention layer (k = 10, d = 8)", seeded_randn(1, 7, 8, seed=10), torch.tensor([7]),
             seeded_randn(10, 8, seed=11), seeded_randn(10, seed=12), seeded_randn(10, seed=13)),
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
