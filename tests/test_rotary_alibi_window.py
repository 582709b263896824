"""Rotary embeddings, ALiBi and sliding-window masks, against independent computations by hand."""

from __future__ import annotations

import math

import pytest
import torch

from attn_utils.alibi import alibi_bias, alibi_slopes
from attn_utils.masking import causal_mask, sliding_window_mask
from attn_utils.rotary import apply_rotary, rotary_cos_sin


def test_rotary_equals_complex_multiplication_of_the_pairs():
    x = torch.randn(2, 3, 7, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    got = apply_rotary(x, base=100.0)
    z = torch.view_as_complex(x.reshape(2, 3, 7, 4, 2).contiguous())  # pairs (x_2i, x_2i+1) as complex numbers
    theta = 100.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)  # (4,)
    angles = torch.arange(7, dtype=torch.float64)[:, None] * theta  # (7, 4)
    want = torch.view_as_real(z * torch.polar(torch.ones_like(angles), angles)).reshape(2, 3, 7, 8)
    torch.testing.assert_close(got, want)


def test_rotary_dot_products_depend_only_on_the_offset():
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(16, dtype=torch.float64, generator=g), torch.randn(16, dtype=torch.float64, generator=g)

    def score(p, r):
        rq = apply_rotary(q[None], torch.tensor([p]))[0]
        rk = apply_rotary(k[None], torch.tensor([r]))[0]
        return torch.dot(rq, rk).item()

    for offset in (0, 1, 5, 37):
        values = [score(p, p + offset) for p in (0, 3, 100, 2048)]
        assert values == pytest.approx([values[0]] * 4, abs=1e-9)
    assert score(0, 1) != pytest.approx(score(0, 2))  # and it does depend on the offset


def test_rotary_keeps_shape_dtype_norms_and_position_zero():
    x = torch.randn(5, 6, dtype=torch.float16)
    y = apply_rotary(x)
    assert y.shape == x.shape and y.dtype == torch.float16
    torch.testing.assert_close(y[0], x[0])  # angle 0 at position 0
    x32 = torch.randn(4, 5, 6)
    torch.testing.assert_close(apply_rotary(x32).norm(dim=-1), x32.norm(dim=-1))  # rotations keep lengths
    shifted = apply_rotary(x32, positions=torch.arange(3, 8))  # tokens after 3 cached ones
    torch.testing.assert_close(shifted, apply_rotary(torch.cat([torch.zeros(4, 3, 6), x32], dim=1))[:, 3:])


def test_rotary_names_bad_inputs():
    with pytest.raises(ValueError, match="must be even"):
        apply_rotary(torch.randn(3, 5))
    with pytest.raises(ValueError, match="do not broadcast"):
        apply_rotary(torch.randn(3, 4), positions=torch.arange(5))
    with pytest.raises(ValueError, match="floating-point tensor"):
        apply_rotary(torch.ones(3, 4, dtype=torch.long))


@pytest.mark.parametrize("heads, want", [
    (8, [2.0 ** -i for i in range(1, 9)]),
    (16, [2.0 ** (-i / 2) for i in range(1, 17)]),
    # 12 heads: the 8 slopes of 8 heads, then every other slope of 16 heads (2^-0.5, 2^-1.5, ...), the first 4
    (12, [2.0 ** -i for i in range(1, 9)] + [2.0 ** -0.5, 2.0 ** -1.5, 2.0 ** -2.5, 2.0 ** -3.5]),
])
def test_alibi_slopes_follow_the_paper(heads, want):
    assert alibi_slopes(heads).tolist() == pytest.approx(want)


def test_alibi_bias_by_hand_with_the_queries_last():
    bias = alibi_bias(2, 2, 4)  # slopes 1/16 and 1/256; queries at positions 2 and 3
    assert bias.shape == (2, 2, 4)
    distances = torch.tensor([[2.0, 1, 0, -1], [3, 2, 1, 0]])
    torch.testing.assert_close(bias[0], -distances / 16)
    torch.testing.assert_close(bias[1], -distances / 256)
    with pytest.raises(ValueError, match="num_queries must be at most num_keys"):
        alibi_bias(2, 5, 4)


@pytest.mark.parametrize("num_queries, num_keys, window", [(6, 6, 3), (1, 9, 4), (3, 7, 1), (5, 5, 9)])
def test_sliding_window_mask_against_a_loop(num_queries, num_keys, window):
    got = sliding_window_mask(num_queries, num_keys, window)
    want = torch.zeros(num_queries, num_keys, dtype=torch.bool)
    for i in range(num_queries):
        position = num_keys - num_queries + i
        for j in range(num_keys):
            want[i, j] = position - window < j <= position
    assert torch.equal(got, want)
    assert torch.equal(sliding_window_mask(num_queries, num_keys, num_keys), causal_mask(num_queries, num_keys))
    with pytest.raises(ValueError, match="window must be a positive integer"):
        sliding_window_mask(2, 3, 0)


def test_alibi_slopes_are_a_geometric_sequence_for_powers_of_two():
    for heads in (1, 2, 4, 32):
        s = alibi_slopes(heads)
        assert s[0].item() == pytest.approx(2 ** (-8 / heads))
        assert torch.allclose(s[1:] / s[:-1], torch.full((heads - 1,), 2 ** (-8 / heads)))
    assert math.isclose(alibi_slopes(1).item(), 2 ** -8)


@pytest.mark.parametrize("base", [float("nan"), float("inf"), 0.0, -2.0, True, "10000", None])
def test_rotary_refuses_a_base_that_is_not_a_positive_finite_number(base):
    """A NaN base made the rotated features NaN (all but the first pair) without a word."""
    for call in (lambda: apply_rotary(torch.randn(3, 4), base=base), lambda: rotary_cos_sin(torch.arange(3), 4, base)):
        with pytest.raises(ValueError, match="base must be a finite number > 0"):
            call()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_rotary_refuses_positions_that_are_not_finite(bad):
    positions = torch.tensor([0.0, bad, 2.0])
    with pytest.raises(ValueError, match=r"positions must be finite, got \[0.0, (nan|inf|-inf), 2.0\]"):
        apply_rotary(torch.randn(3, 4), positions)
    with pytest.raises(ValueError, match="positions must be finite"):
        rotary_cos_sin(positions, 4)


def test_rotary_names_positions_of_no_number_type_and_odd_sizes():
    with pytest.raises(ValueError, match="positions must be a tensor of integer .* got dtype torch.bool"):
        apply_rotary(torch.randn(3, 4), torch.tensor([True, False, True]))  # read as positions 1, 0, 1
    with pytest.raises(ValueError, match="positions must be a tensor of positions"):
        apply_rotary(torch.randn(3, 4), "0 1 2")
    with pytest.raises(ValueError, match="must be even"):
        rotary_cos_sin(torch.arange(3), 5)  # three angles per position for two pairs
    with pytest.raises(ValueError, match="dim must be a positive integer"):
        rotary_cos_sin(torch.arange(3), 0)


def test_rotary_cos_sin_are_float64_values_rounded_once_and_fractional_positions_allowed():
    """cos and sin of the float64 angles, rounded to the dtype only at the end."""
    for positions in (torch.arange(7), torch.arange(3, 10), torch.tensor([0.5, 2.25, 1e4])):
        for dtype in (torch.float32, torch.float64):
            angles = positions.to(torch.float64)[..., None] * 500.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
            cos, sin = rotary_cos_sin(positions, 8, 500.0, dtype)
            assert torch.equal(cos, angles.cos().to(dtype)) and torch.equal(sin, angles.sin().to(dtype))


def test_rotary_scores_at_millions_of_positions_are_as_exact_as_float32_allows():
    """Positions 10**6 and 10**7: rounding the angles to float32 before cos/sin moved this score by 0.03
    and 0.5; with the angles in float64 the float32 score is within float32 rounding of the float64 one."""
    torch.manual_seed(0)
    q, k = torch.randn(64, dtype=torch.float64), torch.randn(64, dtype=torch.float64)
    for p in (10**6, 10**7):
        positions = torch.tensor([p, p - 3])  # the query 3 positions after the key
        exact = apply_rotary(torch.stack([q, k])[None], positions)[0]
        single = apply_rotary(torch.stack([q, k]).float()[None], positions)[0]
        exact_score, single_score = exact[0] @ exact[1], single[0] @ single[1]
        scale = (q.abs() @ k.abs()).item()  # the size of the terms summed
        assert abs(single_score.item() - exact_score.item()) < 64 * 2e-7 * scale


def test_rotary_reads_position_values_on_an_accelerator_only_under_strict_checks():
    from host_syncs import HostSyncs
    from simulated_accelerator import ACCELERATOR, SimulatedAccelerator

    from attn_utils.checks import strict_checks

    with SimulatedAccelerator():
        x, bad = torch.randn(3, 4).to(ACCELERATOR), torch.tensor([0.0, float("nan"), 2.0]).to(ACCELERATOR)
        with HostSyncs() as syncs:
            apply_rotary(x, bad)  # NaN out, as the attention's NaN rule allows without strict checks
            apply_rotary(x, torch.arange(3).to(ACCELERATOR))  # integers: nothing to read
        assert syncs.total == 0
        with strict_checks(), pytest.raises(ValueError, match="positions must be finite"):
            apply_rotary(x, bad)


def test_sliding_window_mask_refuses_more_queries_than_keys_as_alibi_does():
    """Its first rows saw no key at all (all False), while alibi_bias refused the same shape."""
    for call in (lambda: sliding_window_mask(5, 3, 2), lambda: alibi_bias(2, 5, 3)):
        with pytest.raises(ValueError, match=r"num_queries must be at most num_keys .*num_queries=5 > num_keys=3"):
            call()
    assert sliding_window_mask(3, 3, 2).any(dim=-1).all()


def test_masks_name_counts_and_flags_of_the_wrong_kind():
    with pytest.raises(ValueError, match="symmetric must be True or False, got 'no'"):
        alibi_bias(2, 3, 3, symmetric="no")  # read as True
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="num_queries must be a non-negative integer"):
            causal_mask(bad, 3)  # -1 failed inside torch.arange, 2.5 and True gave a mask
    assert causal_mask(0, 3).shape == (0, 3) and causal_mask(3, 2).tolist() == [[False, False], [True, False],
                                                                                 [True, True]]


@pytest.mark.parametrize("lengths, what", [([1.5, 2.0], "whole numbers"), ([float("nan"), 2.0], "whole numbers"),
                                           ([-1, 2], ">= 0")])
def test_sequence_mask_refuses_lengths_that_are_no_lengths(lengths, what):
    """d2l's sequence_mask read 1.5 as 2, NaN and -1 as 0."""
    from attn_utils.masking import sequence_mask

    with pytest.raises(ValueError, match=f"valid_len must (hold|be) {what}"):
        sequence_mask(torch.ones(2, 3), torch.tensor(lengths))
    with pytest.raises(ValueError, match="a tensor valid_len"):
        sequence_mask(torch.ones(2, 3), [1, 2])
    assert sequence_mask(torch.ones(2, 3), torch.tensor([5, 2])).tolist() == [[1, 1, 1], [1, 1, 0]]  # as d2l
