"""Checkers for chapter 10 (the Transformer): a residual connection with layer norm, before or after
the sublayer, and one step of cached self-attention.

The expected results come from ``attn_utils.AddNorm.residual`` with the reader's layer-norm
parameters loaded, and from ``attn_utils.MultiHeadAttention`` run on the whole sequence with a
causal mask (its last row), with the reader's matrices loaded.
"""

from __future__ import annotations

import torch

from ..masking import causal_mask
from ..transformer import AddNorm
from .ch09 import multihead_with_weights
from .core import Case, register, seeded_randn


# Sublayers that create nothing on a fixed device, so the cases run on any device.
def _tanh_sublayer(Z):
    return torch.tanh(2 * Z) - 0.5


def _zero_sublayer(Z):
    return torch.zeros_like(Z)


def _mixing_sublayer(Z):  # every position gets the mean over positions, like a uniform attention
    return Z.mean(dim=1, keepdim=True).expand_as(Z)


def _scaled_sublayer(Z):  # a large output: post-norm rescales it, pre-norm adds it as it is
    return 50 * Z.flip(-1)


@torch.no_grad()
def _residual(X, sublayer, gamma, beta, norm_first) -> torch.Tensor:
    """``AddNorm.residual`` with ``gamma`` and ``beta`` loaded into its layer norm."""
    addnorm = AddNorm(X.shape[-1], 0.0).eval()
    addnorm.ln.weight.copy_(gamma)
    addnorm.ln.bias.copy_(beta)
    return addnorm.residual(X, sublayer, norm_first)


@register("ch10-write-residual")
def residual_cases(device: torch.device) -> list[Case]:
    def case(name, X, sublayer, gamma, beta, norm_first):
        return Case(name, (X, sublayer, gamma, beta, norm_first), _residual(X, sublayer, gamma, beta, norm_first))

    d = 8
    X = seeded_randn(2, 5, d, seed=1)
    ones, zeros = torch.ones(d), torch.zeros(d)
    gamma, beta = 1 + 0.5 * seeded_randn(d, seed=2), seeded_randn(d, seed=3)
    far = 100 + 3 * seeded_randn(2, 4, d, seed=4)  # entries far from 0: the mean must be subtracted
    return [
        case("post-norm, gamma = 1, beta = 0", X, _tanh_sublayer, ones, zeros, False),
        case("pre-norm, gamma = 1, beta = 0", X, _tanh_sublayer, ones, zeros, True),
        case("post-norm with learned gamma and beta", X, _tanh_sublayer, gamma, beta, False),
        case("pre-norm with learned gamma and beta", X, _tanh_sublayer, gamma, beta, True),
        case("pre-norm, a sublayer that returns 0: X comes out unchanged", X, _zero_sublayer, gamma, beta, True),
        case("post-norm, a sublayer that returns 0: the layer norm of X", X, _zero_sublayer, gamma, beta, False),
        case("a sublayer that mixes positions, post-norm", X, _mixing_sublayer, gamma, beta, False),
        case("inputs near 100, pre-norm (the sublayer sees normalised rows)", far, _scaled_sublayer, gamma, beta, True),
        case("inputs near 100, post-norm", far, _scaled_sublayer, gamma, beta, False),
    ]


@torch.no_grad()
def _cached_case(batch: int, past: int, d: int, heads: int, seed: int, scale: float = 1.0):
    """Arguments and expected output of one cached step, from a full sequence of ``past + 1`` tokens."""
    W = [seeded_randn(d, d, seed=seed + i, scale=scale * d ** -0.5) for i in range(4)]  # W_q, W_k, W_v, W_o
    layer = multihead_with_weights(*W, heads)
    X = seeded_randn(batch, past + 1, d, seed=seed + 10)  # (batch, past + 1, d): the last row is the new token
    past_k, past_v = layer.project_kv(X[:, :past], X[:, :past])  # (batch, heads, past, d / heads) each
    full = layer(X, X, X, causal_mask(past + 1, past + 1))  # every position at once, causally masked
    return (X[:, past:], past_k, past_v, *W), full[:, past:]  # the new token's output (batch, 1, d)


@register("ch10-write-cached-attention-step")
def cached_step_cases(device: torch.device) -> list[Case]:
    def case(name, *shape, **kwargs):
        args, expected = _cached_case(*shape, **kwargs)
        return Case(name, args, expected)

    return [
        case("3 cached tokens, 2 heads", 2, 3, 8, 2, seed=0),
        case("an empty cache (the first token attends to itself only)", 2, 0, 8, 2, seed=20),
        case("1 head", 1, 4, 6, 1, seed=40),
        case("4 heads of 2 features, a batch of 3, 7 cached tokens", 3, 7, 8, 4, seed=60),
        case("8 heads of 1 feature each", 2, 5, 8, 8, seed=80),
        case("large weights: sharp attention, still no overflow", 2, 6, 8, 2, seed=100, scale=8.0),
    ]
