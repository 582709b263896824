"""Multi-head attention (Vaswani et al., 2017), with d2l's signature and parameter names.

Each of ``num_heads`` heads attends in its own ``num_hiddens / num_heads``-dimensional subspace:
the queries, keys and values are projected by ``W_q``, ``W_k``, ``W_v`` (``num_hiddens`` outputs
each), split into heads, attended with scaled dot products, concatenated again and mixed by
``W_o``. All heads run as one batched computation.

d2l folds the heads into the batch axis, ``(batch * heads, n, d/heads)`` (``transpose_qkv`` /
``transpose_output``, kept here for the chapter and for comparison); this module keeps them on
their own axis, ``(batch, heads, n, d/heads)``, which is the layout
``torch.nn.functional.scaled_dot_product_attention`` runs fastest on and which lets a mask be
shared by the heads without copying it ``num_heads`` times.

Grouped-query attention (Ainslie et al., 2023) is the option ``num_kv_heads``: ``W_k`` and ``W_v``
then project to ``num_kv_heads`` heads only, and each key/value head serves a contiguous group of
``num_heads // num_kv_heads`` query heads (query head ``h`` reads key/value head
``h // group``). ``num_kv_heads=1`` is multi-query attention (Shazeer, 2019); ``None`` or
``num_heads`` is the layer above, parameter for parameter. A key-value cache then stores only the
shared heads: ``num_heads / num_kv_heads`` times fewer numbers per token.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .attention import DotProductAttention
from .checks import check_attention_inputs, check_positive_int, check_weights_dtype


def transpose_qkv(X: torch.Tensor, num_heads: int) -> torch.Tensor:
    """d2l's layout: ``(batch, n, num_hiddens)`` -> ``(batch * num_heads, n, num_hiddens / num_heads)``."""
    return split_heads(X, num_heads).flatten(0, 1)  # (batch, heads, n, dh) -> (batch * heads, n, dh)


def transpose_output(X: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Undo ``transpose_qkv``: ``(batch * num_heads, n, dh)`` -> ``(batch, n, num_heads * dh)``."""
    check_positive_int("num_heads", num_heads)
    if X.dim() != 3 or X.shape[0] % num_heads:
        raise ValueError(f"expected (batch * {num_heads}, n, d/heads), got shape {tuple(X.shape)}")
    return merge_heads(X.reshape(-1, num_heads, X.shape[1], X.shape[2]))  # (batch, heads, n, dh) -> (batch, n, d)


def split_heads(X: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``(batch, n, num_hiddens)`` -> ``(batch, num_heads, n, num_hiddens / num_heads)``: head h gets
    features ``h * dh`` to ``(h + 1) * dh - 1``."""
    check_positive_int("num_heads", num_heads)
    if X.dim() != 3 or X.shape[-1] % num_heads:
        raise ValueError(f"expected (batch, n, num_hiddens) with num_hiddens divisible by num_heads={num_heads}, "
                         f"got shape {tuple(X.shape)}")
    batch, n, d = X.shape
    return X.reshape(batch, n, num_heads, d // num_heads).transpose(1, 2)  # (batch, heads, n, dh)


def merge_heads(X: torch.Tensor) -> torch.Tensor:
    """``(batch, num_heads, n, dh)`` -> ``(batch, n, num_heads * dh)``: the heads' outputs side by side."""
    batch, heads, n, dh = X.shape
    return X.transpose(1, 2).reshape(batch, n, heads * dh)


def repeat_kv_heads(X: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``(batch, kv_heads, K, dh)`` -> ``(batch, num_heads, K, dh)``: each key/value head repeated for
    its contiguous group of ``num_heads // kv_heads`` query heads (head ``h`` gets ``h // group``)."""
    check_positive_int("num_heads", num_heads)
    kv_heads = X.shape[1]
    if kv_heads == 0 or num_heads % kv_heads:
        raise ValueError(f"{num_heads} query heads cannot share {kv_heads} key/value heads in equal groups")
    return X if kv_heads == num_heads else X.repeat_interleave(num_heads // kv_heads, dim=1)


def heads_mask(valid_lens):
    """Valid lengths or a mask as given for ``(batch, queries, keys)`` scores, made to apply to
    ``(batch, heads, queries, keys)`` scores: a 3-D boolean mask gains a heads axis (without it,
    broadcasting would align its batch axis with the heads). Lengths already broadcast."""
    if isinstance(valid_lens, torch.Tensor) and valid_lens.dtype == torch.bool and valid_lens.dim() == 3:
        return valid_lens.unsqueeze(1)  # (batch, Q, K) -> (batch, 1, Q, K)
    return valid_lens


class MultiHeadAttention(nn.Module):
    """``W_o concat(head_1, ..., head_h)`` with ``head_i = attention(q W_q^i, k W_k^i, v W_v^i)``.

    ``forward(queries, keys, values, valid_lens=None)`` takes ``(batch, Q, query_size)``,
    ``(batch, K, key_size)`` and ``(batch, K, value_size)`` (all three sizes default to
    ``num_hiddens``) and returns ``(batch, Q, num_hiddens)``. ``valid_lens`` is anything
    ``masked_softmax`` takes: lengths ``(batch,)`` or ``(batch, Q)``, or a boolean mask
    broadcastable to ``(batch, Q, K)`` or to ``(batch, heads, Q, K)`` (True = may attend).

    The attention runs through ``DotProductAttention``, so it uses the fused
    ``scaled_dot_product_attention`` unless dropout is active. ``attention_weights`` is
    ``(batch, num_heads, Q, K)`` (d2l's is the same numbers as ``(batch * num_heads, Q, K)``).

    ``project_kv`` and ``attend`` split the forward pass in two so a decoder can project keys and
    values once and reuse them (a key-value cache); ``project_q`` and ``attend_heads`` split it
    further, for code that changes the projected queries and keys (rotary positions) or adds a bias
    to the scores (ALiBi).

    ``num_kv_heads`` (default ``num_heads``): grouped-query attention, see the module docstring.
    ``kernel``: ``DotProductAttention``'s fused kernel, ``"sdpa"`` or ``"triton"`` (lengths only).
    """

    def __init__(self, num_hiddens: int, num_heads: int, dropout: float, use_bias: bool = False, *,
                 query_size: int | None = None, key_size: int | None = None, value_size: int | None = None,
                 fused: bool = True, num_kv_heads: int | None = None, kernel: str = "sdpa"):
        super().__init__()
        check_positive_int("num_hiddens", num_hiddens)
        for name, size in (("query_size", query_size), ("key_size", key_size), ("value_size", value_size)):
            if size is not None:
                check_positive_int(name, size)  # 0 used to fall back silently to num_hiddens
        if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1 or num_hiddens % num_heads:
            raise ValueError(f"num_hiddens ({num_hiddens}) must be a multiple of num_heads, a positive int; "
                             f"got num_heads={num_heads!r}")
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if isinstance(num_kv_heads, bool) or not isinstance(num_kv_heads, int) or num_kv_heads < 1 \
                or num_heads % num_kv_heads:
            raise ValueError(f"num_kv_heads must be a positive int that divides num_heads={num_heads} (each key/value "
                             f"head serves an equal group of query heads), got {num_kv_heads!r}")
        self.num_hiddens, self.num_heads, self.num_kv_heads = num_hiddens, num_heads, num_kv_heads
        self.head_dim = num_hiddens // num_heads
        self.attention = DotProductAttention(dropout, fused=fused, kernel=kernel)
        self.W_q = nn.Linear(query_size or num_hiddens, num_hiddens, bias=use_bias)
        self.W_k = nn.Linear(key_size or num_hiddens, num_kv_heads * self.head_dim, bias=use_bias)
        self.W_v = nn.Linear(value_size or num_hiddens, num_kv_heads * self.head_dim, bias=use_bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=use_bias)

    @property
    def attention_weights(self):
        """``(batch, num_heads, Q, K)`` weights of the last forward pass."""
        return self.attention.attention_weights

    def _check_size(self, name: str, X, layer: nn.Linear) -> None:
        if X.shape[-1] != layer.in_features:
            raise ValueError(f"{name} must have {layer.in_features} features (the size this layer was built "
                             f"for), got shape {tuple(X.shape)}")
        check_weights_dtype(layer, X, "MultiHeadAttention")

    def project_q(self, queries: torch.Tensor) -> torch.Tensor:
        """Queries projected and split into heads: ``(batch, num_heads, Q, dh)``."""
        self._check_size("queries", queries, self.W_q)
        return split_heads(self.W_q(queries), self.num_heads)

    def project_kv(self, keys: torch.Tensor, values: torch.Tensor):
        """Keys and values projected and split into heads: two ``(batch, num_kv_heads, K, dh)`` tensors."""
        self._check_size("keys", keys, self.W_k)
        self._check_size("values", values, self.W_v)
        return split_heads(self.W_k(keys), self.num_kv_heads), split_heads(self.W_v(values), self.num_kv_heads)

    def attend(self, queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, valid_lens=None, *,
               causal: bool = False):
        """Attend with raw ``queries`` ``(batch, Q, query_size)`` to keys and values already
        projected by ``project_kv`` (``(batch, num_kv_heads, K, dh)``); returns ``(batch, Q, num_hiddens)``."""
        return self.attend_heads(self.project_q(queries), keys, values, valid_lens, causal=causal)

    def attend_heads(self, queries, keys, values, valid_lens=None, attn_bias=None, *, causal: bool = False):
        """All heads at once on projected inputs, then ``W_o``: queries ``(batch, num_heads, Q, dh)``, keys
        and values ``(batch, num_kv_heads, K, dh)``; ``attn_bias`` (optional) is added to the ``(batch,
        num_heads, Q, K)`` scores; ``causal=True`` masks later keys (aligned bottom-right, as ``forward``).
        Returns ``(batch, Q, num_hiddens)``."""
        for name, X, heads in (("queries", queries, self.num_heads), ("keys", keys, self.num_kv_heads),
                               ("values", values, self.num_kv_heads)):
            if not isinstance(X, torch.Tensor) or X.dim() != 4 or X.shape[1] != heads or X.shape[-1] != self.head_dim:
                got = tuple(X.shape) if isinstance(X, torch.Tensor) else type(X).__name__
                raise ValueError(f"projected {name} must be (batch, {heads} heads, n, {self.head_dim}), got {got}")
        keys, values = repeat_kv_heads(keys, self.num_heads), repeat_kv_heads(values, self.num_heads)
        output = self.attention(queries, keys, values, heads_mask(valid_lens), attn_bias,
                                causal=causal)  # (batch, heads, Q, dh)
        return self.W_o(merge_heads(output))  # (batch, Q, num_hiddens)

    def forward(self, queries, keys, values, valid_lens=None, *, causal: bool = False):
        """``(batch, Q, num_hiddens)``. ``causal=True`` lets each query see only the keys up to its own
        position, the queries being the last Q of the K positions (``causal_mask``; torch's
        ``is_causal``), on top of ``valid_lens``: a decoder's masked self-attention without building
        the mask. On the fused path with no other mask it is SDPA's ``is_causal``; with
        ``kernel="triton"`` the kernel's own causal loop."""
        check_attention_inputs(queries, keys, values, same_size=False, what="MultiHeadAttention")
        if queries is keys and keys is values and self._same_input_size():
            return self._self_attention(queries, valid_lens, causal)
        return self.attend(queries, *self.project_kv(keys, values), valid_lens, causal=causal)

    def _same_input_size(self) -> bool:
        return self.W_q.in_features == self.W_k.in_features == self.W_v.in_features

    def _self_attention(self, X, valid_lens, causal):
        """Self-attention with the three projections as one matrix product (what torch's module does)."""
        self._check_size("the input", X, self.W_q)
        layers = (self.W_q, self.W_k, self.W_v)
        weight = torch.cat([layer.weight for layer in layers])  # (num_hiddens + 2 * kv_size, in)
        bias = None if self.W_q.bias is None else torch.cat([layer.bias for layer in layers])
        sizes = [layer.out_features for layer in layers]
        q, k, v = F.linear(X, weight, bias).split(sizes, dim=-1)  # (batch, n, num_hiddens), 2 x (batch, n, kv_size)
        q, k, v = split_heads(q, self.num_heads), split_heads(k, self.num_kv_heads), split_heads(v, self.num_kv_heads)
        return self.attend_heads(q, k, v, valid_lens, causal=causal)

    def transpose_qkv(self, X):
        """d2l's method: see the module-level ``transpose_qkv``."""
        return transpose_qkv(X, self.num_heads)

    def transpose_output(self, X):
        """d2l's method: see the module-level ``transpose_output``."""
        return transpose_output(X, self.num_heads)
