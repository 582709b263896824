"""Checkers for the section on FlashAttention's GPU kernel (``11e_flash_kernel``): two steps of the
Triton kernels (``attn_utils.triton_attention``) written in PyTorch.

* ``ch11-kernel-write-visible-keys``: how many keys each query row sees, the number ``_visible_keys``
  computes and from which the kernels pick the key blocks they read whole, mask or skip;
* ``ch11-kernel-write-score-gradient``: the gradient of the loss with respect to the scores, rebuilt
  as the backward kernels rebuild it, from the saved log-sum-exp and ``D = rowsum(dO * O)``.

The expected counts come from ``causal_mask`` and the lengths' mask (the masks every attention of the
course uses); the expected gradients from autograd through the explicit softmax, in float64.
"""

from __future__ import annotations

import math

import torch

from ..masking import causal_mask
from .core import Case, register, seeded_randn


def visible_keys(valid_lens: torch.Tensor, n_q: int, n_k: int, causal: bool) -> torch.Tensor:
    """(batch, n_q) int64: the keys each query sees, counted in the (batch, n_q, n_k) boolean mask."""
    keep = torch.arange(n_k) < valid_lens.reshape(-1, 1, 1)  # (batch, 1, n_k): the valid keys
    if causal:
        keep = keep & causal_mask(n_q, n_k)  # (n_q, n_k), aligned bottom-right
    return keep.expand(len(valid_lens), n_q, n_k).sum(dim=-1)


@register("ch11-kernel-write-visible-keys")
def visible_keys_cases(device: torch.device) -> list[Case]:
    def case(name, lens, n_q, n_k, causal):
        lens = torch.tensor(lens)
        return Case(name, (lens, n_q, n_k, causal), visible_keys(lens, n_q, n_k, causal))

    by_hand = Case("by hand: length 3, 4 queries and 4 keys, causal: 1, 2, 3, 3 keys",
                   (torch.tensor([3]), 4, 4, True), torch.tensor([[1, 2, 3, 3]]))
    return [
        by_hand,
        case("no mask at all: every query sees all 7 keys", [7, 7], 5, 7, False),
        case("lengths 0, 5 and 7 of 7 keys, no causal mask (length 0: no key)", [0, 5, 7], 3, 7, False),
        case("causal self-attention over 9 positions", [9], 9, 9, True),
        case("causal, lengths 2 and 5 of 5: the shorter of the two limits", [2, 5], 5, 5, True),
        case("one new query after 39 cached keys: it sees all 40 (bottom-right, not top-left)",
             [40], 1, 40, True),
        case("3 queries, the last of 10 positions: 8, 9 and 10 keys", [10, 10], 3, 10, True),
        case("6 queries, 4 keys: the first 2 come before every key and see 0, never a negative count",
             [4], 6, 4, True),
    ]


def score_gradient(Q, K, V, dO) -> torch.Tensor:
    """dLoss/dS for S = Q K^T / sqrt(d), O = softmax(S) V and Loss = sum(O * dO), by autograd, float64."""
    S = (Q.double() @ K.double().transpose(-2, -1) / math.sqrt(Q.shape[-1])).requires_grad_()
    with torch.enable_grad():
        O = torch.softmax(S, dim=-1) @ V.double()
        (grad,) = torch.autograd.grad(O, S, dO.double())
    return grad


@register("ch11-kernel-write-score-gradient")
def score_gradient_cases(device: torch.device) -> list[Case]:
    def case(name, Q, K, V, dO):
        S = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
        O = torch.softmax(S, dim=-1) @ V  # what the forward kernel saved: O and the log-sum-exp
        return Case(name, (Q, K, V, O, dO, torch.logsumexp(S, dim=-1)), score_gradient(Q, K, V, dO))

    def qkv(shape_q, n_k, d_v, seed):
        *batch, n_q, d = shape_q
        return (seeded_randn(*batch, n_q, d, seed=seed).double(), seeded_randn(*batch, n_k, d, seed=seed + 1).double(),
                seeded_randn(*batch, n_k, d_v, seed=seed + 2).double(),
                seeded_randn(*batch, n_q, d_v, seed=seed + 3).double())

    zero = torch.zeros(1, 1, 1, dtype=torch.float64)
    by_hand = Case("by hand: one query, two keys of equal score, values 1 and 3, dO = 1: dS = -0.5, 0.5",
                   (zero, torch.zeros(1, 2, 1, dtype=torch.float64), torch.tensor([[[1.0], [3.0]]]).double(),
                    torch.tensor([[[2.0]]]).double(), torch.ones(1, 1, 1, dtype=torch.float64),
                    torch.full((1, 1), math.log(2.0), dtype=torch.float64)),
                   torch.tensor([[[-0.5, 0.5]]], dtype=torch.float64))
    Q, K, V, dO = qkv((2, 7, 4), 9, 3, seed=1)
    dO_some_zero = dO.clone()
    dO_some_zero[:, ::2] = 0.0  # rows whose output does not reach the loss: their dS is 0
    Qf, Kf, Vf, dOf = qkv((1, 5, 8), 6, 4, seed=13)
    Qf[..., 0], Kf[..., 0] = 50.0, 50.0  # every score is 2500 / sqrt(8) = 884 plus a few units
    return [
        by_hand,
        case("7 queries, 9 keys, d = 4, d_v = 3", Q, K, V, dO),
        case("some rows of dO are 0: their scores get no gradient", Q, K, V, dO_some_zero),
        case("one key: the weights are all 1 and the gradient is 0", *qkv((2, 3, 4), 1, 2, seed=5)),
        case("(batch, heads, n, d) inputs", *qkv((2, 3, 6, 8), 6, 8, seed=9)),
        case("scores near 884: exp(S) overflows even in float64; exp(S - L) with the saved L does not",
             Qf, Kf, Vf, dOf),
    ]
