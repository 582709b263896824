"""Hard and soft lookup: by hand, limits in temperature, gradients, masks and bad input."""

from __future__ import annotations

import pytest
import torch

from attn_utils.lookup import hard_lookup, lookup_scores, soft_lookup

KEYS = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
VALUES = torch.tensor([10.0, 20.0, 30.0])


def test_scores_by_hand():
    q = torch.tensor([[1.0, 1.0]])
    torch.testing.assert_close(lookup_scores(q, KEYS, "dot"), torch.tensor([[0.0, 1.0, 2.0]]))
    torch.testing.assert_close(lookup_scores(q, KEYS, "neg_sq_dist"), torch.tensor([[-2.0, -1.0, -2.0]]))


def test_soft_lookup_by_hand():
    # scores -2, -1, -2 -> weights e^-2, e^-1, e^-2 normalised
    q = torch.tensor([[1.0, 1.0]])
    out, weights = soft_lookup(q, KEYS, VALUES)
    e = torch.exp(torch.tensor([-2.0, -1.0, -2.0]))
    expected_w = e / e.sum()
    torch.testing.assert_close(weights, expected_w[None])
    torch.testing.assert_close(out, (expected_w * VALUES).sum()[None])


def test_temperature_limits():
    q = torch.tensor([[0.9, 0.1]])  # nearest key: (1, 0)
    cold, _ = soft_lookup(q, KEYS, VALUES, temperature=1e-3)
    hard, hard_w = hard_lookup(q, KEYS, VALUES)
    torch.testing.assert_close(cold, hard)
    torch.testing.assert_close(hard_w, torch.tensor([[0.0, 1.0, 0.0]]))
    hot, hot_w = soft_lookup(q, KEYS, VALUES, temperature=1e6)
    torch.testing.assert_close(hot, VALUES.mean()[None], atol=1e-3, rtol=0)


def test_soft_lookup_has_gradient_hard_does_not():
    q = torch.tensor([[0.4, 0.3]], requires_grad=True)
    soft_lookup(q, KEYS, VALUES)[0].sum().backward()
    assert q.grad.abs().sum() > 0
    q2 = torch.tensor([[0.4, 0.3]], requires_grad=True)
    out, _ = hard_lookup(q2, KEYS, VALUES)
    assert not out.requires_grad  # argmax is piecewise constant: no gradient reaches the query


def test_vector_values_and_batches():
    keys = torch.randn(2, 5, 3)
    values = torch.randn(2, 5, 4)
    queries = torch.randn(2, 6, 3)
    out, weights = soft_lookup(queries, keys, values, score="dot", valid_lens=torch.tensor([2, 5]))
    assert out.shape == (2, 6, 4) and weights.shape == (2, 6, 5)
    assert weights[0, :, 2:].abs().sum() == 0
    torch.testing.assert_close(out, weights @ values)


def test_hard_lookup_respects_mask_and_empty_rows():
    q = torch.tensor([[[0.0, 2.0]]])  # nearest key is index 2, masked away
    out, weights = hard_lookup(q, KEYS[None], VALUES[None], valid_lens=torch.tensor([2]))
    torch.testing.assert_close(weights, torch.tensor([[[1.0, 0.0, 0.0]]]))  # (0,0) is closer than (1,0)
    out, weights = hard_lookup(q, KEYS[None], VALUES[None], valid_lens=torch.tensor([0]))
    assert torch.equal(weights, torch.zeros(1, 1, 3)) and torch.equal(out, torch.zeros(1, 1))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: soft_lookup(torch.zeros(1, 3), KEYS, VALUES), r"same feature size d; got queries \(1, 3\)"),
        (lambda: soft_lookup(torch.zeros(1, 2), KEYS, VALUES[:2]), r"values must pair one-to-one with keys"),
        (lambda: soft_lookup(torch.zeros(1, 2), KEYS, VALUES, temperature=0), r"temperature must be > 0"),
        (lambda: soft_lookup(torch.zeros(1, 2), KEYS, VALUES, score="cos"), r"score must be one of"),
        (lambda: lookup_scores(torch.zeros(2), KEYS), r"need shape \(\.\.\., n, d\)"),
    ],
)
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_lookup_on_every_device(any_device):
    keys, values = KEYS.to(any_device), VALUES.to(any_device)
    out, _ = soft_lookup(torch.tensor([[1.0, 1.0]], device=any_device), keys, values)
    expected, _ = soft_lookup(torch.tensor([[1.0, 1.0]]), KEYS, VALUES)
    torch.testing.assert_close(out.cpu(), expected)
