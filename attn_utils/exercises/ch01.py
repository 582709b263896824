"""Checkers for Chapter 1 (attention cues): tasks the chapter leaves to the reader.

* ``ch01-write-soft-lookup``: the soft lookup by distance without the (queries, keys, features)
  tensor of differences, stable at tiny temperatures.
* ``ch01-write-hard-lookup``: the hard lookup over a batch of towns padded to the same length.
* ``ch01-mask-all``: a masked softmax for float16 scores (no overflow, no NaN, no -1e6).
"""

from __future__ import annotations

import torch

from ..lookup import hard_lookup, soft_lookup
from ..masking import masked_softmax
from .core import Case, refuse_large, register, seeded_randn

# The six weather stations of the chapter: positions in km and temperatures in degrees C.
STATIONS = torch.tensor([[1.0, 1.5], [8.0, 2.0], [3.5, 4.0], [6.5, 7.5], [2.0, 8.0], [8.5, 5.5]])
TEMPERATURES = torch.tensor([14.0, 17.5, 16.0, 9.0, 11.5, 13.0])
WALK = torch.tensor([[5.5, 5.0], [1.0, 1.5], [9.0, 9.0], [0.0, 5.0]])
MIDPOINT = ((STATIONS[2] + STATIONS[3]) / 2)[None]  # equally far from Old Town and Hilltop
# The chapter's second town: four stations, padded to six with dummy stations at (0, 0), 0 degrees C.
TOWN_B = torch.tensor([[2.0, 2.0], [6.0, 3.0], [4.0, 7.0], [9.0, 8.0]])
TEMPERATURES_B = torch.tensor([21.0, 19.5, 18.0, 16.5])


@register("ch01-write-soft-lookup")
def soft_lookup_cases(device: torch.device) -> list[Case]:
    def case(name, q, k, v, t, **tolerance):
        return Case(name, (q, k, v, t), soft_lookup(q, k, v, temperature=t)[0], **tolerance)

    n, m, d = 30, 40, 64
    queries, keys = seeded_randn(n, d, seed=1, scale=0.5), seeded_randn(m, d, seed=2, scale=0.5)
    values = seeded_randn(m, seed=3)
    limit = n * m * d // 2
    advice = (f"at least half as many as the {n} x {m} x {d} (queries x keys x features) differences; "
              "compute the scores without forming every difference q - k (expand the square)")
    big = Case(f"{n} queries, {m} keys with {d} features: no tensor of {n} x {m} x {d} differences",
               (*refuse_large((queries, keys, values), limit, advice), 8.0),
               soft_lookup(queries, keys, values, temperature=8.0)[0])
    return [
        case("one query, the six stations, temperature 3", WALK[:1], STATIONS, TEMPERATURES, 3.0),
        case("four queries at once, temperature 1", WALK, STATIONS, TEMPERATURES, 1.0),
        case("temperature 1e-3, a query 50 km away (exp underflows unless you subtract the row maximum)",
             torch.tensor([[50.0, 50.0]]), STATIONS, TEMPERATURES, 1e-3),
        case("temperature 1e-3, a tie between two stations: their average", MIDPOINT, STATIONS, TEMPERATURES, 1e-3),
        case("temperature 1e6: the plain average", WALK, STATIONS, TEMPERATURES, 1e6),
        big,
    ]


@register("ch01-write-hard-lookup")
def masked_hard_lookup_cases(device: torch.device) -> list[Case]:
    def case(name, q, k, v, lens):
        return Case(name, (q, k, v, lens), hard_lookup(q, k, v, valid_lens=lens)[0])

    padded = torch.cat([TOWN_B, torch.zeros(2, 2)])  # (6, 2): two dummy stations at (0, 0)
    keys = torch.stack([STATIONS, padded])  # (2 towns, 6 keys, 2)
    values = torch.stack([TEMPERATURES, torch.cat([TEMPERATURES_B, torch.zeros(2)])])  # (2, 6)
    return [
        case("two towns, no padding used", torch.stack([WALK, WALK]), keys, values, torch.tensor([6, 6])),
        case("town 2 has 4 stations; the query (0.5, 0.5) lies nearest a padded dummy at (0, 0)",
             torch.tensor([[[5.5, 5.0]], [[0.5, 0.5]]]), keys, values, torch.tensor([6, 4])),
        case("a tie between Old Town and Hilltop: the first of them", MIDPOINT[None], STATIONS[None],
             TEMPERATURES[None], torch.tensor([6])),
        case("a town with no station (valid length 0): the output is 0", torch.stack([WALK, WALK]), keys, values,
             torch.tensor([6, 0])),
        case("only the first station of each town is real", torch.stack([WALK, WALK]), keys, values,
             torch.tensor([1, 1])),
    ]


@register("ch01-mask-all")
def half_masked_softmax_cases(device: torch.device) -> list[Case]:
    def case(name, X, lens, **tolerance):
        X = X.to(torch.float16)
        # The reference runs in float32 and rounds once to float16 at the end.
        return Case(name, (X, lens), masked_softmax(X.float(), lens).half(),
                    **{"atol": 1e-6, "rtol": 5e-3, **tolerance})

    hand = torch.log(torch.tensor([1.0, 3.0, 4.0])).expand(2, 1, 3)  # (batch=2, queries=1, keys=3)
    return [
        case("scores (ln 1, ln 3, ln 4) with valid lengths 3 and 2", hand, torch.tensor([3, 2])),
        case("a query with no visible key (valid length 0): all-zero weights, not NaN",
             seeded_randn(2, 3, 4, seed=4), torch.tensor([4, 0])),
        case("scores near 20: exp(20) overflows float16 unless you subtract the row maximum",
             torch.tensor([[[20.0, 19.0, 17.5, 0.0]]]), torch.tensor([4])),
        case("a visible score of -65504, the most negative float16, beside two masked keys",
             torch.tensor([[[-65504.0, 3.0, -1.0]]]), torch.tensor([1])),
        case("70,000 equal scores: their sum of exponentials, 70,000, overflows float16",
             torch.zeros(1, 1, 70_000), torch.tensor([70_000]), atol=1e-7),
    ]
