"""Scoring functions: each against its formula worked out pair by pair, plus properties and bad input."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attn_utils.scoring import (
    additive_score,
    concat_score,
    cosine_score,
    distance_score,
    dot_score,
    general_score,
    location_score,
)


def linear(weight) -> nn.Linear:
    """An nn.Linear without bias holding ``weight`` (out, in)."""
    weight = torch.as_tensor(weight, dtype=torch.float64)
    layer = nn.Linear(weight.shape[1], weight.shape[0], bias=False).double()
    with torch.no_grad():
        layer.weight.copy_(weight)
    return layer


def dot(a, b):
    return sum(x * y for x, y in zip(a, b))


def matvec(W, x):
    return [dot(row, x) for row in W]


def test_dot_and_scaled_dot_by_hand():
    q = torch.tensor([[[1.0, 2.0]]])  # (1, 1, 2)
    k = torch.tensor([[[3.0, 4.0], [1.0, 0.0], [-2.0, 1.0]]])  # (1, 3, 2)
    torch.testing.assert_close(dot_score(q, k, scale=1.0), torch.tensor([[[11.0, 1.0, 0.0]]]))
    torch.testing.assert_close(dot_score(q, k), torch.tensor([[[11.0, 1.0, 0.0]]]) / math.sqrt(2))
    torch.testing.assert_close(dot_score(q, k, scale=0.5), torch.tensor([[[5.5, 0.5, 0.0]]]))


def test_additive_by_hand():
    W_q = [[1.0, 0.0, 2.0], [0.5, -1.0, 0.0]]  # hidden 2, query size 3
    W_k = [[0.0, 1.0], [1.0, 1.0]]  # hidden 2, key size 2
    w_v = [[2.0, -1.0]]
    queries = [[0.1, 0.2, 0.3], [-1.0, 0.5, 0.0]]
    keys = [[1.0, -1.0], [0.3, 0.2], [0.0, 2.0]]
    expected = [[dot(w_v[0], [math.tanh(a + b) for a, b in zip(matvec(W_q, q), matvec(W_k, k))]) for k in keys]
                for q in queries]
    scores = additive_score(torch.tensor([queries], dtype=torch.float64), torch.tensor([keys], dtype=torch.float64),
                            linear(W_q), linear(W_k), linear(w_v))
    torch.testing.assert_close(scores, torch.tensor([expected], dtype=torch.float64))


def test_general_by_hand():
    W_a = [[1.0, 2.0], [0.0, -1.0], [3.0, 0.5]]  # (query size 3, key size 2)
    queries = [[1.0, 0.0, 2.0], [0.5, 0.5, -1.0]]
    keys = [[1.0, 1.0], [2.0, -3.0]]
    expected = [[dot(q, matvec(W_a, k)) for k in keys] for q in queries]
    scores = general_score(torch.tensor(queries).double(), torch.tensor(keys).double(), torch.tensor(W_a).double())
    torch.testing.assert_close(scores, torch.tensor(expected, dtype=torch.float64))


def test_concat_by_hand_and_equal_to_additive_with_split_matrix():
    W_a = [[1.0, 0.0, 2.0, -1.0, 0.5], [0.5, -1.0, 0.0, 1.0, 1.0]]  # (hidden 2, 3 + 2)
    v_a = [[1.5, -0.5]]
    queries = [[0.1, 0.2, 0.3], [-1.0, 0.5, 0.0]]
    keys = [[1.0, -1.0], [0.3, 0.2], [0.0, 2.0]]
    expected = [[dot(v_a[0], [math.tanh(z) for z in matvec(W_a, q + k)]) for k in keys] for q in queries]
    q_t, k_t = torch.tensor([queries], dtype=torch.float64), torch.tensor([keys], dtype=torch.float64)
    scores = concat_score(q_t, k_t, linear(W_a), linear(v_a))
    torch.testing.assert_close(scores, torch.tensor([expected], dtype=torch.float64))
    # W_a [q; k] = W_a[:, :3] q + W_a[:, 3:] k: Luong's concat is Bahdanau's additive score.
    W = torch.tensor(W_a, dtype=torch.float64)
    additive = additive_score(q_t, k_t, linear(W[:, :3]), linear(W[:, 3:]), linear(v_a))
    torch.testing.assert_close(additive, scores)


def test_cosine_by_hand_and_sharpness():
    q = [[3.0, 4.0]]
    keys = [[1.0, 0.0], [0.0, 2.0], [-3.0, -4.0]]
    expected = [[dot(q[0], k) / (5.0 * math.hypot(*k)) for k in keys]]  # (0.6, 0.8, -1)
    q_t, k_t = torch.tensor(q), torch.tensor(keys)
    torch.testing.assert_close(cosine_score(q_t, k_t), torch.tensor(expected))
    torch.testing.assert_close(cosine_score(q_t, k_t, beta=10.0), 10 * torch.tensor(expected))
    torch.testing.assert_close(cosine_score(q_t, k_t), torch.cosine_similarity(q_t[:, None], k_t[None], dim=-1))
    per_query = torch.tensor([[2.0], [5.0]])  # one strength per query, (Q, 1)
    two = torch.cat([q_t, q_t])
    torch.testing.assert_close(cosine_score(two, k_t, beta=per_query), per_query * torch.tensor(expected))


def test_cosine_of_a_zero_vector_is_zero_not_nan():
    q = torch.zeros(1, 3, requires_grad=True)
    scores = cosine_score(q, torch.randn(4, 3))
    assert torch.equal(scores, torch.zeros(1, 4))
    scores.sum().backward()
    assert torch.isfinite(q.grad).all()


def test_location_uses_positions_not_content():
    W_a = linear([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, -1.0]])  # max_keys 4, query size 2
    q = torch.tensor([[[1.0, 2.0]]], dtype=torch.float64)
    keys = torch.randn(1, 3, 5, dtype=torch.float64)
    scores = location_score(q, 3, W_a)
    torch.testing.assert_close(scores, torch.tensor([[[1.0, 2.0, 3.0]]], dtype=torch.float64))
    torch.testing.assert_close(location_score(q, keys.shape[-2], W_a), location_score(q, 3, W_a))  # content unused
    with pytest.raises(ValueError, match=r"at most 4 keys .*got 5 keys"):
        location_score(q, 5, W_a)


@settings(max_examples=40, deadline=None)
@given(batch=st.integers(1, 3), nq=st.integers(1, 5), nk=st.integers(1, 6), d=st.integers(1, 8),
       seed=st.integers(0, 2**16))
def test_dot_score_is_scaled_einsum_and_cosine_is_bounded(batch, nq, nk, d, seed):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, nq, d, generator=gen, dtype=torch.float64)
    k = torch.randn(batch, nk, d, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(dot_score(q, k), torch.einsum("bqd,bkd->bqk", q, k) / math.sqrt(d))
    cos = cosine_score(q, k, beta=3.0)
    assert cos.shape == (batch, nq, nk)
    assert bool((cos.abs() <= 3.0 + 1e-9).all())


def test_dot_score_needs_equal_sizes():
    with pytest.raises(ValueError, match=r"same size d.*\(2, 3, 4\) \(d=4\).*\(2, 5, 6\) \(d=6\)"):
        dot_score(torch.randn(2, 3, 4), torch.randn(2, 5, 6))


def test_cosine_score_needs_equal_sizes():
    with pytest.raises(ValueError, match=r"cosine scoring needs .*d=4.*d=3"):
        cosine_score(torch.randn(3, 4), torch.randn(5, 3))


def test_leading_dimensions_must_match():
    with pytest.raises(ValueError, match=r"queries \(2, 3, 4\) and keys \(3, 5, 4\).*leading"):
        dot_score(torch.randn(2, 3, 4), torch.randn(3, 5, 4))


def test_general_score_checks_the_matrix_shape():
    with pytest.raises(ValueError, match=r"W_a must have shape \(query_size, key_size\) = \(4, 6\).*got \(6, 4\)"):
        general_score(torch.randn(2, 3, 4), torch.randn(2, 5, 6), torch.randn(6, 4))


def test_additive_score_checks_hidden_sizes():
    with pytest.raises(ValueError, match="same hidden size; got 3 for queries and 2 for keys"):
        additive_score(torch.randn(1, 2, 4), torch.randn(1, 3, 5), nn.Linear(4, 3), nn.Linear(5, 2), nn.Linear(3, 1))


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="queries must be a tensor, got list"):
        dot_score([[1.0]], torch.randn(1, 1))
    with pytest.raises(ValueError, match=r"keys must have shape \(..., items, features\), got \(3,\)"):
        dot_score(torch.randn(2, 3), torch.randn(3))
    with pytest.raises(ValueError, match="same dtype"):
        dot_score(torch.randn(2, 3), torch.randn(4, 3, dtype=torch.float64))


@pytest.mark.parametrize("dtype", [torch.long, torch.int32, torch.bool])
def test_integer_queries_or_keys_are_refused(dtype):
    # Integer matmuls run in torch, so without the check dot_score would return integer "scores".
    with pytest.raises(ValueError, match=f"keys must be a floating-point tensor, got dtype {dtype}"):
        dot_score(torch.randn(2, 3, 4), torch.ones(2, 5, 4, dtype=dtype))


def test_dot_score_with_no_features_is_zero_not_zero_division():
    assert torch.equal(dot_score(torch.randn(2, 3, 0), torch.randn(2, 5, 0)), torch.zeros(2, 3, 5))


def test_distance_by_hand():
    # W_a maps keys of size 2 into the query space of size 3; the score is -|q - W_a k|^2.
    W_a = [[1.0, 0.0], [0.0, 2.0], [1.0, -1.0]]
    queries = [[1.0, 2.0, 0.0], [0.0, 0.0, 0.0]]
    keys = [[1.0, 1.0], [0.0, 0.5], [2.0, -1.0]]
    # W_a k = (1, 2, 0), (0, 1, -0.5), (2, -2, 3); for the first query: 0, -(1 + 1 + 0.25), -(1 + 16 + 9)
    expected = [[0.0, -2.25, -26.0], [-5.0, -1.25, -17.0]]
    assert expected == [[-sum((a - b) ** 2 for a, b in zip(q, matvec(W_a, k))) for k in keys] for q in queries]
    scores = distance_score(torch.tensor(queries).double(), torch.tensor(keys).double(), torch.tensor(W_a).double())
    torch.testing.assert_close(scores, torch.tensor(expected, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"W_a must have shape \(query_size, key_size\) = \(3, 2\)"):
        distance_score(torch.randn(2, 3), torch.randn(3, 2), torch.randn(2, 3))


def test_additive_and_concat_without_bias_are_odd():
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 3, 4, generator=gen, dtype=torch.float64), torch.randn(2, 5, 3, generator=gen,
                                                                                   dtype=torch.float64)
    W_q, W_k, w_v = linear(torch.randn(6, 4, generator=gen)), linear(torch.randn(6, 3, generator=gen)), linear(
        torch.randn(1, 6, generator=gen))
    W_a = linear(torch.randn(6, 7, generator=gen))
    torch.testing.assert_close(additive_score(-q, -k, W_q, W_k, w_v), -additive_score(q, k, W_q, W_k, w_v))
    torch.testing.assert_close(concat_score(-q, -k, W_a, w_v), -concat_score(q, k, W_a, w_v))
    W = torch.randn(4, 3, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(general_score(-q, -k, W), general_score(q, k, W))  # even
    torch.testing.assert_close(distance_score(-q, -k, W), distance_score(q, k, W))  # even
