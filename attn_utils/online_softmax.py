"""The online softmax: a softmax computed block by block, with a running maximum and normaliser.

``softmax(x)_j = exp(x_j - m) / l`` with ``m = max_j x_j`` and ``l = sum_j exp(x_j - m)``. Milakov and
Gimelshein's observation is that ``m`` and ``l`` can be updated one block of ``x`` at a time: when a
block raises the maximum from ``m`` to ``m'``, the normaliser summed so far is rescaled by
``exp(m - m')``. The same rescaling merges two partial attention results (one per block of keys),
which is all that tiled attention (``attn_utils.fast_attention``) needs.

Conventions follow :func:`attn_utils.masked_softmax`: masked keys and keys scored ``-inf`` get weight
zero, and a row with no visible key gets all-zero weights (and a zero attention output), never NaN.
"""

from __future__ import annotations

import torch

from .checks import check_positive_int
from .masking import make_mask


def safe_shift(m: torch.Tensor) -> torch.Tensor:
    """The running maximum with ``-inf`` (a row that has seen no visible key yet) replaced by 0.

    ``exp(x - safe_shift(m))`` is then 0 for ``x = -inf`` instead of ``exp(-inf + inf) = NaN``.
    """
    return torch.where(m == float("-inf"), torch.zeros_like(m), m)


def inverse_or_zero(l: torch.Tensor) -> torch.Tensor:
    """``1 / l`` where ``l > 0`` and 0 where ``l = 0`` (a row with no visible key), with finite gradients."""
    positive = l > 0
    return torch.where(positive, 1 / torch.where(positive, l, torch.ones_like(l)), torch.zeros_like(l))


def merge_attention_blocks(m1, l1, acc1, m2, l2, acc2):
    """Merge two partial results ``(m, l, acc)`` of attention over disjoint sets of keys into one.

    For one set of keys with scores ``s`` and values ``v``: ``m = max s`` (..., Q), ``l = sum exp(s - m)``
    (..., Q) and ``acc = sum exp(s - m) v`` (..., Q, d_v), the output before its division by ``l``.
    ``acc`` may be ``None`` (a softmax without values). A set with no visible key has ``m = -inf``,
    ``l = 0`` and ``acc = 0``. Returns ``(m, l, acc)`` of the union; the attention output is ``acc / l``.
    The ``m`` and ``l`` of both parts are tensors of one shape, and both ``acc`` that shape plus ``d_v`` (or
    both ``None``).
    """
    def described(t):
        return tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__

    for name, t in (("m1", m1), ("l1", l1), ("m2", m2), ("l2", l2)):
        if not isinstance(t, torch.Tensor) or t.shape != getattr(m1, "shape", None):
            raise ValueError(f"m1, l1, m2 and l2 must be tensors of one shape (..., Q), got {name} {described(t)} "
                             f"beside m1 {described(m1)}")
    if (acc1 is None) != (acc2 is None) or (acc1 is not None and (
            not isinstance(acc1, torch.Tensor) or not isinstance(acc2, torch.Tensor) or acc1.shape != acc2.shape
            or acc1.shape[:-1] != m1.shape)):
        raise ValueError(f"acc1 and acc2 must both be None or tensors {tuple(m1.shape)} + (d_v,) of one shape, got "
                         f"{getattr(acc1, 'shape', acc1)} and {getattr(acc2, 'shape', acc2)}")
    m = torch.maximum(m1, m2)  # (..., Q)
    shift = safe_shift(m)
    a1, a2 = torch.exp(m1 - shift), torch.exp(m2 - shift)  # rescale each part to the common maximum
    l = a1 * l1 + a2 * l2
    acc = None if acc1 is None else a1.unsqueeze(-1) * acc1 + a2.unsqueeze(-1) * acc2  # (..., Q, d_v)
    return m, l, acc


def block_statistics(scores: torch.Tensor, values: torch.Tensor | None = None):
    """``(m, l, acc)`` of one block of scores (..., Q, K), masked entries already set to ``-inf``.

    The maximum is detached: the result ``acc / l`` (and ``m + log l``) does not depend on it, so its
    gradient would only add terms that cancel.
    """
    with torch.no_grad():  # (no autograd node, which would save the whole tile for nothing)
        m = scores.amax(dim=-1)  # (..., Q)
    p = torch.exp(scores - safe_shift(m).unsqueeze(-1))  # (..., Q, K), 0 where the score is -inf
    acc = None if values is None else p @ values  # (..., Q, K) @ (..., K, d_v) -> (..., Q, d_v)
    return m, p.sum(dim=-1), acc


def online_softmax(X: torch.Tensor, valid_lens=None, block_size: int = 128) -> torch.Tensor:
    """Softmax over the last axis of ``X``, reading it in blocks of ``block_size`` columns.

    A first pass keeps the running maximum ``m`` and normaliser ``l`` per row, rescaling ``l`` by
    ``exp(m_old - m_new)`` whenever a block raises the maximum; a second pass writes
    ``exp(x - m) / l``. Equal to :func:`attn_utils.masked_softmax` (and to ``torch.softmax`` when
    nothing is masked); ``valid_lens`` takes the same forms. Safe for huge logits, ``-inf`` and fully
    masked rows (zero weights).
    """
    if not isinstance(X, torch.Tensor) or not X.is_floating_point() or X.dim() == 0:
        raise ValueError(f"online_softmax expects floating-point scores with a keys axis, got {X!r:.80}")
    check_positive_int("block_size", block_size)
    mask = make_mask(X, valid_lens)  # None or bool broadcastable to X
    if mask is not None:
        X = X.masked_fill(~mask, float("-inf"))
    n = X.shape[-1]
    m = torch.full(X.shape[:-1], float("-inf"), dtype=X.dtype, device=X.device)  # (...,): running maximum
    l = torch.zeros_like(m)  # running normaliser
    for start in range(0, n, block_size):  # pass 1: statistics, one block of columns at a time
        m, l, _ = merge_attention_blocks(m, l, None, *block_statistics(X[..., start:start + block_size]))
    shift, scale = safe_shift(m).unsqueeze(-1), inverse_or_zero(l).unsqueeze(-1)
    blocks = [torch.exp(X[..., s:s + block_size] - shift) * scale for s in range(0, n, block_size)]  # pass 2
    return torch.cat(blocks, dim=-1) if blocks else torch.zeros_like(X)
