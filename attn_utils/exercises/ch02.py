"""Checkers for Chapter 2 (attention pooling): tasks the chapter leaves to the reader.

* ``ch02-write-local-linear``: local-linear regression, a line fitted by least squares weighted by the
  Gaussian attention weights (Fan 1992), which Nadaraya–Watson's boundary bias calls for.
* ``ch02-write-group-mask``: the leave-group-out cross-validation error of a list of widths.
"""

from __future__ import annotations

import torch

from ..kernel_regression import make_data, nadaraya_watson
from .core import Case, register

X = torch.tensor([0.3, 1.1, 1.4, 2.2, 3.0, 3.9, 4.6])
Y = torch.tensor([1.0, 2.5, 2.0, 3.5, 1.5, 0.5, 2.0])
QUERIES = torch.tensor([0.0, 1.2, 2.5, 4.0, 5.0])


def local_linear_reference(queries, keys, values, width: float) -> torch.Tensor:
    """Reference: at each query, the weighted least-squares line ``a + b (x_i - x)`` through the examples,
    solved by ``torch.linalg.lstsq`` in float64 with the rows scaled by the square roots of the Gaussian
    weights; its value at the query is ``a``. (Not the closed form a solution would use.)"""
    q, k, v = (t.double() for t in (queries, keys, values))
    weights = torch.softmax(-0.5 * ((q[:, None] - k[None, :]) / width) ** 2, dim=-1)  # (n, m)
    estimates = []
    for row, x in zip(weights, q):
        root = row.sqrt()[:, None]  # (m, 1)
        design = torch.stack([torch.ones_like(k), k - x], dim=1) * root  # (m, 2)
        estimates.append(torch.linalg.lstsq(design, v[:, None] * root).solution[0, 0])
    return torch.stack(estimates).to(queries.dtype)


@register("ch02-write-local-linear")
def local_linear_cases(device: torch.device) -> list[Case]:
    def case(name, q, k, v, h, expected=None):
        return Case(name, (q, k, v, h), local_linear_reference(q, k, v, h) if expected is None else expected)

    x64, y64 = make_data(40, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    return [
        case("values on the line y = 1 + 2x: the fit is the line itself, beyond both ends of the data too",
             QUERIES, X, 1 + 2 * X, 1.0, expected=1 + 2 * QUERIES),
        case("seven noisy examples, width 0.5", QUERIES, X, Y, 0.5),
        case("width 0.02: each query lies 0.4 from two keys (exp(-200) underflows in float32); "
             "the line through them gives their average", torch.tensor([0.7, 2.6]), X, Y, 0.02,
             expected=torch.tensor([(1.0 + 2.5) / 2, (3.5 + 1.5) / 2])),
        case("one example only: no slope to fit, every query gets its value", torch.tensor([0.0, 2.0, 5.0]),
             torch.tensor([2.0]), torch.tensor([3.0]), 0.5, expected=torch.full((3,), 3.0)),
        case("float64: 40 examples of the toy curve, width 0.3", torch.linspace(0, 5, 11, dtype=torch.float64),
             x64, y64, 0.3),
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
