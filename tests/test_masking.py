"""masked_softmax, make_mask and sequence_mask: by hand, against d2l, by property, and bad input."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attn_utils.masking import lengths_to_mask, make_mask, masked_softmax, sequence_mask
from attn_utils.tolerance import assert_close


def test_hand_computed_case():
    # Row 1: scores (0, ln 2, ln 3, 5) with 3 valid keys -> (1, 2, 3) / 6 and 0 for the padding.
    # Row 2: scores (1, 1, 9, 9) with 2 valid keys -> (1/2, 1/2, 0, 0).
    X = torch.tensor([[[0.0, math.log(2), math.log(3), 5.0]], [[1.0, 1.0, 9.0, 9.0]]])
    weights = masked_softmax(X, torch.tensor([3, 2]))
    expected = torch.tensor([[[1 / 6, 2 / 6, 3 / 6, 0.0]], [[0.5, 0.5, 0.0, 0.0]]])
    torch.testing.assert_close(weights, expected)


def test_no_mask_is_plain_softmax():
    X = torch.randn(2, 3, 5)
    torch.testing.assert_close(masked_softmax(X), torch.softmax(X, dim=-1))


def test_per_query_lengths():
    X = torch.zeros(1, 3, 4)
    weights = masked_softmax(X, torch.tensor([[1, 2, 4]]))
    expected = torch.tensor([[[1, 0, 0, 0], [0.5, 0.5, 0, 0], [0.25, 0.25, 0.25, 0.25]]])
    torch.testing.assert_close(weights, expected)


def test_boolean_mask_equals_lengths():
    X = torch.randn(2, 3, 4)
    lengths = torch.tensor([2, 3])
    mask = torch.arange(4) < lengths[:, None, None]  # (2, 1, 4), broadcasts over queries
    torch.testing.assert_close(masked_softmax(X, mask), masked_softmax(X, lengths))


def test_causal_boolean_mask():
    X = torch.zeros(1, 3, 3)
    causal = torch.ones(3, 3, dtype=torch.bool).tril()
    weights = masked_softmax(X, causal)
    expected = torch.tensor([[[1, 0, 0], [0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3]]])
    torch.testing.assert_close(weights, expected)


def test_lengths_broadcast_over_heads():
    X = torch.randn(2, 4, 3, 5)  # (batch, heads, queries, keys)
    per_seq = masked_softmax(X, torch.tensor([2, 5]))
    per_query = masked_softmax(X, torch.tensor([[2, 2, 2], [5, 5, 5]]))
    torch.testing.assert_close(per_seq, per_query)
    assert per_seq[0, :, :, 2:].abs().sum() == 0
    torch.testing.assert_close(per_seq[1], torch.softmax(X[1], dim=-1))


def test_fully_masked_rows_are_zero_not_nan():
    X = torch.randn(2, 2, 3)
    weights = masked_softmax(X, torch.tensor([0, 3]))
    assert torch.equal(weights[0], torch.zeros(2, 3))
    torch.testing.assert_close(weights[1], torch.softmax(X[1], dim=-1))


def test_all_minus_inf_scores_give_zero_and_finite_gradients():
    X = torch.full((1, 2, 3), float("-inf"))
    X[0, 1] = torch.tensor([0.0, float("-inf"), 1.0])
    X.requires_grad_(True)
    weights = masked_softmax(X)
    assert torch.equal(weights[0, 0], torch.zeros(3))
    torch.testing.assert_close(weights[0, 1], torch.tensor([1.0, 0.0, math.e]) / (1 + math.e))
    (weights * torch.arange(3.0)).sum().backward()
    assert torch.isfinite(X.grad).all()


def test_gradient_of_fully_masked_row_is_zero():
    X = torch.randn(2, 1, 3, requires_grad=True)
    masked_softmax(X, torch.tensor([0, 2])).sum().backward()
    assert torch.equal(X.grad[0], torch.zeros(1, 3))
    assert torch.isfinite(X.grad).all()


def test_large_logits_are_stable():
    X = torch.tensor([[[1e4, 1e4 - math.log(3), -1e4]]])
    weights = masked_softmax(X, torch.tensor([3]))
    torch.testing.assert_close(weights, torch.tensor([[[0.75, 0.25, 0.0]]]))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision(dtype):
    X = torch.randn(3, 4, 6) * 20
    lengths = torch.tensor([1, 4, 0])
    weights = masked_softmax(X.to(dtype), lengths)
    assert weights.dtype == dtype
    assert torch.isfinite(weights).all()
    reference = masked_softmax(X.to(dtype).float(), lengths)
    torch.testing.assert_close(weights.float(), reference, atol=1e-2, rtol=1e-2)
    assert torch.equal(weights[2].float(), torch.zeros(4, 6))


def test_gradcheck_float64():
    X = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: masked_softmax(x, torch.tensor([[1, 2, 4], [3, 0, 2]])), (X,))


def test_lengths_on_another_device_and_as_list():
    X = torch.randn(2, 2, 3)
    torch.testing.assert_close(masked_softmax(X, [1, 2]), masked_softmax(X, torch.tensor([1, 2])))


def test_float_lengths_accepted_when_whole():
    X = torch.randn(2, 2, 3)
    torch.testing.assert_close(masked_softmax(X, torch.tensor([1.0, 2.0])), masked_softmax(X, torch.tensor([1, 2])))


@pytest.mark.parametrize("lengths", [[7], [float("inf")], [[1, 4]]])
def test_lengths_beyond_keys_are_refused(lengths):
    # They used to be read as "all keys", hiding lengths that belong to another batch.
    with pytest.raises(ValueError, match="at most the number of keys, 3"):
        masked_softmax(torch.randn(1, 2, 3), torch.tensor(lengths))


def test_lengths_equal_to_keys_mean_all_visible():
    X = torch.randn(1, 2, 3)
    torch.testing.assert_close(masked_softmax(X, torch.tensor([3])), torch.softmax(X, dim=-1))


@pytest.mark.parametrize("bad", ["2", ["a", "b"], object()])
def test_lengths_of_another_type_are_refused(bad):
    with pytest.raises(ValueError, match="valid_lens must be None, integer lengths or a boolean mask"):
        masked_softmax(torch.randn(1, 2, 3), bad)


def test_masked_nan_and_inf_scores_are_ignored():
    X = torch.tensor([[1.0, 2.0, float("nan"), float("inf")]])
    torch.testing.assert_close(masked_softmax(X, torch.tensor([2])), torch.cat([torch.softmax(X[:, :2], -1),
                                                                                torch.zeros(1, 2)], -1))


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_visible_nan_or_plus_inf_score_gives_a_nan_row(bad):
    # The documented rule: a +inf score is not read as "all the weight"; the row says NaN.
    X = torch.tensor([[1.0, bad, 0.0], [1.0, 2.0, 0.0]])
    weights = masked_softmax(X)
    assert weights[0].isnan().all() and weights[1].isfinite().all()


# ---- against d2l ---------------------------------------------------------------------------


@pytest.mark.parametrize("lengths", [[2, 3], [[1, 3], [2, 4]], [4, 1]])
def test_equals_d2l(d2l, lengths):
    torch.manual_seed(0)
    X = torch.rand(2, 2, 4)
    valid_lens = torch.tensor(lengths)
    torch.testing.assert_close(masked_softmax(X, valid_lens), d2l.masked_softmax(X, valid_lens))


def test_d2l_differs_only_on_fully_masked_rows(d2l):
    X = torch.rand(2, 2, 4)
    ours, theirs = masked_softmax(X, torch.tensor([0, 2])), d2l.masked_softmax(X, torch.tensor([0, 2]))
    torch.testing.assert_close(theirs[0], torch.full((2, 4), 0.25))  # d2l spreads weight over padding
    assert torch.equal(ours[0], torch.zeros(2, 4))  # we give none
    torch.testing.assert_close(ours[1], theirs[1])


# ---- properties ------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    batch=st.integers(1, 4), queries=st.integers(1, 5), keys=st.integers(1, 7),
    scale=st.floats(0.1, 1e3), seed=st.integers(0, 2**16), per_query=st.booleans(),
)
def test_rows_sum_to_one_over_visible_keys_and_zero_elsewhere(batch, queries, keys, scale, seed, per_query):
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(batch, queries, keys, generator=gen) * scale
    shape = (batch, queries) if per_query else (batch,)
    lengths = torch.randint(0, keys + 1, shape, generator=gen)
    weights = masked_softmax(X, lengths)
    mask = make_mask(X, lengths).expand_as(X)
    assert torch.isfinite(weights).all()
    assert (weights >= 0).all()
    assert torch.equal(weights[~mask], torch.zeros_like(weights[~mask]))
    sums = weights.sum(-1)
    visible = mask.any(-1)
    torch.testing.assert_close(sums[visible], torch.ones_like(sums[visible]))
    assert torch.equal(sums[~visible], torch.zeros_like(sums[~visible]))


@settings(max_examples=40, deadline=None)
@given(keys=st.integers(1, 6), seed=st.integers(0, 2**16), shift=st.floats(-50, 50))
def test_shift_invariance(keys, seed, shift):
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(2, 3, keys, generator=gen, dtype=torch.float64)
    lengths = torch.randint(0, keys + 1, (2,), generator=gen)
    torch.testing.assert_close(masked_softmax(X + shift, lengths), masked_softmax(X, lengths))


# ---- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("valid_lens", "message"),
    [
        (torch.tensor([1, 2, 3]),
         r"valid_lens has shape \(3,\).*scores of shape \(2, 3, 4\).*expected \(2,\) or \(2, 3\)"),
        (torch.tensor([[1, 2], [3, 4]]), r"valid_lens has shape \(2, 2\)"),
        (torch.tensor([1, -1]), r"valid_lens must be >= 0"),
        (torch.tensor([1.5, 2.0]), r"whole numbers"),
        (torch.ones(2, 3, 5, dtype=torch.bool),
         r"boolean mask of shape \(2, 3, 5\) does not broadcast to scores of shape \(2, 3, 4\)"),
        (torch.tensor([1j, 2j]), r"integer or boolean"),
    ],
)
def test_bad_valid_lens(valid_lens, message):
    with pytest.raises(ValueError, match=message):
        masked_softmax(torch.randn(2, 3, 4), valid_lens)


def test_bad_scores():
    with pytest.raises(ValueError, match="floating-point scores"):
        masked_softmax(torch.ones(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="expects a tensor"):
        masked_softmax([[1.0, 2.0]])
    with pytest.raises(ValueError, match="keys axis"):
        masked_softmax(torch.tensor(1.0))


# ---- helpers ----------------------------------------------------------------------------------


def test_lengths_to_mask():
    expected = torch.tensor([[True, False, False], [True, True, True], [False, False, False]])
    assert torch.equal(lengths_to_mask(torch.tensor([1, 3, 0]), 3), expected)


def test_sequence_mask_matches_d2l(d2l):
    X = torch.arange(24.0).reshape(2, 3, 4)
    valid = torch.tensor([1, 2])
    torch.testing.assert_close(sequence_mask(X.clone(), valid, value=-1), d2l.sequence_mask(X.clone(), valid, value=-1))
    with pytest.raises(ValueError, match=r"valid_len must have shape \(2,\)"):
        sequence_mask(X, torch.tensor([1, 2, 3]))


def test_masked_softmax_on_accelerator(gpu_device):
    X = torch.randn(2, 3, 4)
    lengths = torch.tensor([0, 2])
    on_gpu = masked_softmax(X.to(gpu_device), lengths)  # lengths left on the CPU on purpose
    assert on_gpu.device.type == gpu_device.type
    assert_close(on_gpu, masked_softmax(X, lengths))
    half = masked_softmax(X.to(gpu_device).half(), lengths.to(gpu_device))
    assert torch.isfinite(half).all() and half.dtype == torch.float16


def test_a_mask_larger_than_the_scores_is_refused():
    # It broadcast, so the weights silently came out (2, 2, 3) for scores (1, 1, 3).
    with pytest.raises(ValueError, match=r"boolean mask of shape \(2, 2, 3\) does not broadcast to scores of shape"):
        masked_softmax(torch.randn(1, 1, 3), torch.ones(2, 2, 3, dtype=torch.bool))
