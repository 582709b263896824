"""Checkers for chapter 7's images section: the soft-attention context, and the REINFORCE gradient.

The expected contexts come from ``attn_utils.glimpse.soft_context`` on ``torch.softmax`` weights; the
expected gradients are what autograd gives for ``attn_utils.glimpse.reinforce_surrogate``, so the
reader's closed form is checked against the surrogate the models are trained with.
"""

from __future__ import annotations

import torch

from ..glimpse import reinforce_surrogate, soft_context
from .core import Case, register, seeded_randn


@register("ch07-glimpse-write-soft-context")
def soft_context_cases(device: torch.device) -> list[Case]:
    def case(name, features, scores):
        return Case(name, (features, scores), soft_context(features, torch.softmax(scores, dim=-1)))

    masked = seeded_randn(2, 5, seed=3)
    masked[:, 3:] = float("-inf")  # two regions ruled out
    return [
        case("2 canvases, 9 regions, 4 features", seeded_randn(2, 9, 4, seed=1), seeded_randn(2, 9, seed=2)),
        case("regions with score -inf get no weight", seeded_randn(2, 5, 3, seed=4), masked),
        case("equal scores: the plain mean of the features", seeded_randn(3, 4, 2, seed=5), torch.zeros(3, 4)),
        case("large scores (x 1000): no overflow, the best region alone", seeded_randn(2, 6, 3, seed=6),
             1000 * seeded_randn(2, 6, seed=7)),
        case("a single region: its own feature", seeded_randn(4, 1, 5, seed=8), seeded_randn(4, 1, seed=9)),
        case("a single canvas with 1-dimensional features", seeded_randn(1, 3, 1, seed=10),
             seeded_randn(1, 3, seed=11)),
    ]


def _score_function_gradient(scores, choices, rewards, baseline) -> torch.Tensor:
    """Per-example gradient of ``(R - b) log softmax(scores)_s`` w.r.t. the scores, by autograd."""
    scores = scores.detach().clone().requires_grad_()
    log_alpha = torch.log_softmax(scores, dim=-1).gather(1, choices[:, None]).squeeze(1)  # (batch,)
    surrogate = reinforce_surrogate(log_alpha, rewards, baseline) * scores.shape[0]  # a sum, not a mean
    (grad,) = torch.autograd.grad(surrogate, scores)
    return grad


@register("ch07-glimpse-write-score-function-gradient")
def score_function_gradient_cases(device: torch.device) -> list[Case]:
    def case(name, scores, choices, rewards, baseline):
        return Case(name, (scores, choices, rewards, baseline),
                    _score_function_gradient(scores, choices, rewards, baseline))

    choices = torch.tensor([0, 4, 8])
    return [
        case("3 canvases, 9 regions", seeded_randn(3, 9, seed=20), choices, seeded_randn(3, seed=21),
             seeded_randn(3, seed=22)),
        case("a zero baseline", seeded_randn(3, 9, seed=23), choices, seeded_randn(3, seed=24), torch.zeros(3)),
        case("the baseline equals the reward: no signal at all", seeded_randn(2, 4, seed=25), torch.tensor([1, 2]),
             torch.tensor([0.5, -1.0]), torch.tensor([0.5, -1.0])),
        case("an unlikely region chosen, negative advantage", torch.tensor([[8.0, 0.0, 0.0], [0.0, 0.0, -6.0]]),
             torch.tensor([1, 2]), torch.tensor([-3.0, -2.0]), torch.tensor([-1.0, 0.0])),
        case("near one-hot attention that chose its favourite: almost no gradient",
             50 * seeded_randn(2, 5, seed=26).abs() + torch.tensor([[100.0, 0, 0, 0, 0], [0, 0, 0, 0, 100.0]]),
             torch.tensor([0, 4]), torch.tensor([1.0, 1.0]), torch.tensor([0.0, 0.0])),
        case("two regions, 0/1 rewards (correct or not)", seeded_randn(4, 2, seed=27), torch.tensor([0, 1, 1, 0]),
             torch.tensor([1.0, 0.0, 1.0, 0.0]), torch.full((4,), 0.6)),
    ]
