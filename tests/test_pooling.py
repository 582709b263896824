"""LearnedQueryPooling against the two papers' formulas written out by hand."""

from __future__ import annotations

import math

import pytest
import torch

from attn_utils.pooling import LearnedQueryPooling, masked_mean, pool_by_scores


def _by_hand(H, query, W=None, b=None, length=None):
    """One sequence, scalar loops: scores, softmax over the first ``length`` steps, weighted sum."""
    steps, size = H.shape
    length = steps if length is None else length
    scores = []
    for t in range(length):
        if W is None:
            u = [math.tanh(float(H[t, j])) for j in range(size)]
        else:
            u = [math.tanh(sum(float(W[k, j]) * float(H[t, j]) for j in range(size)) + float(b[k]))
                 for k in range(W.shape[0])]
        scores.append(sum(ui * float(q) for ui, q in zip(u, query)))
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    alpha = [e / sum(exps) for e in exps] + [0.0] * (steps - length)
    pooled = [sum(alpha[t] * float(H[t, j]) for t in range(steps)) for j in range(size)]
    return torch.tensor(alpha), torch.tensor(pooled)


@pytest.mark.parametrize("projection_size", [None, 3])
def test_matches_the_formula_with_padding(projection_size):
    torch.manual_seed(0)
    pool = LearnedQueryPooling(5, projection_size).double()
    H = torch.randn(3, 4, 5, dtype=torch.float64)
    lengths = torch.tensor([4, 2, 1])
    out = pool(H, lengths)
    W = None if projection_size is None else pool.projection.weight.detach()
    b = None if projection_size is None else pool.projection.bias.detach()
    for i in range(3):
        alpha, pooled = _by_hand(H[i], pool.query.detach(), W, b, int(lengths[i]))
        torch.testing.assert_close(pool.attention_weights[i], alpha.double())
        torch.testing.assert_close(out[i], pooled.double())


def test_padding_values_change_nothing_and_empty_sequences_give_zeros():
    torch.manual_seed(1)
    pool = LearnedQueryPooling(4, 6)
    H = torch.randn(2, 5, 4)
    mask = torch.tensor([[True, True, True, False, False], [False] * 5])
    changed = H.clone()
    changed[0, 3:] = 100.0
    torch.testing.assert_close(pool(H, mask)[0], pool(changed, mask)[0])
    assert torch.equal(pool(H, mask)[1], torch.zeros(4))
    assert torch.equal(pool.attention_weights[1], torch.zeros(5))


def test_gradients_reach_the_query_and_bad_shapes_are_named():
    pool = LearnedQueryPooling(4)
    pool(torch.randn(2, 3, 4)).sum().backward()
    assert pool.query.grad is not None and pool.query.grad.abs().sum() > 0
    with pytest.raises(ValueError, match=r"expects H of shape \(batch, steps, 4\), got \(2, 3\)"):
        pool(torch.randn(2, 3))
    with pytest.raises(ValueError, match="size must be a positive integer, got 0"):
        LearnedQueryPooling(0)


def test_runs_on_every_device(any_device):
    pool = LearnedQueryPooling(4, 2).to(any_device)
    out = pool(torch.randn(2, 3, 4, device=any_device), torch.tensor([3, 1], device=any_device))
    assert out.device.type == any_device.type and pool.attention_weights[1, 1:].abs().sum() == 0


def test_masked_mean_by_hand_with_lengths_and_masks():
    H = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [float("nan"), 0.0]], [[5.0, 6.0], [7.0, 8.0], [9.0, 10.0]]])
    mean, weights = masked_mean(H, torch.tensor([2, 3]))  # the NaN is padding: it changes nothing
    torch.testing.assert_close(mean, torch.tensor([[2.0, 3.0], [7.0, 8.0]]))
    torch.testing.assert_close(weights, torch.tensor([[0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3]]))
    mask = torch.tensor([[False, True, False], [True, False, True]])
    mean, weights = masked_mean(H, mask)
    torch.testing.assert_close(mean, torch.tensor([[3.0, 4.0], [7.0, 8.0]]))
    mean, weights = masked_mean(H[1:], torch.tensor([0]))  # no real step: zeros, not NaN
    assert torch.equal(mean, torch.zeros(1, 2)) and torch.equal(weights, torch.zeros(1, 3))
    torch.testing.assert_close(masked_mean(H[1:])[0], H[1:].mean(1))  # no lengths: every step
    with pytest.raises(ValueError, match=r"masked_mean expects X of shape \(batch, steps, size\), got \(2, 3\)"):
        masked_mean(torch.zeros(2, 3))


def test_learned_query_pooling_pools_by_its_scores():
    torch.manual_seed(2)
    pool = LearnedQueryPooling(4, 3)
    H, lengths = torch.randn(2, 5, 4), torch.tensor([5, 2])
    scores = torch.tanh(pool.projection(H)) @ pool.query  # (batch, steps)
    expected, weights = pool_by_scores(scores, H, lengths)
    torch.testing.assert_close(pool(H, lengths), expected)
    torch.testing.assert_close(pool.attention_weights, weights)

