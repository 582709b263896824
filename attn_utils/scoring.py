"""Attention scoring functions: how much a query "matches" each key, as a number.

Each function takes queries ``(..., Q, query_size)`` and keys ``(..., K, key_size)`` and returns
scores ``(..., Q, K)``; a softmax over the last axis then turns scores into attention weights.

=============  =====================================  ==================================
function       score(q, k)                            from
=============  =====================================  ==================================
additive       w_v^T tanh(W_q q + W_k k)              Bahdanau et al. (2015)
dot            scale * q^T k (scale 1 or 1/sqrt(d))   Luong et al. (2015), Vaswani et al. (2017)
general        q^T W_a k                              Luong et al. (2015)
concat         v_a^T tanh(W_a [q; k])                 Luong et al. (2015)
cosine         beta * q^T k / (|q| |k|)               Graves et al. (2014)
location       (W_a q)_j, ignoring the keys' content  Luong et al. (2015)
distance       -|q - W_a k|^2                         chapter 2's Gaussian kernel, learned
neg_sq_dist    -|q - k|^2                             chapter 1's soft lookup
=============  =====================================  ==================================

Queries and keys are floating-point tensors of one dtype with the same leading dimensions
(``checks.check_queries_keys``); a matrix ``W_a`` is a tensor of their dtype; numbers (``scale``,
``beta``, ``eps``) are finite. Learned maps (``W_q``, ``v_a``, ...) are passed as callables, e.g.
``nn.Linear`` modules, so the same functions serve the layers in :mod:`attn_utils.attention` and
from-scratch code. The layers are listed by name in ``attention.SCORES``, the one registry of scores.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from .checks import autocast_on, check_non_negative_int, check_queries_keys, is_finite_number

Map = Callable[[torch.Tensor], torch.Tensor]


def _shape(t: torch.Tensor) -> tuple:
    return tuple(t.shape)


def _check_number(name: str, value, what: str, tensor_ok: bool = True) -> None:
    """``value`` must be a finite number (not a bool) or, with ``tensor_ok``, a tensor (its values unread)."""
    if not (tensor_ok and isinstance(value, torch.Tensor)) and not is_finite_number(value):
        raise ValueError(f"{name} must be {what}, got {type(value).__name__} {value!r}")


def _check_matrix(W_a, queries: torch.Tensor) -> None:
    """``W_a`` must be a tensor in the queries' dtype (outside autocast, which casts)."""
    if not isinstance(W_a, torch.Tensor):
        raise ValueError(f"W_a must be a tensor (query_size, key_size), got {type(W_a).__name__}")
    if W_a.dtype != queries.dtype and not autocast_on(queries.device.type):
        raise ValueError(f"W_a ({W_a.dtype}) must have the dtype of the queries and keys ({queries.dtype})")


def dot_score(queries: torch.Tensor, keys: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    """``scale * q . k``. ``scale=None`` means ``1/sqrt(d)`` (scaled dot product); ``scale=1`` is Luong's dot.
    ``scale`` is otherwise a finite number (or a tensor that broadcasts to the scores)."""
    check_queries_keys(queries, keys, same_size=True, what="dot-product scoring")
    if scale is not None:
        _check_number("scale", scale, "None (1/sqrt(d)) or a finite number")
    if scale is None:
        scale = 1.0 / math.sqrt(queries.shape[-1]) if queries.shape[-1] else 1.0  # d = 0: every score is 0
    return (queries @ keys.transpose(-2, -1)) * scale  # (..., Q, d) @ (..., d, K) -> (..., Q, K)


def additive_score(queries: torch.Tensor, keys: torch.Tensor, W_q: Map, W_k: Map, w_v: Map) -> torch.Tensor:
    """Bahdanau's ``w_v^T tanh(W_q q + W_k k)``: a one-hidden-layer network on each (query, key) pair.

    ``W_q`` maps queries and ``W_k`` maps keys to the same hidden size h; ``w_v`` maps h to 1 (callables,
    e.g. ``nn.Linear`` modules).
    """
    check_queries_keys(queries, keys)
    q, k = W_q(queries), W_k(keys)  # (..., Q, h), (..., K, h)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"W_q and W_k must map to the same hidden size; got {q.shape[-1]} for queries and "
            f"{k.shape[-1]} for keys"
        )
    features = torch.tanh(q.unsqueeze(-2) + k.unsqueeze(-3))  # (..., Q, 1, h) + (..., 1, K, h) -> (..., Q, K, h)
    return w_v(features).squeeze(-1)  # (..., Q, K, 1) -> (..., Q, K)


def general_score(queries: torch.Tensor, keys: torch.Tensor, W_a: torch.Tensor) -> torch.Tensor:
    """Luong's general (bilinear) score ``q^T W_a k`` with a matrix ``W_a`` of shape (query_size, key_size)."""
    check_queries_keys(queries, keys)
    _check_matrix(W_a, queries)
    expected = (queries.shape[-1], keys.shape[-1])
    if W_a.dim() != 2 or tuple(W_a.shape) != expected:
        raise ValueError(
            f"W_a must have shape (query_size, key_size) = {expected} for queries {_shape(queries)} and "
            f"keys {_shape(keys)}, got {_shape(W_a)}"
        )
    projected = keys @ W_a.transpose(0, 1)  # (..., K, dk) @ (dk, dq) -> (..., K, dq): W_a k for every key
    return queries @ projected.transpose(-2, -1)  # (..., Q, dq) @ (..., dq, K) -> (..., Q, K)


def concat_score(queries: torch.Tensor, keys: torch.Tensor, W_a: Map, v_a: Map) -> torch.Tensor:
    """Luong's concat score ``v_a^T tanh(W_a [q; k])``, with the concatenation formed for every pair."""
    check_queries_keys(queries, keys)
    num_q, num_k = queries.shape[-2], keys.shape[-2]
    q = queries.unsqueeze(-2).expand(*queries.shape[:-1], num_k, queries.shape[-1])  # (..., Q, K, dq)
    k = keys.unsqueeze(-3).expand(*keys.shape[:-2], num_q, num_k, keys.shape[-1])  # (..., Q, K, dk)
    hidden = torch.tanh(W_a(torch.cat([q, k], dim=-1)))  # (..., Q, K, dq + dk) -> (..., Q, K, h)
    return v_a(hidden).squeeze(-1)  # (..., Q, K)


def cosine_score(queries: torch.Tensor, keys: torch.Tensor, beta=1.0, eps: float = 1e-8) -> torch.Tensor:
    """Graves et al.'s content-based score ``beta * cos(q, k)``.

    ``beta`` (the key strength, > 0 sharpens) is a number or a tensor broadcastable to the scores,
    e.g. one strength per query (..., Q, 1). Vectors shorter than ``eps`` count as length ``eps``, a finite
    number > 0 (with 0 a zero vector would give 0/0).
    """
    check_queries_keys(queries, keys, same_size=True, what="cosine scoring")
    _check_number("beta", beta, "a finite number or a tensor broadcastable to the scores")
    _check_number("eps", eps, "a finite number > 0", tensor_ok=False)
    if eps <= 0:
        raise ValueError(f"eps must be a finite number > 0, got {eps!r}")
    if isinstance(beta, torch.Tensor):
        score_shape = (*queries.shape[:-1], keys.shape[-2])
        try:
            fits = torch.broadcast_shapes(beta.shape, score_shape) == score_shape
        except RuntimeError:
            fits = False
        if not fits:  # a larger beta would silently enlarge the scores
            raise ValueError(f"beta of shape {tuple(beta.shape)} does not broadcast to the scores {score_shape}")
    q = queries / queries.norm(dim=-1, keepdim=True).clamp_min(eps)  # unit rows (..., Q, d)
    k = keys / keys.norm(dim=-1, keepdim=True).clamp_min(eps)  # unit rows (..., K, d)
    return beta * (q @ k.transpose(-2, -1))  # (..., Q, K)


def location_score(queries: torch.Tensor, num_keys: int, W_a: Map) -> torch.Tensor:
    """Luong's location-based score ``W_a q``: one score per key *position*, whatever the keys hold.

    ``W_a`` maps a query to ``max_keys`` scores; the first ``num_keys`` (an int >= 0) are used.
    """
    check_non_negative_int("num_keys", num_keys)
    if not isinstance(queries, torch.Tensor):
        raise ValueError(f"queries must be a tensor, got {type(queries).__name__}")
    if queries.dim() < 2:
        raise ValueError(f"queries must have shape (..., items, features), got {_shape(queries)}")
    scores = W_a(queries)  # (..., Q, max_keys)
    if scores.shape[-1] < num_keys:
        raise ValueError(
            f"location scoring was built for at most {scores.shape[-1]} keys (max_keys), got {num_keys} keys"
        )
    return scores[..., :num_keys]  # (..., Q, K)


def distance_score(queries: torch.Tensor, keys: torch.Tensor, W_a: torch.Tensor) -> torch.Tensor:
    """``-|q - W_a k|^2``: chapter 2's Gaussian-kernel score (up to the factor 1/2) after mapping each
    key into the query space with ``W_a`` of shape (query_size, key_size).

    Computed as ``2 q^T W_a k - |q|^2 - |W_a k|^2`` (the general score minus two squared lengths),
    without a (..., Q, K, query_size) tensor of differences. Unlike the additive and concat scores
    without bias, it is even: ``s(-q, -k) = s(q, k)``.
    """
    cross = general_score(queries, keys, W_a)  # checks the shapes and W_a; (..., Q, K)
    mapped = keys @ W_a.transpose(0, 1)  # (..., K, dk) @ (dk, dq) -> (..., K, dq): W_a k for every key
    q_sq = queries.square().sum(-1, keepdim=True)  # (..., Q, 1)
    k_sq = mapped.square().sum(-1).unsqueeze(-2)  # (..., 1, K)
    return 2 * cross - q_sq - k_sq  # (..., Q, K)


def neg_sq_dist_score(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """``-|q - k|^2``: the closest key scores highest (chapter 1's soft lookup).

    Computed as ``-(|q|^2 - 2 q.k + |k|^2)``, clamped at 0 against rounding, without forming all
    (..., Q, K, d) differences.
    """
    check_queries_keys(queries, keys, same_size=True, what="squared-distance scoring")
    dots = queries @ keys.transpose(-2, -1)  # (..., Q, K)
    q_sq = (queries * queries).sum(-1, keepdim=True)  # (..., Q, 1)
    k_sq = (keys * keys).sum(-1).unsqueeze(-2)  # (..., 1, K)
    return -(q_sq - 2 * dots + k_sq).clamp_min(0)
