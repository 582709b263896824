"""The checkers of the section on FlashAttention's kernel: a right answer passes, and a typical wrong answer
fails on the case that names its trap."""

from __future__ import annotations

import math

import torch

from attn_utils.exercises import grade
from attn_utils.exercises.ch11_kernel import visible_keys
from attn_utils.masking import causal_mask

VISIBLE = "ch11-kernel-write-visible-keys"
GRADIENT = "ch11-kernel-write-score-gradient"


def _first_failure(label, fn) -> str:
    result = grade(label, fn)
    assert not result.passed
    return result.message


def _visible(bottom_right=True, clamp=True):
    """The number of keys each query sees, with one typical mistake switched off."""

    def count(valid_lens, n_q, n_k, causal):
        visible = valid_lens.clamp(max=n_k)[:, None].expand(-1, n_q)  # (batch, n_q)
        if causal:
            position = torch.arange(n_q, device=valid_lens.device) + (n_k - n_q if bottom_right else 0)
            visible = torch.minimum(visible, position + 1)
        return visible.clamp(min=0) if clamp else visible

    return count


def test_the_expected_counts_are_the_masks_row_sums():
    lens = torch.tensor([2, 5])
    assert visible_keys(lens, 5, 5, True).tolist() == [[1, 2, 2, 2, 2], [1, 2, 3, 4, 5]]
    assert visible_keys(torch.tensor([4]), 6, 4, True).tolist() == [[0, 0, 1, 2, 3, 4]]
    assert torch.equal(visible_keys(torch.tensor([4]), 6, 4, True)[0], causal_mask(6, 4).sum(-1))


def test_visible_keys_reference_and_traps():
    assert grade(VISIBLE, _visible()).passed
    assert "Case 'one new query after 39 cached keys" in _first_failure(VISIBLE, _visible(bottom_right=False))
    assert "Case '6 queries, 4 keys: the first 2 come before every key" in _first_failure(
        VISIBLE, _visible(clamp=False))


def _score_gradient(rebuild="lse", subtract="D"):
    """dS as the backward kernels compute it, with one typical mistake switched on."""

    def gradient(Q, K, V, O, dO, lse):
        S = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])  # (..., n_q, n_k)
        if rebuild == "lse":
            P = torch.exp(S - lse[..., None])
        else:  # the textbook softmax, without the maximum: exp overflows
            P = torch.exp(S) / torch.exp(S).sum(dim=-1, keepdim=True)
        dP = dO @ V.transpose(-2, -1)
        if subtract == "D":
            return P * (dP - (dO * O).sum(dim=-1, keepdim=True))
        if subtract == "rowsum dP":  # forgets the weights inside the row sum
            return P * (dP - dP.sum(dim=-1, keepdim=True))
        return P * dP  # the softmax's derivative without its second term

    return gradient


def test_score_gradient_reference_and_traps():
    assert grade(GRADIENT, _score_gradient()).passed
    assert "Case 'by hand: one query, two keys of equal score" in _first_failure(
        GRADIENT, _score_gradient(subtract="nothing"))
    assert "Case 'by hand: one query, two keys of equal score" in _first_failure(
        GRADIENT, _score_gradient(subtract="rowsum dP"))
    message = _first_failure(GRADIENT, _score_gradient(rebuild="softmax without the maximum"))
    assert "Case 'scores near 884: exp(S) overflows" in message and "got NaN" in message


def test_score_gradient_cases_agree_with_the_autograd_of_sdpa():
    """The expected dS, pushed through S = Q K^T / sqrt(d), gives SDPA's own dQ."""
    from attn_utils.exercises.ch11_kernel import score_gradient_cases

    for case in score_gradient_cases(torch.device("cpu"))[1:]:
        Q, K, V, _, dO, _ = case.args
        q = Q.clone().requires_grad_()
        out = torch.nn.functional.scaled_dot_product_attention(q, K, V)
        (dq,) = torch.autograd.grad(out, q, dO)
        torch.testing.assert_close(case.expected @ K / math.sqrt(Q.shape[-1]), dq)
