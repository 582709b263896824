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
"""

from __future__ import annotations

import torch

from .alibi import alibi_bias
from .masking import causal_mask, sliding_window_mask
from .rotary import apply_rotary

POSITION_SCHEMES = ("sinusoidal", "learned", "rotary", "alibi")


def check_position_scheme(positions: str, window) -> None:
    """Raise ``ValueError`` unless ``positions`` is one of ``POSITION_SCHEMES`` and ``window`` is
    ``None`` or a positive int."""
    if positions not in POSITION_SCHEMES:
        raise ValueError(f"positions must be one of {POSITION_SCHEMES}, got {positions!r}")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise ValueError(f"window must be None (attend to every earlier position) or a positive int, got {window!r}")


def causal_self_attention(attention, X, past_k, past_v, offset: int, positions: str = "sinusoidal",
                          window: int | None = None):
    """Self-attention of ``X`` ``(batch, T, d)``, the tokens at positions ``offset .. offset + T - 1``,
    to the cached keys and values ``(batch, kv_heads, P, dh)`` of the positions just before them and to
    themselves (never to later ones). ``attention`` is a ``MultiHeadAttention``.

    Returns ``(output, keys, values)``: ``(batch, T, d)`` and the cache extended by this call's keys
    and values (rotated already, for rotary), cut to the last ``window`` positions when there is a
    window.
    """
    check_position_scheme(positions, window)
    queries = attention.project_q(X)  # (batch, heads, T, dh)
    keys, values = attention.project_kv(X, X)  # (batch, kv_heads, T, dh) each
    T, P = X.shape[1], past_k.shape[2]
    if positions == "rotary":
        where = torch.arange(offset, offset + T, device=X.device)
        queries, keys = apply_rotary(queries, where), apply_rotary(keys, where)
    keys, values = torch.cat([past_k, keys], dim=2), torch.cat([past_v, values], dim=2)  # (batch, kv_heads, P + T, dh)
    if window is None:
        mask = None if T == 1 else causal_mask(T, P + T, X.device)
    else:
        mask = None if T == 1 and window >= P + T else sliding_window_mask(T, P + T, window, X.device)
    bias = alibi_bias(attention.num_heads, T, P + T, X.device) if positions == "alibi" else None  # (heads, T, P+T)
    output = attention.attend_heads(queries, keys, values, mask, bias)
    if window is not None:
        keys, values = keys[:, :, -window:], values[:, :, -window:]  # the rolling cache: the last `window` positions
    return output, keys, values
