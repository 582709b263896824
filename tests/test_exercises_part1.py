"""Chapters 1-2's checkers: the typical wrong answer of each exercise fails on the case that names its trap."""

from __future__ import annotations

import torch

from attn_utils import hard_lookup, nadaraya_watson
from attn_utils.exercises import grade


def _failed_case(label, fn) -> str:
    result = grade(label, fn)
    assert not result.passed
    return result.message


def test_soft_lookup_that_forms_every_difference_fails_the_memory_case():
    def all_differences(queries, keys, values, temperature):  # the chapter's (n, m, d) tensor
        scores = -((queries[:, None, :] - keys[None, :, :]) ** 2).sum(dim=-1)
        return torch.softmax(scores / temperature, dim=-1) @ values

    result = grade("ch01-write-soft-lookup", all_differences)
    assert result.cases_passed == result.cases_total - 1
    assert "no tensor of 30 x 40 x 64 differences' failed: raised TensorTooLarge" in result.message
    assert "shape (30, 40, 64)" in result.message

    def expanded(queries, keys, values, temperature):
        sq = (queries**2).sum(-1, keepdim=True) - 2 * queries @ keys.T + (keys**2).sum(-1)
        return torch.softmax(-sq / temperature, dim=-1) @ values

    assert grade("ch01-write-soft-lookup", expanded).passed


def test_hard_lookup_that_ignores_the_padding_fails_on_the_dummy_station():
    def unmasked(queries, keys, values, valid_lens):
        return hard_lookup(queries, keys, values)[0]

    message = _failed_case("ch01-write-hard-lookup", unmasked)
    assert "Case 'town 2 has 4 stations; the query (0.5, 0.5) lies nearest a padded dummy" in message


def test_half_masked_softmax_traps_are_named():
    def visible(X, valid_lens):
        return torch.arange(X.shape[-1], device=X.device) < valid_lens[:, None, None]

    def d2l_fill(X, valid_lens):  # -1e6 does not fit in float16
        return torch.softmax(X.masked_fill(~visible(X, valid_lens), -1e6), dim=-1)

    assert "raised RuntimeError" in _failed_case("ch01-mask-all", d2l_fill)

    def smallest_half_fill(X, valid_lens):  # a masked key ties with a visible score of -65504
        mask = visible(X, valid_lens)
        weights = torch.softmax(X.float().masked_fill(~mask, torch.finfo(X.dtype).min), dim=-1)
        return weights.masked_fill(~mask, 0.0).half()

    assert "Case 'a visible score of -65504" in _failed_case("ch01-mask-all", smallest_half_fill)

    def all_in_half(X, valid_lens):  # correct masking, but the sum of 70,000 ones overflows float16
        scores = X.masked_fill(~visible(X, valid_lens), float("-inf"))
        row_max = scores.amax(dim=-1, keepdim=True)
        exps = torch.exp(scores - torch.where(torch.isinf(row_max), 0.0, row_max))
        totals = exps.sum(dim=-1, keepdim=True)
        return exps / torch.where(totals > 0, totals, 1.0)

    result = grade("ch01-mask-all", all_in_half)
    assert result.cases_passed == result.cases_total - 1
    assert "Case '70,000 equal scores" in result.message


def test_batched_epanechnikov_that_uses_the_padding_fails_on_the_padded_set():
    def unmasked(queries, keys, values, valid_lens, width):
        return nadaraya_watson(queries, keys, values, "epanechnikov", width)[0]

    message = _failed_case("ch02-write-epanechnikov", unmasked)
    assert "Case 'set 2 has 4 real examples" in message
