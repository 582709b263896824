"""Checkers for chapter 7's images section: hard attention's lower bound, and the REINFORCE gradient.

* ``ch07-glimpse-lower-bound``: for a canvas, the bound ``L_s = sum_s alpha_s log p(y|s)`` that hard
  attention maximises and the log-likelihood ``log sum_s alpha_s p(y|s)`` it bounds, computed exactly
  by enumerating the regions, with regions ruled out and log-likelihoods far below 0.
* ``ch07-glimpse-write-score-function-gradient``: the expected gradients are what autograd gives for
  ``attn_utils.glimpse.reinforce_surrogate``, so the reader's closed form is checked against the
  surrogate the models are trained with.
"""

from __future__ import annotations

import torch

from ..glimpse import reinforce_surrogate
from .core import Case, register, seeded_randn


def _bound_and_marginal(scores: torch.Tensor, log_likelihoods: torch.Tensor) -> torch.Tensor:
    """The reference, in float64: ``L_s = sum_s alpha_s log p(y|s)`` and ``log sum_s alpha_s p(y|s)``."""
    scores, ll = scores.double(), log_likelihoods.double()
    alpha, log_alpha = torch.softmax(scores, dim=-1), torch.log_softmax(scores, dim=-1)
    bound = torch.where(alpha > 0, alpha * ll, torch.zeros_like(ll)).sum(-1)  # 0 log 0 counts as 0
    marginal = torch.logsumexp(log_alpha + ll, dim=-1)
    return torch.stack([bound, marginal], dim=-1).float()  # (batch, 2)


@register("ch07-glimpse-lower-bound")
def lower_bound_cases(device: torch.device) -> list[Case]:
    def case(name, scores, log_likelihoods):
        return Case(name, (scores, log_likelihoods), _bound_and_marginal(scores, log_likelihoods))

    def rewards(*shape, seed):  # log-likelihoods: negative numbers
        return -2 * seeded_randn(*shape, seed=seed).abs()

    ruled_out = seeded_randn(2, 5, seed=3)
    ruled_out[:, 3:] = float("-inf")  # two regions that cannot be chosen...
    never_read = rewards(2, 5, seed=4)
    never_read[:, 3:] = float("-inf")  # ...whose log-likelihood is -inf (nothing was read there)
    return [
        case("by hand: weights (1/2, 1/2), p(y|s) = (0.8, 0.2): L_s = -0.9163, log p(y) = log 0.5",
             torch.zeros(1, 2), torch.tensor([[0.8, 0.2]]).log()),
        case("3 canvases, 9 regions", seeded_randn(3, 9, seed=1), rewards(3, 9, seed=2)),
        case("every region gives the same log-likelihood: the bound is tight",
             seeded_randn(2, 4, seed=5), torch.tensor([[-1.5] * 4, [-0.2] * 4])),
        case("regions with score -inf and log-likelihood -inf add nothing (0 log 0 = 0)", ruled_out,
             never_read),
        case("log-likelihoods near -800: exp underflows, the marginal needs logsumexp",
             seeded_randn(2, 6, seed=6), -800 + rewards(2, 6, seed=7)),
        case("large scores (x 1000): all weight on one region, both numbers its log-likelihood",
             1000 * seeded_randn(2, 6, seed=8), rewards(2, 6, seed=9)),
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
