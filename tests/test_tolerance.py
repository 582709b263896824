"""The tolerance policy (attn_utils.tolerance): dtype, device and magnitude, and the checkers' use of it."""

from __future__ import annotations

import math

import pytest
import torch

from attn_utils.exercises import grade
from attn_utils.exercises.core import REGISTRY, Case
from attn_utils.masking import masked_softmax
from attn_utils.tolerance import (
    RTOL,
    assert_close,
    full_float32,
    least_precise,
    magnitude,
    precision,
    tf32_enabled,
    tolerance,
)


def to_tf32(x: torch.Tensor) -> torch.Tensor:
    """``x`` (float32) with its mantissa cut to TF32's 10 bits, as CUDA's TF32 kernels read their inputs
    (they round to nearest; cutting is the worse case)."""
    return (x.view(torch.int32) & ~0x1FFF).view(torch.float32)


def attention(q, k, v):
    """softmax(q k^T / sqrt(d)) v, written out."""
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


def test_precision_follows_the_dtype_and_tf32_on_cuda():
    assert precision(torch.float64) == "float64" and precision(torch.float32) == "float32"
    assert precision(torch.float16) == precision(torch.half) == "float16"
    assert precision(torch.bfloat16, "cuda") == "bfloat16"
    assert precision(torch.float32, "mps") == "float32"
    # cuDNN's TF32 switch is on by default: float32 on CUDA counts as TF32 unless it is turned off
    assert tf32_enabled()
    assert precision(torch.float32, "cuda") == "tf32" and precision(torch.float32, torch.device("cuda:1")) == "tf32"
    with full_float32():
        assert not tf32_enabled() and precision(torch.float32, "cuda") == "float32"
        assert torch.get_float32_matmul_precision() == "highest"
    assert tf32_enabled()
    with pytest.raises(ValueError, match="torch.int64 is not a floating-point dtype"):
        precision(torch.int64)


def test_full_float32_restores_every_switch_even_after_an_error():
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")  # TF32 matrix products, as a reader may have asked
    try:
        assert tf32_enabled()
        with pytest.raises(KeyError), full_float32():
            assert not tf32_enabled()
            raise KeyError("inside")
        assert tf32_enabled() and torch.get_float32_matmul_precision() == "high"
    finally:
        torch.set_float32_matmul_precision(before)
    assert torch.get_float32_matmul_precision() == before


def test_tolerance_scales_with_the_magnitude_and_not_below_one():
    assert tolerance(torch.float32) == {"atol": RTOL["float32"], "rtol": RTOL["float32"]}
    assert tolerance(torch.float32, "cpu", 30.0)["atol"] == pytest.approx(30 * RTOL["float32"])
    assert tolerance(torch.float32, "cpu", 1e-3) == tolerance(torch.float32, "cpu", 0.0)
    assert tolerance(torch.float32, "cuda")["rtol"] == RTOL["tf32"] > RTOL["float32"]
    # the precisions are ordered as their rounding is
    assert RTOL["float64"] < RTOL["float32"] < RTOL["tf32"] <= RTOL["float16"] < RTOL["bfloat16"]
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="scale must be a finite magnitude"):
            tolerance(torch.float32, "cpu", bad)


def test_least_precise_and_magnitude():
    assert least_precise([torch.float64, torch.float32]) == torch.float32
    assert least_precise([torch.float32, torch.bfloat16, torch.float16]) == torch.bfloat16
    assert least_precise([torch.int64, torch.bool]) == torch.float32
    assert magnitude(torch.tensor([1.0, -7.5, float("inf"), float("nan")]), torch.tensor([3]), "text") == 7.5
    assert magnitude() == 0.0 and magnitude(torch.empty(0)) == 0.0


def test_float32_rounding_passes_and_a_one_percent_error_fails_at_large_scores():
    """Scores near 30 in float32: the rounding error (about 1e-5 here, on outputs near 10) sits a hundred
    times inside the policy's tolerance, relative to the output's size; an error of 1 % in one entry is
    caught."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (4 * torch.randn(2, 4, 16, 8, generator=g, dtype=torch.float64) for _ in range(3))
    exact = attention(q, k, v)
    assert (q @ k.transpose(-2, -1)).abs().max() / math.sqrt(8) > 25  # large scores, as in ch09's trap
    one_pass = attention(q.float(), k.float(), v.float())
    by_head = torch.stack([attention(q[:, h].float(), k[:, h].float(), v[:, h].float()) for h in range(4)], 1)
    for got in (one_pass, by_head):
        assert_close(got, exact)
    wrong = one_pass.clone()
    wrong[0, 0, 0, 0] *= 1.01
    with pytest.raises(AssertionError):
        assert_close(wrong, exact)


def test_tf32_rounding_needs_the_tf32_tolerance():
    """What CUDA's TF32 kernels do to a float32 computation, emulated on the CPU (an error of about 2e-3
    on outputs near 1.3): the float32 tolerance rejects it, the one the policy gives float32 on CUDA
    accepts it with a margin of about 5."""
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 32, 64, generator=g) for _ in range(3))
    exact = attention(q.double(), k.double(), v.double())
    tf32 = attention(to_tf32(q), to_tf32(k), to_tf32(v))
    with pytest.raises(AssertionError):
        assert_close(tf32, exact, device="cpu")
    assert_close(tf32, exact, device="cuda")


def test_assert_close_compares_nan_and_inf_in_place():
    want = torch.tensor([1.0, float("nan"), float("-inf")])
    assert_close(want.clone(), want)
    with pytest.raises(AssertionError):
        assert_close(torch.tensor([1.0, 0.0, float("-inf")]), want)


# --- the checkers ------------------------------------------------------------------------------------------

def test_checkers_compare_with_tf32_off_so_cuda_gets_the_cpus_tolerance(monkeypatch):
    seen = {}

    def solution(x):
        seen["precision on cuda"] = precision(torch.float32, "cuda")
        return torch.softmax(x, dim=-1)

    scores = torch.tensor([[30.0, 29.0, 0.0]])
    monkeypatch.setitem(REGISTRY, "test-softmax", lambda device: [
        Case("float32 softmax", (scores,), torch.softmax(scores, dim=-1))])
    assert grade("test-softmax", solution).passed
    assert seen["precision on cuda"] == "float32" and tf32_enabled()
    case = REGISTRY["test-softmax"](torch.device("cpu"))[0]
    with full_float32():
        assert case.tolerance(case.expected, torch.device("cuda")) == case.tolerance(case.expected, torch.device("cpu"))


def test_case_tolerance_follows_the_result_and_can_be_exact():
    expected = torch.tensor([40.0, 0.5])
    case = Case("c", (), expected)
    assert case.tolerance(expected, torch.device("cpu")) == tolerance(torch.float32, "cpu", 40.0)
    assert case.tolerance(expected.half(), torch.device("cpu"))["rtol"] == RTOL["float16"]
    assert Case("c", (), expected, scale=100.0).tolerance(expected, torch.device("cpu"))["atol"] == pytest.approx(
        100 * RTOL["float32"])
    assert Case("c", (), expected, atol=0.0, rtol=0.0).tolerance(expected, torch.device("cpu")) == {
        "atol": 0.0, "rtol": 0.0}
    positions = torch.tensor([3, 1])
    assert Case("c", (), positions).tolerance(positions, torch.device("cpu")) == {"atol": 0.0, "rtol": 0.0}


def test_a_failed_case_says_how_far_off_and_what_was_allowed(monkeypatch):
    x = torch.randn(2, 3, 5, generator=torch.Generator().manual_seed(0))
    lens = torch.tensor([5, 2])
    monkeypatch.setitem(REGISTRY, "test-masked-softmax", lambda device: [
        Case("softmax", (x, lens), masked_softmax(x, lens))])
    assert grade("test-masked-softmax", lambda x, lens: masked_softmax(x, lens)).passed
    message = grade("test-masked-softmax", lambda x, lens: masked_softmax(x, lens) * 1.01).message
    assert "largest difference" in message and "allowed 0.0001 + 0.0001 x |expected|" in message
