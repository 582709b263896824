"""Causal self-attention with a key-value cache, and the ways positions can enter it.

``causal_self_attention`` is the masked self-attention of a decoder block. Where the positions
enter depends on the scheme (``POSITION_SCHEMES``):

* ``"sinusoidal"``, ``"learned"``: added to the token embeddings before the first block
  (Vaswani et al., 2017); attention itself sees no positions.
* ``"rotary"``: queries and keys are rotated by their absolute positions (``apply_rotary``), so
  their scores depend on the offset only (Su et al., 2021).
* ``"alibi"``: each head adds ``-slope * distance`` to its scores (``alibi_bias``; Press et al., 2022).

``window`` limits each query to the last ``window`` positions (sliding-window attention; Beltagy
et al., 2020; Mistral 7B), and the cache then keeps only the last ``window`` keys and values (a
rolling cache): memory stops growing with the length of the text.

What every block of one forward pass shares (the mask, the ALiBi bias, rotary's cos and sin) is
computed once by ``self_attention_context`` and handed to each block's ``causal_self_attention``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from .alibi import alibi_bias
from .checks import check_bool, check_non_negative_int
from .masking import sliding_window_mask
from .rotary import rotary_cos_sin, rotate

POSITION_SCHEMES = ("sinusoidal", "learned", "rotary", "alibi")


def check_position_scheme(position_scheme: str, window=None) -> None:
    """Raise ``ValueError`` unless ``position_scheme`` is one of ``POSITION_SCHEMES`` and ``window`` is
    ``None`` or a positive int."""
    if position_scheme not in POSITION_SCHEMES:
        raise ValueError(f"position_scheme must be one of {POSITION_SCHEMES}, got {position_scheme!r}")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise ValueError(f"window must be None (attend to every earlier position) or a positive int, got {window!r}")


class SelfAttentionContext(NamedTuple):
    """What the self-attention of every block needs for ``T`` new tokens after ``P`` cached ones:
    ``mask`` ``(T, P + T)`` (a sliding window) or ``None``; ``causal``, True when the attention itself masks
    later keys (``MultiHeadAttention``'s ``causal=True``: no mask is built); ``attn_bias`` (ALiBi's
    ``(heads, T, P + T)``) or ``None``; ``rotary`` (``(cos, sin)``, each ``(T, d / heads / 2)``) or ``None``."""

    mask: torch.Tensor | None
    attn_bias: torch.Tensor | None
    rotary: tuple[torch.Tensor, torch.Tensor] | None
    causal: bool = False


def self_attention_context(T: int, P: int, offset: int, *, position_scheme: str = "sinusoidal",
                           window: int | None = None, num_heads: int = 1, head_dim: int = 2, device=None,
                           dtype=torch.float32, causal: bool = True) -> SelfAttentionContext:
    """The ``SelfAttentionContext`` of ``T`` tokens at positions ``offset .. offset + T - 1`` that follow
    ``P`` cached positions (the last P before ``offset``), computed once per forward pass.
    Causal attention without a window builds no mask: it is left to the attention (``causal`` in the
    context). ``causal=False`` (an encoder's self-attention: P = 0, every position sees every other) gives
    no mask and ALiBi's symmetric bias ``-slope * |i - j|``; ``window`` is for causal attention only.
    ``T``, ``P`` and ``offset`` are ints >= 0 (``T = 0``: no mask and no bias), ``causal`` a bool."""
    for name, value in (("T", T), ("P", P), ("offset", offset)):
        check_non_negative_int(name, value)
    check_bool("causal", causal)
    check_position_scheme(position_scheme, window)
    if not causal and (window is not None or P):
        raise ValueError("an encoder's (non-causal) self-attention has no window and no cache")
    mask = None
    if window is not None and T and not (T == 1 and window >= P + T):  # (no token: nothing to mask)
        mask = sliding_window_mask(T, P + T, window, device)  # causal too
    attn_bias = None
    if position_scheme == "alibi" and T:
        attn_bias = alibi_bias(num_heads, T, P + T, device, symmetric=not causal)  # (heads, T, P + T)
    rotary = None
    if position_scheme == "rotary":
        where = torch.arange(offset, offset + T, device=device)
        rotary = rotary_cos_sin(where, head_dim, dtype=torch.float64 if dtype == torch.float64 else torch.float32)
    return SelfAttentionContext(mask, attn_bias, rotary, causal=causal and mask is None)


def causal_self_attention(attention, X, cache=None, block: int = 0, context: SelfAttentionContext | None = None,
                          *, position_scheme: str = "sinusoidal", window: int | None = None):
    """Self-attention of ``X`` ``(batch, T, d)`` to the cached positions before it and to itself (never to
    later ones); returns ``(batch, T, d)``. ``attention`` is a ``MultiHeadAttention``.

    ``cache`` is a ``KVCache`` extended for these T tokens (``KVCache.extended``): this call writes block
    ``block``'s keys and values (rotated already, for rotary) into it and attends to all of the block's
    positions. Without a cache X attends to itself only (positions 0 .. T - 1). ``context`` is the
    forward pass's ``self_attention_context``; without one it is computed here from ``position_scheme``
    and ``window``.
    """
    if not isinstance(X, torch.Tensor) or X.dim() != 3:
        raise ValueError(f"X must be a tensor (batch, T, d), got "
                         f"{tuple(X.shape) if isinstance(X, torch.Tensor) else type(X).__name__}")
    queries = attention.project_q(X)  # (batch, heads, T, dh)
    keys, values = attention.project_kv(X, X)  # (batch, kv_heads, T, dh) each
    if context is None:
        T, P = X.shape[1], 0 if cache is None else cache.positions - X.shape[1]
        offset = 0 if cache is None else cache.length - T
        context = self_attention_context(T, P, offset, position_scheme=position_scheme, window=window,
                                         num_heads=attention.num_heads, head_dim=attention.head_dim,
                                         device=X.device, dtype=X.dtype)
    if context.rotary is not None:
        queries, keys = rotate(queries, *context.rotary), rotate(keys, *context.rotary)
    if cache is not None:
        keys, values = cache.update(block, keys, values)  # (batch, kv_heads, P + T, dh): the cached ones, then these
    return attention.attend_heads(queries, keys, values, context.mask, context.attn_bias, causal=context.causal)
