"""Checkers for Chapter 2 (attention pooling): Epanechnikov pooling and a leave-group-out mask."""

from __future__ import annotations

import torch

from ..kernel_regression import nadaraya_watson
from .core import Case, register

X = torch.tensor([0.3, 1.1, 1.4, 2.2, 3.0, 3.9, 4.6])
Y = torch.tensor([1.0, 2.5, 2.0, 3.5, 1.5, 0.5, 2.0])
QUERIES = torch.tensor([0.0, 1.2, 2.5, 4.0, 5.0])


@register("ch02-write-epanechnikov")
def epanechnikov_cases(device: torch.device) -> list[Case]:
    def case(name, q, k, v, h):
        return Case(name, (q, k, v, h), nadaraya_watson(q, k, v, kernel="epanechnikov", width=h)[0])

    return [
        case("five queries, width 1", QUERIES, X, Y, 1.0),
        case("width 100: close to the plain average", QUERIES, X, Y, 100.0),
        case("width 0.5: one query (5.0) has no example within reach and gets 0", QUERIES, X, Y, 0.5),
        case("a key at exactly one width from the query gets weight 0", torch.tensor([1.0]),
             torch.tensor([0.0, 1.25, 2.0]), torch.tensor([7.0, 3.0, 5.0]), 1.0),
        case("a single example", QUERIES, X[:1], Y[:1], 2.0),
    ]


@register("ch02-write-group-mask")
def group_mask_cases(device: torch.device) -> list[Case]:
    def case(name, x):
        return Case(name, (x,), x[:, None] != x[None, :])

    return [
        case("distinct inputs: the leave-one-out mask", X[:4]),
        case("every input twice", X[:3].repeat(2)),
        case("one input repeated three times among others", torch.tensor([0.5, 2.0, 0.5, 1.0, 0.5])),
        case("all inputs equal: nothing is visible", torch.full((4,), 1.5)),
        case("a single example", X[:1]),
    ]
