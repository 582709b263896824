"""Checkers for the section on induction heads (chapter 11): the keys an ideal induction head attends to,
and a head's previous-token score.

The expected results come from ``attn_utils.induction.induction_targets`` and ``head_scores`` (tested
against explicit loops and hand-built heads in tests/test_induction.py).
"""

from __future__ import annotations

import torch

from ..induction import head_scores, induction_targets, repeated_segments
from .core import Case, register


@register("ch11-induction-write-targets")
def induction_target_cases(device: torch.device) -> list[Case]:
    def case(name, tokens):
        return Case(name, (tokens,), induction_targets(tokens))

    copy = repeated_segments(3, 16, 40, 3, 6, generator=torch.Generator().manual_seed(0)).tokens
    return [
        case("no token repeats: no key anywhere (a token is not its own earlier occurrence)",
             torch.tensor([[1, 2, 3, 4, 5]])),
        case("a token seen once before, at position 1: key 2", torch.tensor([[5, 7, 9, 7]])),
        case("a token seen twice before: both following keys", torch.tensor([[4, 1, 4, 2, 4]])),
        case("a repeated token right after itself (j + 1 = t)", torch.tensor([[3, 3, 3]])),
        case("two sequences of the copying task", copy),
    ]


def _previous_only(weights: torch.Tensor) -> torch.Tensor:
    """The previous-token scores of one layer's weights (batch, heads, T, T): (heads,)."""
    tokens = torch.zeros(weights.shape[0], weights.shape[-1], dtype=torch.long)
    tokens[:, -1] = 1  # head_scores needs no repeat for the previous-token score, but checks there is one
    tokens[:, 0] = 1
    return head_scores([weights], tokens)["previous"][0]


@register("ch11-induction-write-previous-score")
def previous_score_cases(device: torch.device) -> list[Case]:
    def case(name, weights):
        return Case(name, (weights,), _previous_only(weights))

    T = 6
    uniform = torch.ones(T, T).tril()
    uniform = uniform / uniform.sum(-1, keepdim=True)  # causal, uniform over the keys seen
    previous = torch.zeros(T, T)
    previous[0, 0] = 1.0
    previous[torch.arange(1, T), torch.arange(T - 1)] = 1.0  # an ideal previous-token head
    scores = torch.randn(2, 3, T, T, generator=torch.Generator().manual_seed(0))
    random = torch.softmax(scores.masked_fill(torch.ones(T, T).triu(1).bool(), float("-inf")), dim=-1)
    return [
        case("an ideal previous-token head: 1", previous.expand(1, 1, T, T).clone()),
        case("uniform causal weights: the mean of 1/(t + 1) over t >= 1", uniform.expand(1, 1, T, T).clone()),
        case("two heads, one ideal and one uniform, batch of 2", torch.stack([previous, uniform]).expand(2, 2, T, T)
             .clone()),
        case("random causal weights, 3 heads", random),
    ]
