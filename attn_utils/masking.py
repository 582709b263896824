"""Masks and the masked softmax at the heart of every attention layer.

A mask says which keys a query may look at. It can be given two ways, both accepted wherever
the course takes ``valid_lens``:

* **valid lengths** (d2l's convention): an integer tensor; the first ``valid_len`` keys are real
  and the rest are padding. Shape ``(batch,)`` (one length per sequence, used by every query) or
  ``(batch, queries)`` (one length per query), or exactly ``X.shape[:-1]``.
* **a boolean mask** broadcastable to the scores, ``True`` where a query may attend;
  ``causal_mask`` builds the one that lets each position see only itself and those before it.

Unlike d2l's version (which fills masked scores with -1e6 and so spreads a fully masked row
uniformly over padding), a row with no visible key gets weights that are exactly zero.

Non-finite scores follow one rule (the attention layers follow it on every path):

* masked scores never matter, whatever they hold (NaN, +inf, -inf);
* fully masked rows, and -inf scores (which count as masked), never produce NaN, nor does float16;
* a NaN or +inf score that a query can see makes that query's whole row NaN. A +inf score is not
  read as "this key takes all the weight": it usually means an overflow or a corrupt input, and a
  NaN row says so instead of hiding it.
"""

from __future__ import annotations

import torch

from .checks import check_non_negative_int, check_positive_int, check_query_count, checks_read_values

#: dtypes whose softmax is computed in float32 (and returned in their own dtype)
LOW_PRECISION_DTYPES = (torch.float16, torch.bfloat16)
_INTEGER_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def _describe(t) -> str:
    if isinstance(t, torch.Tensor):
        return f"a {t.dtype} tensor of shape {tuple(t.shape)}"
    return f"{type(t).__name__} {t!r}"


def lengths_to_mask(valid_lens: torch.Tensor, num_keys: int) -> torch.Tensor:
    """Boolean mask ``(*valid_lens.shape, num_keys)``: True for the first ``valid_len`` positions."""
    positions = torch.arange(num_keys, device=valid_lens.device)
    return positions < valid_lens.unsqueeze(-1)


def lengths_as_row_shape(valid_lens: torch.Tensor, score_shape: torch.Size) -> torch.Tensor:
    """Reshape valid lengths so they broadcast against the rows ``score_shape[:-1]`` of the scores.

    Raises ``ValueError`` naming both shapes when the lengths fit none of the accepted forms.
    """
    rows = score_shape[:-1]
    if valid_lens.shape == rows:
        return valid_lens
    batch = score_shape[0]
    if valid_lens.dim() == 1 and valid_lens.shape[0] == batch:
        # (batch,) -> (batch, 1, ..., 1): every query (and head) of a sequence shares its length
        return valid_lens.reshape(batch, *([1] * (len(rows) - 1)))
    if len(score_shape) >= 4 and valid_lens.dim() == 2 and valid_lens.shape == (batch, score_shape[-2]):
        # (batch, queries) with scores (batch, heads..., queries, keys): shared across heads
        return valid_lens.reshape(batch, *([1] * (len(rows) - 2)), score_shape[-2])
    expected = f"({batch},) or {tuple(rows)}"
    if len(score_shape) >= 4:
        expected += f" or ({batch}, {score_shape[-2]})"
    raise ValueError(
        f"valid_lens has shape {tuple(valid_lens.shape)}, which does not fit scores of shape "
        f"{tuple(score_shape)}: expected {expected}"
    )


def make_mask(scores: torch.Tensor, valid_lens: torch.Tensor | None, *, within_keys: bool = False
              ) -> torch.Tensor | None:
    """Turn ``valid_lens`` (lengths or a boolean mask) into a boolean mask broadcastable to ``scores``.

    Returns ``None`` when nothing is masked. Raises ``ValueError`` naming both shapes when the
    lengths or mask cannot apply to ``scores``; when lengths are negative or not whole numbers; and with
    ``within_keys=True`` (what the attention layers and ``masked_softmax`` ask for) when a length
    exceeds the number of keys. The default keeps the old reading of such lengths, "all keys", for
    callers that pass a stand-in of other width (``tiled_attention`` checks the shapes with one key
    column, then calls :func:`check_length_values` itself). The checks of the lengths' values run as
    ``checks_read_values`` says: on CPU lengths always, on an accelerator's only under
    ``strict_checks()``.
    """
    if valid_lens is None:
        return None
    if not isinstance(valid_lens, torch.Tensor):
        try:
            valid_lens = torch.as_tensor(valid_lens)
        except (TypeError, ValueError, RuntimeError):
            raise ValueError(
                f"valid_lens must be None, integer lengths or a boolean mask, got {_describe(valid_lens)}"
            ) from None
    if valid_lens.dtype == torch.bool:
        valid_lens = valid_lens.to(scores.device)
        try:
            shape = torch.broadcast_shapes(valid_lens.shape, scores.shape)
        except RuntimeError:
            shape = None
        if shape != scores.shape:  # a larger mask would silently enlarge the output
            raise ValueError(
                f"boolean mask of shape {tuple(valid_lens.shape)} does not broadcast to scores of "
                f"shape {tuple(scores.shape)}"
            )
        return valid_lens
    if not valid_lens.is_floating_point() and valid_lens.dtype not in _INTEGER_DTYPES:
        raise ValueError(f"valid_lens must be an integer or boolean tensor, got {_describe(valid_lens)}")
    if scores.dim() < 2:
        raise ValueError(
            f"scores must have at least 2 dimensions (queries..., keys) to apply valid_lens, got "
            f"shape {tuple(scores.shape)}"
        )
    if checks_read_values(valid_lens):  # on the CPU, before the lengths move; on a GPU only when strict
        check_length_values(valid_lens, scores.shape[-1] if within_keys else None)
    lengths = lengths_as_row_shape(valid_lens.to(scores.device), scores.shape)
    return lengths_to_mask(lengths, scores.shape[-1])


def check_length_values(valid_lens: torch.Tensor, num_keys: int | None = None, name: str = "valid_lens") -> None:
    """Refuse lengths that are not whole numbers (float lengths, NaN), negative, or (given ``num_keys``)
    beyond the number of keys (or inf): a caller's mistake, e.g. lengths of another batch, rather than
    a request for "no key" or "all keys". Reads the values: callers ask ``checks_read_values`` first."""
    if not valid_lens.numel():
        return
    if valid_lens.is_floating_point() and not torch.equal(valid_lens, valid_lens.round()):  # NaN fails this too
        raise ValueError(f"{name} must hold whole numbers, got {valid_lens.tolist()}")
    if bool((valid_lens < 0).any()):
        raise ValueError(f"{name} must be >= 0, got {valid_lens.tolist()}")
    if num_keys is not None and bool((valid_lens > num_keys).any()):
        raise ValueError(f"{name} must be at most the number of keys, {num_keys}, got {valid_lens.tolist()}")


def masked_softmax(X: torch.Tensor, valid_lens: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over the last axis of ``X`` that gives masked keys exactly zero weight.

    ``X`` holds scores, e.g. ``(batch, queries, keys)``. ``valid_lens`` is ``None``, valid lengths
    of shape ``(batch,)`` or ``(batch, queries)`` (or ``X.shape[:-1]``, at most the number of keys),
    or a boolean mask that broadcasts to ``X`` (``True`` = may attend). Rows whose keys are all
    masked (or all ``-inf``) get all-zero weights, never NaN. Masked scores are ignored even when
    they are NaN or +inf; a visible NaN or +inf score makes its whole row NaN (see the module
    docstring). float16/bfloat16 inputs are computed in float32 and returned in their own dtype.
    """
    return masked_softmax_visible(X, valid_lens)[0]


def masked_softmax_visible(X: torch.Tensor, valid_lens=None) -> tuple[torch.Tensor, torch.Tensor]:
    """``masked_softmax(X, valid_lens)`` and the boolean ``visible`` (shape of ``X``): the keys each
    query may use (unmasked and not -inf). The attention layers need it to keep masked values out."""
    if not isinstance(X, torch.Tensor):
        raise ValueError(f"masked_softmax expects a tensor of scores, got {_describe(X)}")
    if not X.is_floating_point():
        raise ValueError(f"masked_softmax expects floating-point scores, got {_describe(X)}")
    if X.dim() == 0:
        raise ValueError("masked_softmax expects scores with a keys axis, got a 0-d tensor")
    mask = make_mask(X, valid_lens, within_keys=True)
    # Scores of -inf count as masked too, so a row of -inf gives zeros rather than 0/0 = NaN.
    visible = X.ne(float("-inf"))
    visible = visible if mask is None else visible & mask
    # Masked scores are filled with the most negative finite number rather than -inf: a fully
    # masked row then has a finite (uniform) softmax, with finite gradients, before it is zeroed.
    filled = X.masked_fill(~visible, torch.finfo(X.dtype).min)
    weights = torch.softmax(filled, dim=-1, dtype=torch.float32 if X.dtype in LOW_PRECISION_DTYPES else None)
    return weights.masked_fill(~visible, 0.0).to(X.dtype), visible


def sequence_mask(X: torch.Tensor, valid_len: torch.Tensor, value: float = 0.0) -> torch.Tensor:
    """d2l's ``sequence_mask``: a copy of ``X`` (batch, steps, ...) with steps past ``valid_len`` set to ``value``.

    Lengths beyond ``steps`` keep every step, as d2l's do; negative, fractional or NaN lengths are refused
    (where ``checks_read_values`` says)."""
    if not isinstance(X, torch.Tensor) or X.dim() < 2 or not isinstance(valid_len, torch.Tensor):
        raise ValueError(f"sequence_mask takes a tensor X (batch, steps, ...) and a tensor valid_len (batch,), got "
                         f"X {_describe(X)} and valid_len {_describe(valid_len)}")
    if valid_len.dim() != 1 or valid_len.shape[0] != X.shape[0]:
        raise ValueError(
            f"valid_len must have shape ({X.shape[0]},) to match X of shape {tuple(X.shape)}, got "
            f"{tuple(valid_len.shape)}"
        )
    if valid_len.dtype == torch.bool or valid_len.is_complex():
        raise ValueError(f"valid_len must hold lengths (integers), got {_describe(valid_len)}")
    if checks_read_values(valid_len):
        check_length_values(valid_len, name="valid_len")
    mask = lengths_to_mask(valid_len.to(X.device), X.shape[1])  # (batch, steps)
    mask = mask.reshape(*mask.shape, *([1] * (X.dim() - 2)))
    return X.masked_fill(~mask, value)


def causal_mask(num_queries: int, num_keys: int, device=None) -> torch.Tensor:
    """Boolean ``(num_queries, num_keys)``, True where query i may attend: keys up to its own
    position, when the queries are the last ``num_queries`` of the ``num_keys`` positions. With more
    queries than keys the first ``num_queries - num_keys`` rows see no key (the attention layers give
    such queries a zero output)."""
    check_non_negative_int("num_queries", num_queries)
    check_non_negative_int("num_keys", num_keys)
    offset = num_keys - num_queries
    queries = torch.arange(num_queries, device=device).unsqueeze(1) + offset
    return torch.arange(num_keys, device=device).unsqueeze(0) <= queries


def with_causal(scores: torch.Tensor, valid_lens=None) -> torch.Tensor | None:
    """``valid_lens`` (any form ``make_mask`` takes) and causal masking aligned bottom-right (``causal_mask``)
    as one boolean mask broadcastable to ``scores`` (..., Q, K), True where a query may look; ``None`` when
    nothing is masked (a single query, the last position, sees every key). ``scores`` may be a stand-in
    that only gives the shape and device."""
    mask = make_mask(scores, valid_lens, within_keys=True)
    num_queries, num_keys = scores.shape[-2], scores.shape[-1]
    if num_queries == 1 and num_keys >= 1:
        return mask
    causal = causal_mask(num_queries, num_keys, scores.device)  # (Q, K)
    return causal if mask is None else mask & causal


def sliding_window_mask(num_queries: int, num_keys: int, window: int, device=None) -> torch.Tensor:
    """Boolean ``(num_queries, num_keys)``, True where the key is among the last ``window`` positions up
    to and including the query's own, the queries being the last ``num_queries`` of the ``num_keys``
    positions (as in ``causal_mask``): sliding-window attention (Beltagy et al., 2020). With ``window
    >= num_keys`` it equals ``causal_mask``. More queries than keys are refused, as by ``alibi_bias``: the
    first ones would see no key at all."""
    check_query_count(num_queries, num_keys)
    check_positive_int("window", window)
    queries = torch.arange(num_queries, device=device).unsqueeze(1) + num_keys - num_queries
    keys = torch.arange(num_keys, device=device).unsqueeze(0)
    return (keys <= queries) & (keys > queries - window)
