"""Checkers for Chapter 2 (attention pooling): tasks the chapter leaves to the reader.

* ``ch02-write-epanechnikov``: Epanechnikov pooling over a batch of data sets of different sizes.
* ``ch02-write-group-mask``: the leave-group-out cross-validation error of a list of widths.
"""

from __future__ import annotations

import torch

from ..kernel_regression import nadaraya_watson
from .core import Case, register

X = torch.tensor([0.3, 1.1, 1.4, 2.2, 3.0, 3.9, 4.6])
Y = torch.tensor([1.0, 2.5, 2.0, 3.5, 1.5, 0.5, 2.0])
QUERIES = torch.tensor([0.0, 1.2, 2.5, 4.0, 5.0])


@register("ch02-write-epanechnikov")
def batched_epanechnikov_cases(device: torch.device) -> list[Case]:
    def case(name, q, k, v, lens, h):
        expected = nadaraya_watson(q, k, v, kernel="epanechnikov", width=h, valid_lens=lens)[0]
        return Case(name, (q, k, v, lens, h), expected)

    short = torch.cat([X[:4], torch.full((3,), 4.5)])  # 4 real examples, 3 padded ones at x = 4.5
    short_y = torch.cat([Y[:4], torch.full((3,), 100.0)])
    keys, values = torch.stack([X, short]), torch.stack([Y, short_y])  # (2 sets, 7 examples)
    queries = torch.stack([QUERIES, QUERIES])  # (2, 5)
    return [
        case("two data sets, all examples real, width 1", queries, keys, values, torch.tensor([7, 7]), 1.0),
        case("set 2 has 4 real examples; its padding (x = 4.5, y = 100) lies near the query 4.0",
             queries, keys, values, torch.tensor([7, 4]), 1.0),
        case("width 0.5: queries with no real example within reach get 0", queries, keys, values,
             torch.tensor([7, 4]), 0.5),
        case("a data set with no example at all (valid length 0): every query gets 0", queries, keys, values,
             torch.tensor([7, 0]), 1.0),
        case("a key at exactly one width from the query gets weight 0", torch.tensor([[1.0]]),
             torch.tensor([[0.0, 1.25, 2.0]]), torch.tensor([[7.0, 3.0, 5.0]]), torch.tensor([3]), 1.0),
    ]


def group_cv_error(x: torch.Tensor, y: torch.Tensor, widths: torch.Tensor) -> torch.Tensor:
    """Reference: the mean squared error of predicting each y_i from the examples whose input differs."""
    mask = x[:, None] != x[None, :]  # (m, m)
    errors = [((nadaraya_watson(x, x, y, "gaussian", float(h), valid_lens=mask)[0] - y) ** 2).mean()
              for h in widths]
    return torch.stack(errors)


@register("ch02-write-group-mask")
def group_cv_cases(device: torch.device) -> list[Case]:
    def case(name, x, y, widths):
        return Case(name, (x, y, widths), group_cv_error(x, y, widths))

    widths = torch.tensor([0.1, 0.3, 1.0, 3.0])
    return [
        case("distinct inputs: leave-one-out", X, Y, widths),
        case("every input twice", X.repeat(2), Y.repeat(2), widths),
        case("one input three times among others", torch.tensor([0.5, 2.0, 0.5, 1.0, 0.5]),
             torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0]), widths),
        case("width 1e-3: only the nearest other input counts (no 0/0)", X, Y, torch.tensor([1e-3])),
        case("all inputs equal: nothing is visible, every prediction is 0", torch.full((4,), 1.5),
             torch.tensor([1.0, -2.0, 3.0, 0.5]), widths),
    ]
