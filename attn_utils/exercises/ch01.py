"""Checkers for Chapter 1 (attention cues): the soft and the hard lookup, written from scratch."""

from __future__ import annotations

import torch

from ..lookup import hard_lookup, soft_lookup
from .core import Case, register

# The six weather stations of the chapter: positions in km and temperatures in degrees C.
STATIONS = torch.tensor([[1.0, 1.5], [8.0, 2.0], [3.5, 4.0], [6.5, 7.5], [2.0, 8.0], [8.5, 5.5]])
TEMPERATURES = torch.tensor([14.0, 17.5, 16.0, 9.0, 11.5, 13.0])
WALK = torch.tensor([[5.5, 5.0], [1.0, 1.5], [9.0, 9.0], [0.0, 5.0]])
MIDPOINT = ((STATIONS[2] + STATIONS[3]) / 2)[None]  # equally far from Old Town and Hilltop


@register("ch01-write-soft-lookup")
def soft_lookup_cases(device: torch.device) -> list[Case]:
    def case(name, q, k, v, t):
        return Case(name, (q, k, v, t), soft_lookup(q, k, v, temperature=t)[0])

    return [
        case("one query, the six stations, temperature 3", WALK[:1], STATIONS, TEMPERATURES, 3.0),
        case("four queries at once, temperature 1", WALK, STATIONS, TEMPERATURES, 1.0),
        case("a single key", WALK, STATIONS[:1], TEMPERATURES[:1], 2.0),
        case("temperature 1e6: the plain average", WALK, STATIONS, TEMPERATURES, 1e6),
        case("temperature 1e-3, a query 50 km away (exp underflows unless you subtract the row maximum)",
             torch.tensor([[50.0, 50.0]]), STATIONS, TEMPERATURES, 1e-3),
        case("temperature 1e-3, a tie between two stations: their average", MIDPOINT, STATIONS, TEMPERATURES, 1e-3),
    ]


@register("ch01-write-hard-lookup")
def hard_lookup_cases(device: torch.device) -> list[Case]:
    def case(name, q, k, v):
        return Case(name, (q, k, v), hard_lookup(q, k, v)[0])

    return [
        case("a query exactly on Old Town", STATIONS[2:3], STATIONS, TEMPERATURES),
        case("four queries at once", WALK, STATIONS, TEMPERATURES),
        case("a single key", WALK, STATIONS[:1], TEMPERATURES[:1]),
        case("a tie between Old Town and Hilltop: the first of them", MIDPOINT, STATIONS, TEMPERATURES),
        case("a query far outside the town", torch.tensor([[-40.0, 100.0]]), STATIONS, TEMPERATURES),
    ]
