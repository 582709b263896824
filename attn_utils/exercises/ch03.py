"""Checkers for Chapter 3 (scoring functions): tasks the chapter leaves to the reader.

* ``ch03-padded-additive``: additive attention (with a bias) over a batch whose queries *and* keys
  are padded to different lengths; a padded query's output is all zeros.
* ``ch03-low-rank-general``: general scores ``q^T W_r k`` with ``W_r`` the best rank-r approximation
  of ``W_a``, computed as dot products of r-dimensional projections.
"""

from __future__ import annotations

import torch

from ..attention import attend
from ..scoring import additive_score, general_score
from .core import Case, register, seeded_randn


def _padded_additive(queries, keys, values, query_lens, key_lens, W_q, W_k, w_v, b):
    """The reference: attn_utils' additive score, and a boolean mask from both sets of lengths."""
    scores = additive_score(queries, keys, lambda q: q @ W_q.T + b, lambda k: k @ W_k.T,
                            lambda h: h @ w_v[:, None])  # (batch, Q, K)
    real_q = torch.arange(queries.shape[1]) < query_lens[:, None]  # (batch, Q)
    real_k = torch.arange(keys.shape[1]) < key_lens[:, None]  # (batch, K)
    return attend(scores, values, real_q[:, :, None] & real_k[:, None, :])[0]  # (batch, Q, v)


@register("ch03-padded-additive")
def padded_additive_cases(device: torch.device) -> list[Case]:
    def params(seed, h=5, dq=3, dk=4, bias=True):
        W_q, W_k = seeded_randn(h, dq, seed=seed), seeded_randn(h, dk, seed=seed + 1)
        w_v, b = seeded_randn(h, seed=seed + 2), seeded_randn(h, seed=seed + 3) if bias else torch.zeros(h)
        return W_q, W_k, w_v, b

    def data(seed, dq=3, dk=4):
        return seeded_randn(2, 3, dq, seed=seed), seeded_randn(2, 5, dk, seed=seed + 1), seeded_randn(2, 5, 2,
                                                                                                      seed=seed + 2)

    def case(name, inputs, query_lens, key_lens, weights):
        args = (*inputs, torch.tensor(query_lens), torch.tensor(key_lens), *weights)
        return Case(name, args, _padded_additive(*args))

    return [
        case("no padding (query lengths 3 and 3, key lengths 5 and 5), no bias", data(0), [3, 3], [5, 5],
             params(10, bias=False)),
        case("key lengths 2 and 5: padded keys get no weight", data(1), [3, 3], [2, 5], params(20)),
        case("query lengths 1 and 2: the outputs of padded queries are all zeros", data(2), [1, 2], [5, 5],
             params(30)),
        case("query lengths (3, 1) and key lengths (4, 2) together", data(3), [3, 1], [4, 2], params(40)),
        case("a sequence with no keys (key length 0): all its outputs are zeros", data(4), [3, 3], [5, 0],
             params(50)),
        case("queries of size 6, keys of size 2, hidden size 1, a bias", data(5, dq=6, dk=2), [2, 3], [3, 5],
             params(60, h=1, dq=6, dk=2)),
    ]


def _low_rank_scores(queries, keys, W_a, rank):
    """The reference: the general score with the truncated SVD of ``W_a`` (Eckart–Young)."""
    U, S, Vh = torch.linalg.svd(W_a.double(), full_matrices=False)
    W_r = (U[:, :rank] * S[:rank]) @ Vh[:rank]  # (query_size, key_size), rank <= rank
    return general_score(queries.double(), keys.double(), W_r).to(queries.dtype)  # (batch, Q, K)


@register("ch03-low-rank-general")
def low_rank_general_cases(device: torch.device) -> list[Case]:
    def case(name, queries, keys, W_a, rank):
        return Case(name, (queries, keys, W_a, rank), _low_rank_scores(queries, keys, W_a, rank), atol=1e-4)

    q, k = seeded_randn(2, 3, 6, seed=1), seeded_randn(2, 5, 4, seed=2)
    W_a = seeded_randn(6, 4, seed=3)
    hand = torch.tensor([[1.0, 0.0], [0.0, 3.0]])  # singular values 3 and 1: rank 1 keeps the second axis
    eye_q, eye_k = torch.eye(2)[None], torch.tensor([[[1.0, 1.0], [2.0, -1.0]]])
    return [
        case("by hand: W_a = diag(1, 3), rank 1 keeps 3 on the second axis (the larger singular value)",
             eye_q, eye_k, hand, 1),
        case("full rank 4 of a 6 x 4 W_a: the general score itself", q, k, W_a, 4),
        case("rank 2 of a 6 x 4 W_a", q, k, W_a, 2),
        case("rank 1 of a 6 x 4 W_a", q, k, W_a, 1),
        case("rank 0: every score is 0", q, k, W_a, 0),
        case("a 3 x 7 W_a (more key than query features), rank 2", seeded_randn(1, 2, 3, seed=4),
             seeded_randn(1, 6, 7, seed=5), seeded_randn(3, 7, seed=6), 2),
    ]
