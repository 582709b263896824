"""Chapter 1's hard and soft lookup: a query scored against every key, then one value or a weighted average.

A Python ``dict`` returns the value whose key *equals* the query. Attention generalises this:
score the query against every key, turn the scores into weights, and return the weighted
average of the values (attention pooling). ``hard_lookup`` keeps only the best-scoring key;
``soft_lookup`` uses ``softmax(score / temperature)``, which tends to the hard lookup as the
temperature goes to 0 and to plain averaging as it grows. Both average through
:func:`attn_utils.attention.attend`, the package's one weighted average (the hard lookup with every
key but the best masked), and name their scores in ``attention.SCORES``.
"""

from __future__ import annotations

import numbers

import torch

from .attention import attend, score_layer
from .masking import make_mask

#: the scores ``lookup_scores`` offers, by their names in ``attention.SCORES``
SCORES = ("neg_sq_dist", "dot")


def lookup_scores(queries: torch.Tensor, keys: torch.Tensor, score: str = "neg_sq_dist") -> torch.Tensor:
    """Similarity of every query with every key.

    ``queries`` (..., Q, d) and ``keys`` (..., K, d) give scores (..., Q, K): the dot product
    ``q . k`` for ``score="dot"``, or ``-||q - k||^2`` for ``score="neg_sq_dist"`` (the closest
    key scores highest). The score is that of the layer of ``attention.SCORES`` of that name (the dot
    product unscaled). Both are floating-point tensors of one dtype.
    """
    layer = score_layer(score, SCORES, **({"scale": 1.0} if score == "dot" else {}))
    for name, t in (("queries", queries), ("keys", keys)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a tensor (..., n, d), got {type(t).__name__}")
    if queries.dim() < 2 or keys.dim() < 2:
        raise ValueError(
            f"queries and keys need shape (..., n, d); got queries {tuple(queries.shape)} and keys "
            f"{tuple(keys.shape)}"
        )
    if queries.shape[-1] != keys.shape[-1]:
        raise ValueError(
            f"queries and keys must have the same feature size d; got queries {tuple(queries.shape)} "
            f"(d={queries.shape[-1]}) and keys {tuple(keys.shape)} (d={keys.shape[-1]})"
        )
    return layer.score(queries, keys)  # (..., Q, K)


def _check_values(keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, bool]:
    for name, t in (("keys", keys), ("values", values)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a tensor, got {type(t).__name__}")
    if values.dtype != keys.dtype:
        raise ValueError(f"values ({values.dtype}) must have the dtype of the queries and keys ({keys.dtype})")
    scalar = values.dim() == keys.dim() - 1
    if scalar:
        values = values.unsqueeze(-1)  # (..., K) -> (..., K, 1)
    if values.shape[:-1] != keys.shape[:-1]:
        raise ValueError(
            f"values must pair one-to-one with keys: keys {tuple(keys.shape)} need values of shape "
            f"{tuple(keys.shape[:-1])} or {tuple(keys.shape[:-1])} + (v,), got {tuple(values.shape)}"
        )
    return values, scalar


def soft_lookup(queries, keys, values, temperature: float = 1.0, score: str = "neg_sq_dist", valid_lens=None):
    """Soft lookup: ``softmax(score(q, k) / temperature)``-weighted average of the values.

    Returns ``(output, weights)`` with weights (..., Q, K) and output (..., Q, v), or (..., Q)
    when ``values`` are scalars (..., K), in the dtype of the queries and keys. ``valid_lens`` masks keys as
    in ``masked_softmax``. ``temperature`` is a number > 0 (not a bool; ``inf`` gives the plain average) or a
    tensor of them that broadcasts to the scores.
    """
    if isinstance(temperature, bool) or not isinstance(temperature, (numbers.Real, torch.Tensor)):
        raise ValueError(f"temperature must be a number > 0, got {type(temperature).__name__} {temperature!r}")
    if not bool((torch.as_tensor(temperature) > 0).all()):
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    values, scalar = _check_values(keys, values)
    output, weights = attend(lookup_scores(queries, keys, score) / temperature, values, valid_lens)  # (..., Q, v)
    return (output.squeeze(-1) if scalar else output), weights


def hard_lookup(queries, keys, values, score: str = "neg_sq_dist", valid_lens=None):
    """Hard lookup: the value of the best-scoring visible key (ties go to the first).

    Returns ``(output, weights)`` like ``soft_lookup``, the weights being one-hot. A query with no
    visible key (or no key at all) gets all-zero weights and a zero output.
    """
    values, scalar = _check_values(keys, values)
    scores = lookup_scores(queries, keys, score)
    mask = make_mask(scores, valid_lens)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    chosen = torch.zeros_like(scores, dtype=torch.bool)  # (..., Q, K): the best key, none when there is no key
    if scores.shape[-1]:
        chosen.scatter_(-1, scores.argmax(dim=-1, keepdim=True), True)
    if mask is not None:
        chosen = chosen & mask  # a query with no visible key chooses none
    # the soft lookup's average with every other key masked: all the weight on the chosen key
    output, weights = attend(torch.zeros_like(scores), values, chosen)
    return (output.squeeze(-1) if scalar else output), weights
