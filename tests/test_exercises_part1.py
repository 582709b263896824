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


def _weighted_line(queries, keys, values, width, weights):
    """The local-linear estimate from given weights (n, m), with the slope 0 where the keys have no spread."""
    x_bar, y_bar = weights @ keys, weights @ values
    dx = keys - x_bar[:, None]
    spread = (weights * dx**2).sum(-1)
    return y_bar + (weights * dx * values).sum(-1) / torch.where(spread > 0, spread, 1.0) * (queries - x_bar)


def test_local_linear_reference_passes_in_its_textbook_form_too():
    def textbook(queries, keys, values, width):  # weights alpha_i (S2 - (x_i - x) S1) / (S0 S2 - S1^2)
        weights = torch.softmax(-0.5 * ((queries[:, None] - keys) / width) ** 2, dim=-1)
        u = keys - queries[:, None]
        s1, s2 = (weights * u).sum(-1, keepdim=True), (weights * u**2).sum(-1, keepdim=True)
        lines = weights * (s2 - u * s1)
        total = lines.sum(-1)
        return torch.where(total > 0, (lines * values).sum(-1) / torch.where(total > 0, total, 1.0), weights @ values)

    assert grade("ch02-write-local-linear", textbook).passed


def test_local_linear_traps_are_named():
    def plain_pooling(queries, keys, values, width):  # Nadaraya-Watson: no slope correction
        return nadaraya_watson(queries, keys, values, "gaussian", width)[0]

    assert "Case 'values on the line y = 1 + 2x" in _failed_case("ch02-write-local-linear", plain_pooling)

    def raw_kernel(queries, keys, values, width):  # exp(-u^2/2) / sum: 0/0 once every weight underflows
        weights = torch.exp(-0.5 * ((queries[:, None] - keys) / width) ** 2)
        return _weighted_line(queries, keys, values, width, weights / weights.sum(-1, keepdim=True))

    message = _failed_case("ch02-write-local-linear", raw_kernel)
    assert "Case 'width 0.02: each query lies 0.4 from two keys" in message and "got NaN" in message

    def unguarded(queries, keys, values, width):  # one example: the slope is 0 / 0
        weights = torch.softmax(-0.5 * ((queries[:, None] - keys) / width) ** 2, dim=-1)
        x_bar = weights @ keys
        dx = keys - x_bar[:, None]
        slope = (weights * dx * values).sum(-1) / (weights * dx**2).sum(-1)
        return weights @ values + slope * (queries - x_bar)

    message = _failed_case("ch02-write-local-linear", unguarded)
    assert "Case 'one example only" in message and "got NaN" in message
