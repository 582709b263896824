"""Attention layers that score every key, mask, softmax, and average the values.

One function, :func:`attend`, computes every weighted average of the package: ``attend(scores,
values, valid_lens=None, attn_bias=None, dropout=None) -> (output, weights)``, the masked softmax of
``scores + attn_bias`` and the weighted sum of the values, by the NaN rule below. Every layer shares one
base, :class:`ScoredAttention`, whose ``forward(queries, keys, values, valid_lens=None)`` is
``attend(self.score(queries, keys), values, ...)`` with the weights kept as ``.attention_weights``
and dropout on them (training mode only): a layer only says how it scores. The other weighted
averages call :func:`attend` too: the decoders of chapters 5 and 6 (which hold these layers), the
lookups of chapter 1, Nadaraya–Watson pooling, learned-query and mean pooling, soft glimpses.

``SCORES`` is the one list of scores by name (``"dot"``, ``"general"``, ``"concat"``, ``"uniform"``,
...), each the layer that scores that way; :func:`score_layer` builds one, and every string option
that picks a score (``LuongDecoder(score=...)``, ``soft_lookup(score=...)``) names one of them.

Shapes: queries (batch, Q, query_size), keys (batch, K, key_size), values (batch, K, value_size)
-> output (batch, Q, value_size); more leading dimensions (e.g. heads) work too. ``valid_lens``
is ``None``, valid lengths (batch,) or (batch, Q), or a boolean mask broadcastable to the scores
(batch, Q, K), ``True`` where a query may look (see :func:`attn_utils.masked_softmax`). ``attn_bias``,
a floating-point tensor broadcastable to the scores, is added to them before the softmax (ALiBi's
distance penalty, for instance); masked keys stay masked whatever their bias.

Non-finite inputs follow one rule on every path (fused or explicit, see :mod:`attn_utils.masking`):
keys and values a query cannot see (masked, or with a -inf score) never change its output, even if
they hold NaN or inf (nor any gradient, when no query of the batch sees them: padding); a NaN
that a query does use (in its own features, a visible key or value, the bias) gives NaN in that
query's output, never a silent zero; a +inf score makes the query's output
NaN (it is not read as "all the weight on that key"), a -inf score masks that key, and an inf in a
visible value gives NaN in that feature; a fully masked query gives zeros.

Keeping that rule means looking for NaN and inf in the inputs, which on a GPU makes the host wait for
the device (see :mod:`attn_utils.checks`). So the look is taken on the CPU, and on an accelerator only
under ``attn_utils.strict_checks()``; otherwise a GPU computes straight through torch's kernels, with
no host synchronisation: finite inputs give the same result, and a NaN or inf may then also reach
queries that mask it (torch's kernels multiply masked weights of 0 by it).

``DotProductAttention`` and ``AdditiveAttention`` have d2l's signatures and parameter names, so
state dicts move between these layers and d2l's. The layers with learned maps size them at their
first call (lazily, as d2l's do) or, given ``query_size`` and ``key_size``, at once: that is how
the decoders of chapters 5 and 6 build theirs, so that their own initialisation reaches them.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.modules.lazy import LazyModuleMixin

from .checks import (
    check_attention_inputs,
    check_positive_int,
    check_probability,
    check_weights_dtype,
    checks_read_values,
    is_finite_number,
)
from .masking import LOW_PRECISION_DTYPES, make_mask, masked_softmax, masked_softmax_visible, with_causal
from .scoring import (
    additive_score,
    concat_score,
    cosine_score,
    distance_score,
    dot_score,
    general_score,
    location_score,
    neg_sq_dist_score,
)


class ScoredAttention(nn.Module):
    """Base of every layer: ``softmax(score(q, k)) @ values`` with masking and dropout.

    Subclasses implement ``score(queries, keys) -> (..., Q, K)``. After a forward pass
    ``.attention_weights`` holds the weights (before dropout), as in d2l.
    """

    same_size = False  # must queries and keys have the same feature size?

    def __init__(self, dropout: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        self.attention_weights = None

    def score(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def __getstate__(self):
        # Copies and pickles leave out the last pass's weights, which may hold an autograd graph
        # (copy.deepcopy refuses such tensors).
        state = super().__getstate__()
        for name in ("attention_weights", "_weights", "_saved"):
            if name in state:
                state[name] = None
        return state

    def forward(self, queries, keys, values, valid_lens=None, attn_bias=None, *, causal: bool = False):
        """``causal=True`` also masks the keys after each query, aligned bottom-right (``causal_mask``: the
        queries are the last Q of the K positions), on top of ``valid_lens``."""
        check_attention_inputs(queries, keys, values, self.same_size, type(self).__name__)
        check_weights_dtype(self, queries, type(self).__name__)
        check_causal(causal)
        keys = hide_unseen_keys(queries, keys, valid_lens)
        scores = self.score(queries, keys)
        if causal:
            valid_lens = with_causal(scores, valid_lens)
        output, self.attention_weights = attend(scores, values, valid_lens, attn_bias, self.dropout)
        return output


def check_causal(causal) -> None:
    """Raise ``ValueError`` unless ``causal`` is True or False (a mask or a length belongs in ``valid_lens``)."""
    if not isinstance(causal, bool):
        raise ValueError(f"causal must be True or False (masks and lengths go in valid_lens), got "
                         f"{type(causal).__name__}")


def check_scale(scale, name: str = "scale", none_means: str | None = "1/sqrt(d)"):
    """Return ``scale`` if it is a finite number (or ``None`` where ``none_means`` says what it stands for),
    else raise ``ValueError`` naming ``name``: a NaN scale gave NaN on the explicit path of
    ``DotProductAttention`` and zeros on the fused one, and NaN weights in the other layers."""
    if scale is None and none_means is not None:
        return scale
    if not is_finite_number(scale):
        expected = f"None ({none_means}) or a finite number" if none_means is not None else "a finite number"
        raise ValueError(f"{name} must be {expected}, got {scale!r}")
    return scale


def attend(scores: torch.Tensor, values: torch.Tensor, valid_lens=None, attn_bias: torch.Tensor | None = None,
           dropout=None) -> tuple[torch.Tensor, torch.Tensor]:
    """The weighted average of the package: ``(output, weights)`` with ``weights = masked_softmax(scores + attn_bias,
    valid_lens)`` and ``output = weights @ values``.

    ``scores`` (..., Q, K) and ``values`` (..., K, v) give ``output`` (..., Q, v) and ``weights`` (..., Q, K).
    ``valid_lens`` takes every form :func:`attn_utils.masked_softmax` takes (lengths (batch,) or (batch, Q),
    or a boolean mask broadcastable to the scores, ``True`` where a query may look); ``attn_bias`` (optional) is a
    floating-point tensor broadcastable to the scores, added before the softmax. ``dropout`` (optional, a
    module such as ``nn.Dropout`` or any function of the weights) acts on the weights before they average the
    values; the weights returned are those before it, d2l's ``attention_weights``. A query with no visible key
    gets zero weights and a zero output. NaN and inf follow the module docstring's rule: a value that a query
    cannot see never changes its output, a visible non-finite value makes that feature NaN (the look is taken
    as ``checks_read_values`` says). Keys are not this function's business: a layer hides unseen non-finite
    keys from the backward pass (``hide_unseen_keys``) before it scores them.
    """
    check_scores_values(scores, values)
    weights, visible = masked_softmax_visible(add_bias(scores, attn_bias), valid_lens)
    return weighted_values(weights if dropout is None else dropout(weights), values, visible), weights


def check_scores_values(scores, values) -> None:
    """Raise ``ValueError`` unless ``scores`` (..., Q, K) and ``values`` (..., K, v) are tensors that pair the
    same K keys."""
    for name, t, form in (("scores", scores, "(..., queries, keys)"), ("values", values, "(..., keys, features)")):
        if not isinstance(t, torch.Tensor) or t.dim() < 2:
            got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"attend expects {name} of shape {form}, got {got}")
    if scores.shape[-1] != values.shape[-2]:
        raise ValueError(f"attend expects one value per key: scores {tuple(scores.shape)} score "
                         f"{scores.shape[-1]} keys, values {tuple(values.shape)} hold {values.shape[-2]}")


def hide_unseen_keys(queries: torch.Tensor, keys: torch.Tensor, valid_lens) -> torch.Tensor:
    """``keys`` with NaN and inf replaced by 0 in the keys that no query may see (padding, say).

    The forward pass never uses such a key, but the backward pass would multiply its zero score
    gradient by it, and 0 * NaN = NaN in the gradient of every query. (A non-finite key that some
    query does see still makes the gradients of the others NaN: its output is NaN anyway.) Costs one
    sum of the keys when they are all finite."""
    if valid_lens is None or not checks_read_values(keys) or all_finite(keys):
        return keys
    scores = torch.empty((), device=keys.device).expand(*queries.shape[:-1], keys.shape[-2])  # shape only
    mask = make_mask(scores, valid_lens, within_keys=True)  # (..., Q or 1, K) broadcastable to the scores
    seen = mask.any(dim=-2).unsqueeze(-1)  # (..., K, 1): does any query see key j?
    return torch.where(seen | keys.isfinite(), keys, torch.zeros((), dtype=keys.dtype, device=keys.device))


def weighted_values(weights: torch.Tensor, values: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    """``weights @ values`` ((..., Q, K) @ (..., K, v) -> (..., Q, v)), where a value that a query cannot
    see (``visible`` False) never matters, even NaN or inf (a plain product gives 0 * NaN = NaN); a
    non-finite value that it can see makes that feature of its output NaN. Costs one sum of the
    values when they are all finite."""
    if not checks_read_values(values) or all_finite(values):
        return weights @ values
    finite = values.isfinite()
    output = weights @ values.masked_fill(~finite, 0.0)
    poisoned = (visible.to(values.dtype) @ (~finite).to(values.dtype)) > 0  # (..., Q, v): sees a non-finite value
    return output.masked_fill(poisoned, float("nan"))


def all_finite(*tensors) -> bool:
    """Are the tensors free of NaN and inf? One host sync, and a sum per tensor rather than an
    ``isfinite`` pass (about 40 times cheaper on CPU): a NaN or inf always makes the sum non-finite;
    a sum that overflows says "no" for finite inputs, which only costs the slower exact path."""
    tensors = [t.detach() for t in tensors]  # a check, not part of the computation: nothing for autograd to save
    sums = [t.sum(dtype=torch.float32) if t.dtype in LOW_PRECISION_DTYPES else t.sum() for t in tensors]
    return bool(torch.stack([total.to(torch.float64) for total in sums]).isfinite().all())


def finite_bias(attn_bias) -> bool:
    """Is ``attn_bias`` free of NaN and +inf (-inf masks a key, and is fine)? One host sync; True for None."""
    return attn_bias is None or not isinstance(attn_bias, torch.Tensor) or bool((attn_bias < float("inf")).all())


def add_bias(scores: torch.Tensor, attn_bias: torch.Tensor | None) -> torch.Tensor:
    """``scores + attn_bias``, after checking that ``attn_bias`` is a floating-point tensor that broadcasts to the
    scores without changing their shape."""
    if attn_bias is None:
        return scores
    check_bias(attn_bias, scores.shape)
    return scores + attn_bias.to(scores.dtype)


def check_bias(attn_bias, score_shape) -> None:
    """Raise ``ValueError`` unless ``attn_bias`` is a floating-point tensor broadcastable to ``score_shape``."""
    if not isinstance(attn_bias, torch.Tensor) or not attn_bias.is_floating_point():
        got = f"dtype {attn_bias.dtype}" if isinstance(attn_bias, torch.Tensor) else type(attn_bias).__name__
        raise ValueError(f"attn_bias must be a floating-point tensor added to the scores, got {got}")
    try:
        shape = torch.broadcast_shapes(attn_bias.shape, score_shape)
    except RuntimeError:
        shape = None
    if shape != tuple(score_shape):
        raise ValueError(f"attn_bias of shape {tuple(attn_bias.shape)} does not broadcast to scores of shape "
                         f"{tuple(score_shape)}")


def fused_dot_product_attention(queries, keys, values, valid_lens=None, scale: float | None = None, attn_bias=None,
                                causal: bool = False):
    """``softmax(scale * Q K^T + attn_bias) V`` through ``F.scaled_dot_product_attention``, with our masks.

    ``valid_lens`` is taken in every form ``masked_softmax`` takes; ``attn_bias`` (optional) is a float tensor
    broadcastable to the ``(..., Q, K)`` scores. ``causal=True`` masks later keys, aligned bottom-right
    (``with_causal``); with no other mask or bias and as many queries as keys it is SDPA's own ``is_causal``,
    which never builds the mask and lets a GPU use its FlashAttention kernels. A query with no visible
    key gets a zero output, whatever the torch version or backend would return for it (some give NaN).

    torch's kernel lets a NaN or inf in a masked key or value leak into every output (masking adds
    -inf to a NaN score; 0 * NaN = NaN). So when an input holds NaN or inf (or the bias NaN or +inf),
    the result is computed explicitly instead, by the rule of the module docstring; finite inputs
    (the common case) cost one sum of each. On an accelerator that look is only taken under
    ``strict_checks()`` (module docstring): by default the call never waits for the device.
    """
    check_causal(causal)
    check_scale(scale)
    # A stride-0 stand-in for the (..., Q, K) scores, only so make_mask can read their shape.
    score_shape = torch.empty((), device=queries.device).expand(*queries.shape[:-1], keys.shape[-2])
    is_causal = causal and valid_lens is None and attn_bias is None and queries.shape[-2] == keys.shape[-2]
    looked = checks_read_values(queries, keys, values, attn_bias)  # the CPU, or strict checks on an accelerator
    if causal and not is_causal:
        valid_lens = with_causal(score_shape, valid_lens)  # one boolean mask, or None
    if looked and not (finite_bias(attn_bias) and all_finite(queries, keys, values)):
        lens = with_causal(score_shape, valid_lens) if is_causal else valid_lens
        return attend(dot_score(queries, hide_unseen_keys(queries, keys, lens), scale), values, lens, attn_bias)[0]
    mask = make_mask(score_shape, valid_lens, within_keys=True)  # None, or bool broadcastable to (..., Q, K)
    visible = None
    if mask is not None:
        visible = mask.any(dim=-1, keepdim=True)  # (..., Q or 1, 1): does the row see any key?
        if visible.device.type == "cpu" and bool(visible.all()):  # free to read there: no row to zero, no copy
            visible = None
        else:
            mask = mask | ~visible  # a fully masked row may look everywhere (finite), and is zeroed below
    if attn_bias is not None:
        check_bias(attn_bias, score_shape.shape)
        attn_bias = attn_bias.to(device=queries.device, dtype=queries.dtype)
        if attn_bias.dim() < 2:  # 0-d or (K,): SDPA takes masks of two dimensions or more
            attn_bias = attn_bias.expand(score_shape.shape[-2:]).contiguous()  # (Q, K): GPU kernels want stride 1
        mask = attn_bias if mask is None else attn_bias.masked_fill(~mask, float("-inf"))  # one additive mask
    unbatched_heads = queries.dim() == 3
    if unbatched_heads:
        # (batch, n, d) -> (batch, 1, n, d): torch's fast CPU kernel takes (batch, heads, n, d) only
        queries, keys, values = queries.unsqueeze(1), keys.unsqueeze(1), values.unsqueeze(1)
        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)  # (batch, Q or 1, K) -> (batch, 1, Q or 1, K)
    output = F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask, scale=scale, is_causal=is_causal)
    if unbatched_heads:
        output = output.squeeze(1)  # (batch, Q, v)
    return output if visible is None else output.masked_fill(~visible, 0.0)  # +0.0, and no gradient


class DotProductAttention(ScoredAttention):
    """Scaled dot-product attention, ``softmax(Q K^T / sqrt(d)) V`` (d2l's signature).

    ``scale`` multiplies the dot products (default ``1/sqrt(d)``; ``scale=1.0`` gives Luong's dot).
    With ``fused=True`` (the default) the output comes from ``F.scaled_dot_product_attention``
    whenever that computes the same thing, i.e. unless dropout is active (training with
    ``dropout > 0``, where the explicit path applies ``nn.Dropout`` to the weights as d2l does).
    On the fused path ``.attention_weights`` is computed from the saved (detached) queries and
    keys the first time it is read, so a forward pass that nobody inspects never builds the
    (batch, Q, K) matrix; those weights carry no gradient, so build with ``fused=False`` when a
    loss must differentiate through the weights themselves. Reading them after the inputs were
    changed in place raises ``RuntimeError`` rather than returning weights of other inputs.
    torch's fused CPU kernel has no forward-mode derivative (``torch.func.jvp``,
    ``torch.autograd.forward_ad`` raise ``NotImplementedError``): use ``fused=False`` for those.

    NaN and inf give the same result on both paths (module docstring): masked keys and values never
    matter, a NaN a query uses makes its output NaN, and so does a +inf score (say, from an overflow).

    ``kernel`` picks the fused path's kernel: ``"sdpa"`` (torch's ``scaled_dot_product_attention``, any
    mask and bias) or ``"triton"`` (the course's FlashAttention-2, :mod:`attn_utils.triton_attention`:
    valid lengths only, no bias and no boolean mask; on a CUDA GPU, or through Triton's interpreter
    on the CPU). The NaN look of the module docstring is SDPA's path only.
    """

    same_size = True
    KERNELS = ("sdpa", "triton")

    def __init__(self, dropout: float, *, scale: float | None = None, fused: bool = True, kernel: str = "sdpa",
                 **kwargs):
        super().__init__(dropout, **kwargs)
        if kernel not in self.KERNELS:
            raise ValueError(f"kernel must be one of {self.KERNELS}, got {kernel!r}")
        if not isinstance(fused, bool):
            raise ValueError(f"fused must be True or False, got {fused!r}")
        self.scale = check_scale(scale)
        self.fused = fused
        self.kernel = kernel

    def score(self, queries, keys):
        return dot_score(queries, keys, self.scale)

    @property
    def attention_weights(self):
        if self._weights is None and self._saved is not None:
            queries, keys, valid_lens, attn_bias, causal, versions = self._saved
            if (queries._version, keys._version) != versions:
                raise RuntimeError(
                    "the queries or keys of the last forward pass were modified in place since (e.g. by an "
                    "optimizer step), so its attention weights can no longer be computed; read "
                    ".attention_weights before changing them, or build the layer with fused=False"
                )
            scores = self.score(queries, keys)
            self._weights = masked_softmax(add_bias(scores, attn_bias),
                                           with_causal(scores, valid_lens) if causal else valid_lens)
            self._saved = None
        return self._weights

    @attention_weights.setter
    def attention_weights(self, value):
        self._weights, self._saved = value, None

    def forward(self, queries, keys, values, valid_lens=None, attn_bias=None, *, causal: bool = False):
        if not self.fused or (self.training and self.dropout.p > 0):
            return super().forward(queries, keys, values, valid_lens, attn_bias, causal=causal)
        check_attention_inputs(queries, keys, values, True, "DotProductAttention")
        check_causal(causal)
        if self.kernel == "triton":
            output = self._triton(queries, keys, values, valid_lens, attn_bias, causal)
        else:
            output = fused_dot_product_attention(queries, keys, values, valid_lens, self.scale, attn_bias, causal)
        queries, keys = queries.detach(), keys.detach()  # share storage (and version counters) with the inputs
        attn_bias = None if attn_bias is None else attn_bias.detach()
        self._weights, self._saved = None, (queries, keys, valid_lens, attn_bias, causal,
                                            (queries._version, keys._version))
        return output


    def _triton(self, queries, keys, values, valid_lens, attn_bias, causal):
        from .triton_attention import triton_attention  # imports Triton on first use only

        if attn_bias is not None or (isinstance(valid_lens, torch.Tensor) and valid_lens.dtype == torch.bool):
            raise ValueError("DotProductAttention(kernel='triton') takes valid lengths only, no attn_bias and no "
                             "boolean mask: build the layer with kernel='sdpa' for those")
        return triton_attention(queries, keys, values, valid_lens, causal=causal, scale=self.scale)[0]


def set_attention_kernel(model: nn.Module, kernel: str) -> nn.Module:
    """Switch every ``DotProductAttention`` inside ``model`` (its ``MultiHeadAttention`` layers') to ``kernel``,
    ``"sdpa"`` or ``"triton"``; returns ``model``. The weights do not change, only how attention is computed:
    e.g. a ``CausalLanguageModel`` without ALiBi or a window runs on the Triton kernel of section 11.5."""
    if kernel not in DotProductAttention.KERNELS:
        raise ValueError(f"kernel must be one of {DotProductAttention.KERNELS}, got {kernel!r}")
    for module in model.modules():
        if isinstance(module, DotProductAttention):
            module.kernel = kernel
    return model


class AdditiveAttention(ScoredAttention):
    """Additive (Bahdanau) attention, ``w_v^T tanh(W_q q + W_k k)``; d2l's signature and parameter names.

    Query and key sizes may differ; ``W_q``, ``W_k`` and ``w_v`` are lazy, sized at the first call, or
    built at once when ``query_size`` and ``key_size`` are given (``BahdanauDecoder`` holds one built so).
    Either way they are built, and draw their initial weights, in the order the score uses them: ``W_q``,
    ``W_k``, then ``w_v``. The state dict holds d2l's keys, ``W_q.weight``, ``W_k.weight`` and
    ``w_v.weight`` (d2l lists ``W_k`` first; state dicts load by name, in both directions).
    ``use_bias=True`` gives ``W_q`` a bias vector ``b`` (one more key, ``W_q.bias``), so the score is
    ``w_v^T tanh(W_q q + b + W_k k)``: without it the score is odd, ``s(-q, -k) = -s(q, k)``
    (chapter 3 shows what that costs on data that look the same with every sign flipped).
    ``project_keys`` and ``score_projected`` split the score for callers that score many queries
    against the same keys: ``W_k k`` is computed once.
    """

    def __init__(self, num_hiddens: int, dropout: float, use_bias: bool = False, *, query_size: int | None = None,
                 key_size: int | None = None, **kwargs):
        super().__init__(dropout, **kwargs)
        check_positive_int("num_hiddens", num_hiddens)
        sized = check_sizes(query_size, key_size)
        self.W_q = linear_map(query_size, num_hiddens, use_bias)
        self.W_k = linear_map(key_size, num_hiddens, False)
        self.w_v = linear_map(num_hiddens if sized else None, 1, False)

    def score(self, queries, keys):
        check_built_for(self, self.W_q, queries.shape[-1], "queries of size", queries, keys)
        check_built_for(self, self.W_k, keys.shape[-1], "keys of size", queries, keys)
        return additive_score(queries, keys, self.W_q, self.W_k, self.w_v)

    def project_keys(self, keys: torch.Tensor) -> torch.Tensor:
        """``W_k k`` for every key: (..., K, key_size) -> (..., K, num_hiddens), for ``score_projected``."""
        return self.W_k(keys)

    def score_projected(self, queries: torch.Tensor, projected_keys: torch.Tensor) -> torch.Tensor:
        """``score(queries, keys)`` from ``projected_keys = project_keys(keys)``: (..., Q, K)."""
        check_built_for(self, self.W_q, queries.shape[-1], "queries of size", queries, projected_keys)
        return additive_score(queries, projected_keys, self.W_q, nn.Identity(), self.w_v)


def check_sizes(query_size: int | None, key_size: int | None) -> bool:
    """Are the layer's maps to be built now (both sizes given) rather than at the first call (neither)?"""
    if (query_size is None) != (key_size is None):
        raise ValueError(f"give both query_size and key_size (to build the layer now) or neither (to size it at "
                         f"its first call), got query_size={query_size!r}, key_size={key_size!r}")
    if query_size is not None:
        check_positive_int("query_size", query_size)
        check_positive_int("key_size", key_size)
    return query_size is not None


def linear_map(in_features: int | None, out_features: int, use_bias: bool) -> nn.Module:
    """``nn.Linear(in_features, out_features)``, or ``nn.LazyLinear(out_features)`` when ``in_features`` is None."""
    if in_features is None:
        return nn.LazyLinear(out_features, bias=use_bias)
    return nn.Linear(in_features, out_features, bias=use_bias)


def check_built_for(layer: nn.Module, linear: nn.Module, size: int, what: str, queries, keys) -> None:
    """A lazy ``linear`` map of ``layer`` took its input size at the first call: refuse inputs of another
    size with a message naming both, rather than torch's "mat1 and mat2 shapes cannot be multiplied"."""
    if isinstance(linear.weight, nn.parameter.UninitializedParameter):
        return
    built = linear.weight.shape[1]  # not linear.in_features, which stays 0 after load_state_dict
    if size != built:
        raise ValueError(f"{type(layer).__name__} was built (at its first call) for {what} {built}, got {size} "
                         f"(queries {tuple(queries.shape)}, keys {tuple(keys.shape)}); use a new layer for "
                         "other sizes")


class GeneralAttention(LazyModuleMixin, ScoredAttention):
    """Luong's general (bilinear) attention, ``scale * q^T W_a k``.

    ``W_a`` (query_size, key_size) is sized at the first call, or at once when ``query_size`` and
    ``key_size`` are given. ``init`` initialises it in place (default: as ``nn.Linear`` does its weight,
    U(+-1/sqrt(key_size)); ``LuongDecoder`` passes ``nn.init.xavier_uniform_``). ``scale`` multiplies the
    scores (``LuongDecoder(scaled=True)`` passes ``1/sqrt(h)``).
    """

    def __init__(self, dropout: float = 0.0, *, query_size: int | None = None, key_size: int | None = None,
                 scale: float = 1.0, init=None, **kwargs):
        super().__init__(dropout, **kwargs)
        self.scale, self.init = check_scale(scale, none_means=None), init
        if check_sizes(query_size, key_size):
            self.W_a = nn.Parameter(torch.empty(query_size, key_size))
            self.reset_parameters()
        else:
            self.W_a = nn.UninitializedParameter()

    def reset_parameters(self) -> None:
        """Draw ``W_a`` anew with ``init``."""
        with torch.no_grad():
            if self.init is None:
                nn.init.kaiming_uniform_(self.W_a, a=math.sqrt(5))  # as nn.Linear: U(+-1/sqrt(key_size))
            else:
                self.init(self.W_a)

    def initialize_parameters(self, queries, keys, values, *args, **kwargs) -> None:
        """Called by the lazy-module hook before the first forward: size ``W_a`` from the inputs."""
        if self.has_uninitialized_params():
            check_attention_inputs(queries, keys, values, what=type(self).__name__)
            with torch.no_grad():
                self.W_a.materialize((queries.shape[-1], keys.shape[-1]))
            self.reset_parameters()

    def score(self, queries, keys):
        return scaled(general_score(queries, keys, self.W_a), self.scale)


def scaled(scores: torch.Tensor, scale: float) -> torch.Tensor:
    """``scores * scale``, leaving the scores as they are for the usual ``scale = 1``."""
    return scores if scale == 1.0 else scores * scale


class ConcatAttention(ScoredAttention):
    """Luong's concat attention, ``v_a^T tanh(W_a [q; k])`` (Bahdanau's additive form with one matrix).

    The state dict holds ``W_a.weight`` and ``v_a.weight``; ``use_bias=True`` adds ``W_a.bias``, the
    same as ``AdditiveAttention(use_bias=True)``'s ``W_q.bias``. Lazy, or built at once given
    ``query_size`` and ``key_size`` (``W_a`` first, as the lazy layer draws them at its first call).
    """

    def __init__(self, num_hiddens: int, dropout: float = 0.0, use_bias: bool = False, *,
                 query_size: int | None = None, key_size: int | None = None, **kwargs):
        super().__init__(dropout, **kwargs)
        check_positive_int("num_hiddens", num_hiddens)
        sized = check_sizes(query_size, key_size)
        self.W_a = linear_map(query_size + key_size if sized else None, num_hiddens, use_bias)
        self.v_a = linear_map(num_hiddens if sized else None, 1, False)

    def score(self, queries, keys):
        check_built_for(self, self.W_a, queries.shape[-1] + keys.shape[-1], "query and key sizes adding up to",
                        queries, keys)
        return concat_score(queries, keys, self.W_a, self.v_a)


class DistanceAttention(GeneralAttention):
    """A learned distance score, ``-|q - W_a k|^2``: chapter 2's Gaussian kernel (up to a factor 1/2)
    with the keys mapped into the query space by ``W_a`` (query_size, key_size), sized at the first
    call as in :class:`GeneralAttention`. It is the general score ``2 q^T W_a k`` minus ``|W_a k|^2``
    (and ``|q|^2``, which the softmax ignores): a key does not win by being long.
    """

    def score(self, queries, keys):
        return scaled(distance_score(queries, keys, self.W_a), self.scale)


class CosineAttention(ScoredAttention):
    """Content-based attention of the Neural Turing Machine, ``softmax(beta * cos(q, k))``.

    ``beta`` (the key strength) sharpens the weights as it grows; ``learn_beta=True`` makes it a
    parameter.
    """

    same_size = True

    def __init__(self, beta: float = 1.0, dropout: float = 0.0, learn_beta: bool = False, **kwargs):
        super().__init__(dropout, **kwargs)
        beta = check_scale(beta, "beta", none_means=None)
        self.beta = nn.Parameter(torch.tensor(float(beta))) if learn_beta else float(beta)

    def score(self, queries, keys):
        return cosine_score(queries, keys, self.beta)


class LocationAttention(ScoredAttention):
    """Luong's location-based attention, ``softmax(W_a q)``: weights from the query alone.

    ``W_a`` gives one score per key position, up to ``max_keys``; the keys' content is ignored
    (only their number is used), so this layer cannot find a key by what it holds.
    """

    def __init__(self, max_keys: int, dropout: float = 0.0, **kwargs):
        super().__init__(dropout, **kwargs)
        self.max_keys = check_positive_int("max_keys", max_keys)
        self.W_a = nn.LazyLinear(max_keys, bias=False)

    def score(self, queries, keys):
        check_built_for(self, self.W_a, queries.shape[-1], "queries of size", queries, keys)
        return location_score(queries, keys.shape[-2], self.W_a)


class SquaredDistanceAttention(ScoredAttention):
    """Chapter 1's soft lookup as a layer: ``softmax(-|q - k|^2)``, the closest key scoring highest; no
    parameters (``DistanceAttention`` learns a map of the keys first)."""

    same_size = True

    def score(self, queries, keys):
        return neg_sq_dist_score(queries, keys)


class UniformAttention(ScoredAttention):
    """Every score 0: equal weights over the visible keys, the mean of their values. The ablation that
    keeps a model but its choice of where to look (``LuongDecoder(score="uniform")``), and mean pooling."""

    def score(self, queries, keys):
        return queries.new_zeros(*queries.shape[:-1], keys.shape[-2])  # (..., Q, K)


#: The one list of scores by name: name -> the layer that scores that way (built by ``score_layer``). Every string
#: option that picks a score names one of these: ``LuongDecoder(score=...)`` ("dot", "general", "concat",
#: "uniform") and ``soft_lookup(score=...)`` ("neg_sq_dist", "dot").
SCORES: dict[str, type[ScoredAttention]] = {
    "dot": DotProductAttention,
    "additive": AdditiveAttention,
    "general": GeneralAttention,
    "concat": ConcatAttention,
    "distance": DistanceAttention,
    "neg_sq_dist": SquaredDistanceAttention,
    "cosine": CosineAttention,
    "location": LocationAttention,
    "uniform": UniformAttention,
}


def score_layer(name: str, choices=None, **options) -> ScoredAttention:
    """The layer ``SCORES[name](**options)``, with ``dropout`` 0 unless given.

    ``choices`` (names of ``SCORES``) are those the caller offers: another name is refused with a
    ``ValueError`` that lists them (all of ``SCORES`` by default).
    """
    choices = tuple(SCORES) if choices is None else tuple(choices)
    if name not in choices:
        raise ValueError(f"score must be one of {choices}, got {name!r}")
    return SCORES[name](**{"dropout": 0.0, **options})
