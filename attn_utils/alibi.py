"""ALiBi, attention with linear biases (Press et al., 2022): positions enter as a penalty on the scores.

No position is added to the tokens. Instead each head ``h`` adds ``-m_h * (i - j)`` to the score of
query ``i`` for key ``j``: the further back the key, the lower its score, at a rate ``m_h`` of its
own. For ``n`` heads, ``n`` a power of two, the slopes are the geometric sequence that starts at
``2^(-8 / n)`` and has that ratio (1/2, 1/4, ..., 1/256 for 8 heads); otherwise the paper's code takes
the slopes of the largest power of two below ``n`` and fills up with every other slope of twice that
power.
"""

from __future__ import annotations

import math

import torch

from .checks import check_positive_int, check_query_count


def _power_of_two_slopes(n: int) -> list[float]:
    start = 2 ** (-8 / n)
    return [start ** (i + 1) for i in range(n)]


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """``(num_heads,)``: each head's slope, by the paper's recipe (see the module docstring)."""
    check_positive_int("num_heads", num_heads)
    if num_heads & (num_heads - 1) == 0:
        return torch.tensor(_power_of_two_slopes(num_heads))
    closest = 2 ** math.floor(math.log2(num_heads))
    extra = _power_of_two_slopes(2 * closest)[0::2][:num_heads - closest]
    return torch.tensor(_power_of_two_slopes(closest) + extra)


def alibi_bias(num_heads: int, num_queries: int, num_keys: int, device=None, *, symmetric: bool = False
               ) -> torch.Tensor:
    """``(num_heads, num_queries, num_keys)``: ``-slope_h * (query position - key position)``, the
    queries being the last ``num_queries`` of the ``num_keys`` positions (aligned as ``causal_mask``).
    Add it to the scores before the softmax, together with the causal mask. ``symmetric=True`` gives
    ``-slope_h * |query position - key position|``, for attention that looks both ways (an encoder's)."""
    check_query_count(num_queries, num_keys)
    if not isinstance(symmetric, bool):
        raise ValueError(f"symmetric must be True or False, got {symmetric!r}")
    queries = torch.arange(num_keys - num_queries, num_keys, device=device)
    offset = (torch.arange(num_keys, device=device)[None, :] - queries[:, None]).float()  # (queries, keys): j - i
    if symmetric:
        offset = -offset.abs()  # -|i - j|
    return alibi_slopes(num_heads).to(device)[:, None, None] * offset  # -slope * (i - j), with +0.0 on the diagonal
