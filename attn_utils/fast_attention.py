"""Tiled attention in plain PyTorch: FlashAttention's algorithm, without ever storing the n x n map.

The queries are cut into blocks of ``block_size_q`` rows and the keys and values into blocks of
``block_size_k`` rows. For each query block the key blocks are visited in turn; each gives a partial
result ``(m, l, acc)`` (running maximum, normaliser and unnormalised output) that is merged into the
running one with :func:`attn_utils.merge_attention_blocks` (Rabe and Staats; Dao et al.). At most one
``(block_size_q, block_size_k)`` tile of scores exists at a time. The output is ``acc / l``, and the
log-sum-exp ``m + log l`` of each row is returned too: it is all the backward pass needs to rebuild
any tile of weights.

* ``tiled_attention(..., recompute=False)`` lets autograd differentiate through the loops: it saves
  every tile of weights for backward, so training still stores O(n^2) numbers, only not at once.
* ``tiled_attention(..., recompute=True)`` runs :class:`FlashAttentionFunction`, whose backward
  recomputes each tile from Q, K, V, the output O and the log-sum-exp (FlashAttention's backward):
  it saves O(n d), not O(n^2).

Shapes: queries (..., n_q, d), keys (..., n_k, d), values (..., n_k, d_v) -> output (..., n_q, d_v)
and log-sum-exp (..., n_q). ``valid_lens`` takes the forms of :func:`attn_utils.masked_softmax`
(lengths (batch,), (batch, n_q) or the rows' shape; or a boolean mask broadcastable to the scores,
True = may attend), and ``causal=True`` lets each query see its own position and the earlier ones.

Causal alignment is bottom-right, exactly as :func:`attn_utils.causal_mask`: the queries are taken to
be the *last* n_q of the n_k positions, so query i sees keys 0..i + (n_k - n_q). With n_q = n_k that is
keys 0..i; a one-query decode step (n_q = 1) sees every key. Key blocks wholly after a query block's
last visible key are skipped. With n_q > n_k the first n_q - n_k queries come before every key and see
none (``causal_mask`` gives them an all-False row): like any query with no visible key they get a zero
output and a log-sum-exp of ``-inf``, never NaN.
"""

from __future__ import annotations

import math

import torch

from .checks import check_attention_inputs, check_bool, check_positive_int, checks_read_values, is_finite_number
from .masking import LOW_PRECISION_DTYPES, check_length_values, lengths_as_row_shape, make_mask
from .online_softmax import block_statistics, inverse_or_zero, merge_attention_blocks, safe_shift


def as_lengths_tensor(valid_lens) -> torch.Tensor:
    """``valid_lens`` as a tensor, else ``ValueError`` (``torch.as_tensor``'s error names no argument)."""
    if isinstance(valid_lens, torch.Tensor):
        return valid_lens
    try:
        return torch.as_tensor(valid_lens)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"valid_lens must be None, integer lengths or a boolean mask, got {type(valid_lens).__name__} "
                         f"{valid_lens!r:.60}") from None


def check_attention_scale(scale, what: str):
    """``scale`` as a float, ``None`` for ``1/sqrt(d)``; else ``ValueError``: a NaN or infinite scale gives NaN."""
    if scale is not None and not is_finite_number(scale):
        raise ValueError(f"{what}: scale must be None (1/sqrt(d)) or a finite number, got {type(scale).__name__} "
                         f"{scale!r}")
    return scale


def _block_masker(valid_lens, causal: bool, score_shape: torch.Size, device: torch.device):
    """A function ``(q0, q1, k0, k1) -> bool mask`` broadcastable to the tile (..., q1 - q0, k1 - k0), or None.

    The mask of the whole (n_q, n_k) map is never built: lengths stay lengths, and a boolean mask is
    only sliced.
    """
    lengths = mask = None
    if valid_lens is not None:
        valid_lens = as_lengths_tensor(valid_lens)
        if valid_lens.dtype == torch.bool:
            # a stride-0 stand-in for the scores: make_mask only reads its shape
            mask = make_mask(torch.empty((), device=device).expand(score_shape), valid_lens)
            mask = mask.reshape((1,) * max(0, 2 - mask.dim()) + tuple(mask.shape))  # at least (Q or 1, K or 1)
        else:
            make_mask(torch.empty((), device=device).expand(*score_shape[:-1], 1), valid_lens)  # checks only
            if checks_read_values(valid_lens):
                check_length_values(valid_lens, score_shape[-1])
            lengths = lengths_as_row_shape(valid_lens.to(device), score_shape)  # broadcasts to (..., n_q)
    if lengths is None and mask is None and not causal:
        return None
    offset = score_shape[-1] - score_shape[-2]  # n_k - n_q: query i is position i + offset (causal_mask's rule)

    def masker(q0, q1, k0, k1):
        keep = None
        if mask is not None:  # an axis of size 1 broadcasts, so it is not sliced
            rows = slice(q0, q1) if mask.shape[-2] > 1 else slice(None)
            keep = mask[..., rows, slice(k0, k1) if mask.shape[-1] > 1 else slice(None)]  # (..., bq or 1, bk or 1)
        if lengths is not None:
            rows = lengths[..., q0:q1] if lengths.shape[-1] > 1 else lengths  # (..., bq or 1)
            keep = torch.arange(k0, k1, device=device) < rows.unsqueeze(-1)  # (..., bq or 1, bk)
        if causal:
            below = torch.arange(q0 + offset, q1 + offset, device=device)[:, None] \
                >= torch.arange(k0, k1, device=device)  # (bq, bk): key j <= query i + offset
            keep = below if keep is None else keep & below
        return keep

    return masker


def _prepare(queries, keys, values, valid_lens, causal, scale, block_size_q, block_size_k, what):
    check_attention_inputs(queries, keys, values, same_size=True, what=what)
    if not isinstance(causal, bool):
        raise ValueError(f"{what}: causal must be True or False, got {type(causal).__name__} {causal!r}")
    check_positive_int("block_size_q", block_size_q)
    check_positive_int("block_size_k", block_size_k)
    check_attention_scale(scale, what)
    score_shape = torch.Size((*queries.shape[:-1], keys.shape[-2]))  # (..., n_q, n_k), never allocated
    masker = _block_masker(valid_lens, bool(causal), score_shape, queries.device)
    if scale is None:  # d = 0: every score is 0 (as dot_score has it)
        return masker, 1.0 / math.sqrt(queries.shape[-1]) if queries.shape[-1] else 1.0
    return masker, float(scale)


def tile_schedule(n_q, n_k, block_size_q, block_size_k, causal):
    """Yield ``(q0, q1, [(k0, k1), ...])`` for each block of queries q0..q1 - 1: the key blocks it visits.

    Under ``causal`` the tiles above the (bottom-right aligned) diagonal are left out: those whose first
    key comes after the last key that the block's last query sees, key (q1 - 1) + (n_k - n_q). A block of
    queries that see no key (n_q > n_k) gets no tile at all."""
    offset = n_k - n_q
    for q0 in range(0, n_q, block_size_q):
        q1 = min(q0 + block_size_q, n_q)
        yield q0, q1, [(k0, min(k0 + block_size_k, n_k)) for k0 in range(0, n_k, block_size_k)
                       if not (causal and k0 > q1 - 1 + offset)]


def _scores(q, k, scale, keep):
    """One tile of scores (..., bq, bk), masked entries -inf."""
    s = (q @ k.transpose(-2, -1)) * scale  # (..., bq, d) @ (..., d, bk) -> (..., bq, bk)
    return s if keep is None else s.masked_fill(~keep, float("-inf"))


def _tiled_forward(q, k, v, masker, causal, scale, block_size_q, block_size_k):
    """Output (..., n_q, d_v) and log-sum-exp (..., n_q), one query block and key block at a time."""
    outputs, lses = [], []
    for q0, q1, key_blocks in tile_schedule(q.shape[-2], k.shape[-2], block_size_q, block_size_k, causal):
        qi = q[..., q0:q1, :]  # (..., bq, d)
        m = torch.full(qi.shape[:-1], float("-inf"), dtype=q.dtype, device=q.device)  # (..., bq)
        l = torch.zeros_like(m)
        acc = torch.zeros(*qi.shape[:-1], v.shape[-1], dtype=q.dtype, device=q.device)  # (..., bq, d_v)
        for k0, k1 in key_blocks:
            keep = None if masker is None else masker(q0, q1, k0, k1)
            s = _scores(qi, k[..., k0:k1, :], scale, keep)
            m, l, acc = merge_attention_blocks(m, l, acc, *block_statistics(s, v[..., k0:k1, :]))
        outputs.append(acc * inverse_or_zero(l).unsqueeze(-1))  # a row with l = 0 saw no key: output 0
        lses.append(torch.where(l > 0, m + torch.log(torch.where(l > 0, l, torch.ones_like(l))), float("-inf")))
    if not outputs:  # no query: empty results
        return q.new_zeros(*q.shape[:-1], v.shape[-1]), q.new_zeros(q.shape[:-1])
    return torch.cat(outputs, dim=-2), torch.cat(lses, dim=-1)


class FlashAttentionFunction(torch.autograd.Function):
    """Tiled attention whose backward recomputes every tile, saving only Q, K, V, O and the log-sum-exp.

    Backward (Dao et al., Algorithm 4 of FlashAttention, with the log-sum-exp L of FlashAttention-2):
    for each tile ``P = exp(S - L)``, ``dV += P^T dO``, ``dP = dO V^T``, ``dS = P * (dP - D)`` with
    ``D = rowsum(dO * O)``, ``dQ += scale dS K`` and ``dK += scale dS^T Q``.
    Call through ``tiled_attention(..., recompute=True)``, which checks the inputs.
    """

    @staticmethod
    def forward(ctx, q, k, v, masker, causal, scale, block_size_q, block_size_k):
        with torch.no_grad():
            out, lse = _tiled_forward(q, k, v, masker, causal, scale, block_size_q, block_size_k)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.config = (masker, causal, scale, block_size_q, block_size_k)
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, d_out, _d_lse):
        q, k, v, out, lse = ctx.saved_tensors
        masker, causal, scale, block_size_q, block_size_k = ctx.config
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        D = (d_out * out).sum(dim=-1)  # (..., n_q): rowsum(dO * O)
        shift = safe_shift(lse)  # -inf (no visible key) -> 0, so that P = exp(-inf) = 0 there
        for q0, q1, key_blocks in tile_schedule(q.shape[-2], k.shape[-2], block_size_q, block_size_k, causal):
            qi, doi = q[..., q0:q1, :], d_out[..., q0:q1, :]  # (..., bq, d), (..., bq, d_v)
            for k0, k1 in key_blocks:
                kj, vj = k[..., k0:k1, :], v[..., k0:k1, :]
                keep = None if masker is None else masker(q0, q1, k0, k1)
                p = torch.exp(_scores(qi, kj, scale, keep) - shift[..., q0:q1, None])  # (..., bq, bk): the weights
                dv[..., k0:k1, :] += p.transpose(-2, -1) @ doi  # (..., bk, bq) @ (..., bq, d_v)
                dp = doi @ vj.transpose(-2, -1)  # (..., bq, bk)
                ds = p * (dp - D[..., q0:q1, None])  # the softmax's backward, row by row
                dq[..., q0:q1, :] += scale * (ds @ kj)
                dk[..., k0:k1, :] += scale * (ds.transpose(-2, -1) @ qi)
        return dq, dk, dv, None, None, None, None, None


def tiled_attention(queries, keys, values, valid_lens=None, *, causal: bool = False, scale: float | None = None,
                    block_size_q: int = 64, block_size_k: int = 64, recompute: bool = False):
    """``softmax(scale Q K^T) V`` computed tile by tile; returns ``(output, logsumexp)``.

    Queries, keys and values are floating-point tensors of one dtype (``check_attention_inputs``, with
    ``d_q = d_k``). ``scale`` defaults to ``1/sqrt(d)``, else a finite number. With ``recompute=True`` (a
    bool) the backward pass recomputes the tiles (:class:`FlashAttentionFunction`) instead of saving them.
    Block sizes are positive ints and need not divide the lengths.
    ``causal=True`` is aligned bottom-right like :func:`attn_utils.causal_mask`: query i of n_q sees keys
    j <= i + (n_k - n_q), so one query (a decode step) sees all n_k keys; queries that see no key
    (the first n_q - n_k when n_q > n_k) get zeros and a log-sum-exp of ``-inf``.
    float16/bfloat16 inputs are computed in float32 and the output returned in their dtype.
    """
    masker, scale = _prepare(queries, keys, values, valid_lens, causal, scale, block_size_q, block_size_k,
                             "tiled_attention")
    check_bool("recompute", recompute)
    dtype = queries.dtype
    if dtype in LOW_PRECISION_DTYPES:
        queries, keys, values = queries.float(), keys.float(), values.float()
    config = (masker, bool(causal), scale, block_size_q, block_size_k)
    if recompute:
        out, lse = FlashAttentionFunction.apply(queries, keys, values, *config)
    else:
        out, lse = _tiled_forward(queries, keys, values, *config)
    return out.to(dtype), lse
