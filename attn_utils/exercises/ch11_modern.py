"""Checkers for the section on attention in today's models (chapter 11): rotary embeddings and the grouping
of query heads around shared key/value heads.

The expected results come from ``attn_utils.rotary.apply_rotary`` (tested against complex multiplication
in tests/test_rotary_alibi_window.py) and ``attn_utils.multihead.repeat_kv_heads`` (tested through
grouped-query attention computed head by head in tests/test_modern_attention.py).
"""

from __future__ import annotations

import torch

from ..multihead import repeat_kv_heads
from ..rotary import apply_rotary
from .core import Case, register


@register("ch11-modern-write-rotary")
def rotary_cases(device: torch.device) -> list[Case]:
    g = torch.Generator().manual_seed(0)

    def case(name, x, positions=None, base=10000.0):
        return Case(name, (x, positions, base), apply_rotary(x, positions, base))

    one_pair = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 2.0]])  # (n=3, d=2): rotated by 0, 1 and 2 radians
    return [
        case("one pair at positions 0, 1, 2: angles 0, 1, 2 radians", one_pair),
        case("d = 8, base 100, positions 0..4", torch.randn(5, 8, generator=g), None, 100.0),
        case("batch and heads in front: (2, 3, 6, 4)", torch.randn(2, 3, 6, 4, generator=g)),
        case("positions 7..10 (after 7 cached tokens)", torch.randn(1, 4, 8, generator=g), torch.arange(7, 11)),
    ]


@register("ch11-modern-write-kv-grouping")
def kv_grouping_cases(device: torch.device) -> list[Case]:
    g = torch.Generator().manual_seed(1)

    def case(name, kv, num_heads):
        return Case(name, (kv, num_heads), repeat_kv_heads(kv, num_heads))

    labelled = torch.arange(2.0).reshape(1, 2, 1, 1).expand(1, 2, 3, 2).contiguous()  # head h holds the number h
    return [
        case("2 key/value heads for 4 query heads: 0, 0, 1, 1 (not 0, 1, 0, 1)", labelled, 4),
        case("as many key/value heads as query heads: unchanged", torch.randn(2, 4, 5, 3, generator=g), 4),
        case("one key/value head for 6 query heads (multi-query)", torch.randn(2, 1, 5, 3, generator=g), 6),
        case("3 key/value heads for 12 query heads", torch.randn(1, 3, 4, 8, generator=g), 12),
    ]
