"""FlashAttention-2 in Triton: the tiled algorithm of :mod:`attn_utils.fast_attention` as GPU kernels.

``tiled_attention`` walks the tiles in Python, one small matrix product at a time. Here each tile
loop runs *inside* a kernel: a Triton program owns one block of rows, keeps its running maximum,
normaliser and output in registers, and reads the tiles it needs from memory once. Four kernels,
after Dao's FlashAttention-2 (2023):

* ``_forward_kernel`` — one program per (block of ``BLOCK_M`` queries, batch x query head), a 2-D grid.
  It loads its queries once and walks the key blocks (``_forward_tile``, one per step), merging each
  into ``(m, l, acc)`` with the online softmax (in base 2: ``exp2`` with log2(e) folded into the
  scale). It writes the output ``acc / l`` and the log-sum-exp ``L = m + log l`` of every row, and
  nothing else: no score, no weight.
* ``_preprocess_kernel`` — the first step of backward: ``D = rowsum(dO * O)`` per query row, the term
  the softmax's backward subtracts (``dS = P * (dP - D)``).
* ``_dkdv_kernel`` — one program per (block of ``BLOCK_N`` keys, batch x query head). It keeps its
  keys, values and the accumulators ``dK``, ``dV`` in registers and walks the query blocks that see
  it, rebuilding each tile of weights ``P = exp(S - L)`` from Q, K and the saved L.
* ``_dq_kernel`` — one program per block of queries: it walks the key blocks, as the forward does,
  and accumulates ``dQ``.

What is saved for backward is Q, K, V, O and L: O(n d) numbers, never the n x n weights. Backward
computes the scores twice (once for dK/dV, once for dQ) rather than share them, and that is why it
needs **no atomics**: every program writes only its own rows. Had one kernel computed dK, dV and dQ,
the programs of different key blocks would all add into the same rows of dQ, which takes atomic
additions in float32, whose order (and so whose last bits) changes from run to run.

**Masks.** Every mask this module takes keeps a *prefix* of the keys: query row i sees keys
``0 .. visible_i - 1``, where ``visible_i`` is the smallest of the number of keys, the row's valid
length, and under ``causal`` its position ``i + (n_k - n_q) + 1`` (bottom-right, as
:func:`attn_utils.causal_mask`). ``_visible_keys`` computes it. A block of queries therefore first
meets key blocks that *all* its rows see whole (no mask needed), then blocks at the edge (masked), then
blocks that none sees (skipped). A row that sees no key gets output 0, ``L = -inf`` and zero
gradients: its running maximum stays ``-inf``, which the kernels replace by 0 before subtracting it,
so each of its weights is ``exp2(-inf) = 0`` and its normaliser 0, which is never divided by. Boolean
masks of other shapes stay with :func:`attn_utils.tiled_attention`.

**Grouped-query attention.** Keys and values may have fewer heads than queries (``heads_q`` a
multiple of ``heads_kv``): query head h reads key/value head ``h // (heads_q // heads_kv)`` by
pointer arithmetic, without copying K and V. Backward then needs dK and dV summed over the query
heads of each group. ``_dkdv_kernel`` runs per *query* head and writes one dK, dV per query head into
a float32 buffer (batch, heads_q, n_k, d), which torch sums over each group: that keeps as many
programs as without groups (a loop over the group inside the kernel would leave the GPU with
``heads_q / heads_kv`` times fewer programs, too few at batch 1), costs ``heads_q / heads_kv`` times the
memory of dK and dV, and is what FlashAttention-2's own code does.

**Where it runs.** On a CUDA GPU the kernels are compiled. Every product accumulates in float32;
float32 inputs are multiplied as true float32 (``input_precision="ieee"``, the kernels' ``PRECISION``),
not rounded to TF32. On the CPU the kernels run through Triton's interpreter, one program at a time
(slow: for tests and for reading), which needs ``TRITON_INTERPRET=1`` in the environment before Triton
is first imported (:func:`set_interpreter_if_needed`); bfloat16 is refused there, as the interpreter
computes it wrongly. Triton is imported only when a kernel first runs: the package imports without it.

The kernels are written as plain functions marked ``@_kernel``; the first call wraps each with
``triton.jit`` (:func:`compile_kernels`). Addresses are plain pointer arithmetic with masks and
strides (no block pointers, no tensor descriptors), which every Triton 3 release compiles alike.

Shapes: queries (batch, heads_q, n_q, d), keys and values (batch, heads_kv, n_k, d), or all three
(batch, n, d) for one head; any ``d`` from 1 to 128 (the kernels pad it to a power of two with masked
columns). Returns ``(output, logsumexp)`` like :func:`attn_utils.tiled_attention`: output in the
inputs' dtype, log-sum-exp in float32.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
import types

import torch

from .checks import check_positive_int, checks_read_values
from .fast_attention import as_lengths_tensor, check_attention_scale
from .masking import check_length_values, lengths_as_row_shape, make_mask

#: the largest head size ``d`` the kernels take (a block of queries and its output stay in registers)
MAX_HEAD_DIM = 128
#: the environment variable that makes Triton interpret kernels on the CPU
INTERPRET_ENV_VAR = "TRITON_INTERPRET"
LOG2E = 1.4426950408889634  # log2(e): exp(x) = exp2(x * log2(e))

_KERNEL_NAMES: list[str] = []
tl = None  # triton.language, which the kernels use: bound by compile_kernels() before they are jitted


def _kernel(fn):
    """Mark ``fn`` as a Triton kernel (or a function kernels call); :func:`compile_kernels` jits it."""
    _KERNEL_NAMES.append(fn.__name__)
    return fn


# ----------------------------------------------------------------------------------------------
# The kernels. Shapes in comments: BM = BLOCK_M query rows, BN = BLOCK_N key rows, BD = BLOCK_D >= d
# feature columns (the columns past d are loaded as 0). S, P are in base 2: S2 = S * log2(e).
# ----------------------------------------------------------------------------------------------

@_kernel
def _visible_keys(LENS, lens_offset, stride_lm, offs_m, n_q, n_k,
                  HAS_LENS: tl.constexpr, CAUSAL: tl.constexpr):
    """(BM,) how many keys each query row sees: keys 0 .. visible - 1. Rows past n_q see none."""
    visible = offs_m * 0 + n_k
    if HAS_LENS:
        visible = tl.minimum(visible, tl.load(LENS + lens_offset + offs_m * stride_lm, mask=offs_m < n_q, other=0))
    if CAUSAL:  # query i is position i + (n_k - n_q) and sees the keys up to it
        visible = tl.minimum(visible, offs_m + (n_k - n_q) + 1)
    return tl.where(offs_m < n_q, tl.maximum(visible, 0), 0)


@_kernel
def _forward_tile(q, m_i, l_i, acc, K, V, stride_kn, stride_kd, stride_vn, stride_vd, start_n, visible, offs_d,
                  n_k, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr,
                  PRECISION: tl.constexpr):
    """Merge key block start_n .. start_n + BN into the running (m_i, l_i, acc) of a block of queries."""
    offs_n = start_n + tl.arange(0, BLOCK_N)
    kT = tl.load(K + offs_d[:, None] * stride_kd + offs_n[None, :] * stride_kn,  # (BD, BN)
                 mask=(offs_d[:, None] < HEAD_DIM) & (offs_n[None, :] < n_k), other=0.0)
    v = tl.load(V + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd,  # (BN, BD)
                mask=(offs_n[:, None] < n_k) & (offs_d[None, :] < HEAD_DIM), other=0.0)
    s = tl.dot(q, kT, input_precision=PRECISION) * qk_scale  # (BM, BN) scores, base 2
    if MASKED:  # the edge of the visible keys: row i keeps keys j < visible_i
        s = tl.where(offs_n[None, :] < visible[:, None], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))  # (BM,) running maximum
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no key yet: no shift (never -inf - -inf)
    p = tl.exp2(s - m_safe[:, None])  # (BM, BN) unnormalised weights
    alpha = tl.exp2(m_i - m_safe)  # (BM,) rescales what was summed under the old maximum
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=PRECISION)  # (BM, BD) += P V
    return m_new, l_i, acc


@_kernel
def _forward_kernel(Q, K, V, O, LSE, LENS,
                    stride_qb, stride_qh, stride_qm, stride_qd, stride_kb, stride_kh, stride_kn, stride_kd,
                    stride_vb, stride_vh, stride_vn, stride_vd, stride_ob, stride_oh, stride_om, stride_od,
                    stride_lb, stride_lh, stride_lm, heads, group, n_q, n_k, qk_scale,
                    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                    CAUSAL: tl.constexpr, HAS_LENS: tl.constexpr, PRECISION: tl.constexpr):
    """O = softmax(scale Q K^T) V and LSE for one block of queries of one (sequence, head)."""
    start_m = tl.program_id(0) * BLOCK_M
    b, h = tl.program_id(1) // heads, tl.program_id(1) % heads
    kv_h = h // group  # grouped-query attention: the key/value head this query head reads
    Q += b.to(tl.int64) * stride_qb + h * stride_qh
    K += b.to(tl.int64) * stride_kb + kv_h * stride_kh
    V += b.to(tl.int64) * stride_vb + kv_h * stride_vh
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    q = tl.load(Q + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd,  # (BM, BD), read once
                mask=(offs_m[:, None] < n_q) & (offs_d[None, :] < HEAD_DIM), other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)  # running maximum of each row
    l_i = tl.zeros([BLOCK_M], tl.float32)  # running normaliser
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)  # running unnormalised output

    visible = _visible_keys(LENS, b * stride_lb + h * stride_lh, stride_lm, offs_m, n_q, n_k, HAS_LENS, CAUSAL)
    end = tl.max(visible)  # keys past the last one any row sees are never read
    whole = tl.min(tl.where(offs_m < n_q, visible, n_k)) // BLOCK_N * BLOCK_N  # blocks every row sees whole
    for start_n in range(0, whole, BLOCK_N):
        m_i, l_i, acc = _forward_tile(q, m_i, l_i, acc, K, V, stride_kn, stride_kd, stride_vn, stride_vd,
                                      start_n, visible, offs_d, n_k, qk_scale, HEAD_DIM, BLOCK_N, False, PRECISION)
    for start_n in range(whole, end, BLOCK_N):
        m_i, l_i, acc = _forward_tile(q, m_i, l_i, acc, K, V, stride_kn, stride_kd, stride_vn, stride_vd,
                                      start_n, visible, offs_d, n_k, qk_scale, HEAD_DIM, BLOCK_N, True, PRECISION)

    l_safe = tl.where(l_i == 0.0, 1.0, l_i)  # l = 0: the row saw no key, its acc is 0 and so its output
    out = acc / l_safe[:, None]
    lse = tl.where(l_i == 0.0, float("-inf"), (m_i + tl.log2(l_safe)) * 0.6931471805599453)  # x ln 2: natural log
    O += b.to(tl.int64) * stride_ob + h * stride_oh
    tl.store(O + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od, out.to(O.dtype.element_ty),
             mask=(offs_m[:, None] < n_q) & (offs_d[None, :] < HEAD_DIM))
    tl.store(LSE + tl.program_id(1).to(tl.int64) * n_q + offs_m, lse, mask=offs_m < n_q)


@_kernel
def _preprocess_kernel(O, DO, DELTA, stride_ob, stride_oh, stride_om, stride_od,
                       stride_dob, stride_doh, stride_dom, stride_dod, heads, n_q,
                       HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    """DELTA = rowsum(dO * O), (BM,) per program, in float32."""
    b, h = tl.program_id(1) // heads, tl.program_id(1) % heads
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    mask = (offs_m[:, None] < n_q) & (offs_d[None, :] < HEAD_DIM)
    o = tl.load(O + b.to(tl.int64) * stride_ob + h * stride_oh + offs_m[:, None] * stride_om
                + offs_d[None, :] * stride_od, mask=mask, other=0.0)
    do = tl.load(DO + b.to(tl.int64) * stride_dob + h * stride_doh + offs_m[:, None] * stride_dom
                 + offs_d[None, :] * stride_dod, mask=mask, other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    tl.store(DELTA + tl.program_id(1).to(tl.int64) * n_q + offs_m, delta, mask=offs_m < n_q)


@_kernel
def _dkdv_tile(k, v, dk, dv, Q, DO, LSE, DELTA, LENS, lens_offset, stride_lm, stride_qm, stride_qd,
               stride_dom, stride_dod, start_m, offs_n, offs_d, n_q, n_k, qk_scale,
               HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, CAUSAL: tl.constexpr, HAS_LENS: tl.constexpr,
               MASKED: tl.constexpr, PRECISION: tl.constexpr):
    """Add one block of queries' share to dK, dV (BN, BD) of a block of keys. Tiles are transposed: (BN, BM)."""
    offs_m = start_m + tl.arange(0, BLOCK_M)
    qT = tl.load(Q + offs_d[:, None] * stride_qd + offs_m[None, :] * stride_qm,  # (BD, BM)
                 mask=(offs_d[:, None] < HEAD_DIM) & (offs_m[None, :] < n_q), other=0.0)
    do = tl.load(DO + offs_m[:, None] * stride_dom + offs_d[None, :] * stride_dod,  # (BM, BD); 0 past n_q
                 mask=(offs_m[:, None] < n_q) & (offs_d[None, :] < HEAD_DIM), other=0.0)
    lse = tl.load(LSE + offs_m, mask=offs_m < n_q, other=0.0) * 1.4426950408889634  # (BM,) base 2
    lse = tl.where(lse == float("-inf"), 0.0, lse)  # a row that sees no key: its masked P is exp2(-inf) = 0
    delta = tl.load(DELTA + offs_m, mask=offs_m < n_q, other=0.0)  # (BM,)
    sT = tl.dot(k, qT, input_precision=PRECISION) * qk_scale  # (BN, BM) = (Q K^T)^T, base 2
    if MASKED:
        visible = _visible_keys(LENS, lens_offset, stride_lm, offs_m, n_q, n_k, HAS_LENS, CAUSAL)
        sT = tl.where(offs_n[:, None] < visible[None, :], sT, float("-inf"))
    pT = tl.exp2(sT - lse[None, :])  # (BN, BM) the weights P^T, rebuilt from the saved log-sum-exp
    dv += tl.dot(pT.to(do.dtype), do, input_precision=PRECISION)  # (BN, BD) += P^T dO
    dpT = tl.dot(v, tl.trans(do), input_precision=PRECISION)  # (BN, BM) = (dO V^T)^T
    dsT = pT * (dpT - delta[None, :])  # (BN, BM) the softmax's backward
    dk += tl.dot(dsT.to(qT.dtype), tl.trans(qT), input_precision=PRECISION)  # (BN, BD) += dS^T Q
    return dk, dv


@_kernel
def _dkdv_kernel(Q, K, V, DO, LSE, DELTA, DK, DV, LENS,
                 stride_qb, stride_qh, stride_qm, stride_qd, stride_kb, stride_kh, stride_kn, stride_kd,
                 stride_vb, stride_vh, stride_vn, stride_vd, stride_dob, stride_doh, stride_dom, stride_dod,
                 stride_dkb, stride_dkh, stride_dkn, stride_dkd, stride_lb, stride_lh, stride_lm,
                 heads, group, n_q, n_k, qk_scale, scale,
                 HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                 CAUSAL: tl.constexpr, HAS_LENS: tl.constexpr, ROW_LENS: tl.constexpr,
                 PRECISION: tl.constexpr):
    """dK, dV of one block of keys, for one query head (DK, DV: (batch, heads_q, n_k, d))."""
    start_n = tl.program_id(0) * BLOCK_N
    b, h = tl.program_id(1) // heads, tl.program_id(1) % heads
    kv_h = h // group
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    kv_mask = (offs_n[:, None] < n_k) & (offs_d[None, :] < HEAD_DIM)
    k = tl.load(K + b.to(tl.int64) * stride_kb + kv_h * stride_kh + offs_n[:, None] * stride_kn
                + offs_d[None, :] * stride_kd, mask=kv_mask, other=0.0)  # (BN, BD), read once
    v = tl.load(V + b.to(tl.int64) * stride_vb + kv_h * stride_vh + offs_n[:, None] * stride_vn
                + offs_d[None, :] * stride_vd, mask=kv_mask, other=0.0)
    dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    Q += b.to(tl.int64) * stride_qb + h * stride_qh
    DO += b.to(tl.int64) * stride_dob + h * stride_doh
    LSE += tl.program_id(1).to(tl.int64) * n_q
    DELTA += tl.program_id(1).to(tl.int64) * n_q
    lens_offset = b * stride_lb + h * stride_lh

    # Which query rows see this key block: from `first` on some do, from `whole` on all see it whole.
    if ROW_LENS:  # a length per query: no order to use, every block is masked
        first = 0
        whole = n_q
    else:
        last = n_k  # the number of keys every row of this (sequence, head) sees at most
        if HAS_LENS:
            last = tl.minimum(tl.load(LENS + lens_offset), n_k)
        first = 0
        whole = 0
        if CAUSAL:  # query i sees key j when i >= j - (n_k - n_q)
            first = tl.maximum(start_n - (n_k - n_q), 0)
            whole = tl.maximum(start_n + BLOCK_N - 1 - (n_k - n_q), 0)
        first = tl.where(start_n < last, first, n_q)  # no row sees a block past the last visible key
        whole = tl.where(start_n + BLOCK_N <= last, whole, n_q)  # nor all of one that crosses it
    first = first // BLOCK_M * BLOCK_M
    whole = tl.maximum((whole + BLOCK_M - 1) // BLOCK_M * BLOCK_M, first)
    for start_m in range(first, whole, BLOCK_M):
        dk, dv = _dkdv_tile(k, v, dk, dv, Q, DO, LSE, DELTA, LENS, lens_offset, stride_lm, stride_qm, stride_qd,
                            stride_dom, stride_dod, start_m, offs_n, offs_d, n_q, n_k, qk_scale,
                            HEAD_DIM, BLOCK_M, CAUSAL, HAS_LENS, True, PRECISION)
    for start_m in range(whole, n_q, BLOCK_M):
        dk, dv = _dkdv_tile(k, v, dk, dv, Q, DO, LSE, DELTA, LENS, lens_offset, stride_lm, stride_qm, stride_qd,
                            stride_dom, stride_dod, start_m, offs_n, offs_d, n_q, n_k, qk_scale,
                            HEAD_DIM, BLOCK_M, CAUSAL, HAS_LENS, False, PRECISION)

    out = b.to(tl.int64) * stride_dkb + h * stride_dkh + offs_n[:, None] * stride_dkn + offs_d[None, :] * stride_dkd
    tl.store(DK + out, (dk * scale).to(DK.dtype.element_ty), mask=kv_mask)  # dS was taken w.r.t. scale * S
    tl.store(DV + out, dv.to(DV.dtype.element_ty), mask=kv_mask)


@_kernel
def _dq_tile(q, do, dq, lse, delta, K, V, stride_kn, stride_kd, stride_vn, stride_vd, start_n, visible, offs_d,
             n_k, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr,
             PRECISION: tl.constexpr):
    """Add one block of keys' share to dQ (BM, BD) of a block of queries."""
    offs_n = start_n + tl.arange(0, BLOCK_N)
    kv_mask = (offs_d[:, None] < HEAD_DIM) & (offs_n[None, :] < n_k)
    kT = tl.load(K + offs_d[:, None] * stride_kd + offs_n[None, :] * stride_kn, mask=kv_mask, other=0.0)  # (BD, BN)
    vT = tl.load(V + offs_d[:, None] * stride_vd + offs_n[None, :] * stride_vn, mask=kv_mask, other=0.0)  # (BD, BN)
    s = tl.dot(q, kT, input_precision=PRECISION) * qk_scale  # (BM, BN), base 2
    if MASKED:
        s = tl.where(offs_n[None, :] < visible[:, None], s, float("-inf"))
    p = tl.exp2(s - lse[:, None])  # (BM, BN) the weights
    dp = tl.dot(do, vT, input_precision=PRECISION)  # (BM, BN) = dO V^T
    ds = p * (dp - delta[:, None])
    dq += tl.dot(ds.to(kT.dtype), tl.trans(kT), input_precision=PRECISION)  # (BM, BD) += dS K
    return dq


@_kernel
def _dq_kernel(Q, K, V, DO, LSE, DELTA, DQ, LENS,
               stride_qb, stride_qh, stride_qm, stride_qd, stride_kb, stride_kh, stride_kn, stride_kd,
               stride_vb, stride_vh, stride_vn, stride_vd, stride_dob, stride_doh, stride_dom, stride_dod,
               stride_dqb, stride_dqh, stride_dqm, stride_dqd, stride_lb, stride_lh, stride_lm,
               heads, group, n_q, n_k, qk_scale, scale,
               HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
               CAUSAL: tl.constexpr, HAS_LENS: tl.constexpr, PRECISION: tl.constexpr):
    """dQ of one block of queries: the forward's loop over key blocks, with the softmax's backward."""
    start_m = tl.program_id(0) * BLOCK_M
    b, h = tl.program_id(1) // heads, tl.program_id(1) % heads
    kv_h = h // group
    K += b.to(tl.int64) * stride_kb + kv_h * stride_kh
    V += b.to(tl.int64) * stride_vb + kv_h * stride_vh
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    row_mask = (offs_m[:, None] < n_q) & (offs_d[None, :] < HEAD_DIM)
    q = tl.load(Q + b.to(tl.int64) * stride_qb + h * stride_qh + offs_m[:, None] * stride_qm
                + offs_d[None, :] * stride_qd, mask=row_mask, other=0.0)  # (BM, BD)
    do = tl.load(DO + b.to(tl.int64) * stride_dob + h * stride_doh + offs_m[:, None] * stride_dom
                 + offs_d[None, :] * stride_dod, mask=row_mask, other=0.0)  # (BM, BD)
    lse = tl.load(LSE + tl.program_id(1).to(tl.int64) * n_q + offs_m, mask=offs_m < n_q, other=0.0)
    lse = lse * 1.4426950408889634  # (BM,) base 2
    lse = tl.where(lse == float("-inf"), 0.0, lse)  # a row that sees no key: its masked P is exp2(-inf) = 0
    delta = tl.load(DELTA + tl.program_id(1).to(tl.int64) * n_q + offs_m, mask=offs_m < n_q, other=0.0)
    dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)

    visible = _visible_keys(LENS, b * stride_lb + h * stride_lh, stride_lm, offs_m, n_q, n_k, HAS_LENS, CAUSAL)
    end = tl.max(visible)
    whole = tl.min(tl.where(offs_m < n_q, visible, n_k)) // BLOCK_N * BLOCK_N
    for start_n in range(0, whole, BLOCK_N):
        dq = _dq_tile(q, do, dq, lse, delta, K, V, stride_kn, stride_kd, stride_vn, stride_vd, start_n, visible,
                      offs_d, n_k, qk_scale, HEAD_DIM, BLOCK_N, False, PRECISION)
    for start_n in range(whole, end, BLOCK_N):
        dq = _dq_tile(q, do, dq, lse, delta, K, V, stride_kn, stride_kd, stride_vn, stride_vd, start_n, visible,
                      offs_d, n_k, qk_scale, HEAD_DIM, BLOCK_N, True, PRECISION)
    tl.store(DQ + b.to(tl.int64) * stride_dqb + h * stride_dqh + offs_m[:, None] * stride_dqm
             + offs_d[None, :] * stride_dqd, (dq * scale).to(DQ.dtype.element_ty), mask=row_mask)


# ----------------------------------------------------------------------------------------------
# Triton, found and compiled on first use
# ----------------------------------------------------------------------------------------------

def interpreter_requested() -> bool:
    """Whether the environment asks Triton to interpret kernels (``TRITON_INTERPRET=1``)."""
    return os.environ.get(INTERPRET_ENV_VAR, "0").strip().lower() in ("1", "true", "yes", "on", "y")


def set_interpreter_if_needed() -> bool:
    """Without a CUDA GPU, ask Triton for its CPU interpreter (``TRITON_INTERPRET=1``), unless the
    environment already says otherwise. Call it before anything imports Triton; returns whether the
    kernels will be interpreted (False once Triton was imported without the interpreter)."""
    if not torch.cuda.is_available() and "triton" not in sys.modules:
        os.environ.setdefault(INTERPRET_ENV_VAR, "1")
    if _compiled is not None:
        return _compiled.interpreted
    return interpreter_requested() if "triton" not in sys.modules else _triton_interprets()


def _triton_interprets() -> bool:
    try:
        from triton import knobs  # Triton >= 3.4 reads the variable when a kernel is defined
    except ImportError:  # older versions read it when they import, as we cannot see: trust the environment
        return interpreter_requested()
    return bool(knobs.runtime.interpret)


def triton_unavailable_reason() -> str | None:
    """One line saying why :func:`triton_attention` cannot run here, or None when it can."""
    if importlib.util.find_spec("triton") is None:
        return "triton is not installed (pip install triton; wheels exist for Linux x86-64)"
    try:
        interpreted = set_interpreter_if_needed()
    except Exception as error:  # a broken install: say so rather than fail later
        return f"triton does not import: {type(error).__name__}: {error}"
    if not interpreted and not torch.cuda.is_available():
        return (f"no CUDA GPU, and triton was imported without its interpreter: set {INTERPRET_ENV_VAR}=1 "
                "before anything imports triton")
    return None


def triton_available() -> bool:
    """Whether :func:`triton_attention` can run here: on a CUDA GPU, or on the CPU through Triton's interpreter."""
    return triton_unavailable_reason() is None


_compiled: types.SimpleNamespace | None = None


def compile_kernels() -> types.SimpleNamespace:
    """Import Triton and wrap every ``@_kernel`` function with ``triton.jit`` (once). Returns a namespace
    with the kernels, ``triton`` itself and ``interpreted`` (whether they run through the interpreter)."""
    global _compiled
    if _compiled is None:
        reason = triton_unavailable_reason()
        if reason and importlib.util.find_spec("triton") is None:
            raise ImportError(f"triton_attention needs Triton: {reason}")
        import triton
        import triton.language
        from triton.runtime.errors import OutOfResources

        scope = globals()
        scope["tl"] = triton.language  # the name the kernels use; bound before they are jitted
        for name in _KERNEL_NAMES:
            scope[name] = triton.jit(scope[name])
        interpreted = type(scope["_forward_kernel"]).__name__ == "InterpretedFunction"
        _compiled = types.SimpleNamespace(triton=triton, interpreted=interpreted, OutOfResources=OutOfResources,
                                          **{name: scope[name] for name in _KERNEL_NAMES})
    return _compiled


# ----------------------------------------------------------------------------------------------
# Block sizes
# ----------------------------------------------------------------------------------------------

#: (BLOCK_M, BLOCK_N, num_warps, num_stages) per kernel on a CUDA GPU, by bytes per element and head size.
#: The forward and dQ kernels hold BLOCK_M queries and walk keys; dK/dV holds BLOCK_N keys and walks queries.
#: Chosen so that, compiled for an H100 (sm_90), no 16-bit kernel spills registers and the forward kernel's
#: pipeline fits in shared memory (128 KiB at d = 128) also on an A100; not tuned by timing yet.
GPU_BLOCKS = {
    # (element bytes, largest d): {"forward": ..., "dkdv": ..., "dq": ...}
    # float16/bfloat16: chosen on an H200 by benchmarks/tune_triton_blocks.py (n = 8,192, 4 heads, causal
    # and not): the fastest of 5 to 7 candidates per kernel
    (2, 64): {"forward": (64, 128, 4, 3), "dkdv": (64, 128, 8, 3), "dq": (128, 64, 8, 3)},
    (2, 128): {"forward": (64, 64, 4, 3), "dkdv": (64, 128, 8, 3), "dq": (128, 64, 8, 3)},
    # float32 products run on the CUDA cores (IEEE, not TF32), operands in registers: smaller tiles
    (4, 64): {"forward": (32, 32, 4, 1), "dkdv": (16, 32, 4, 1), "dq": (32, 16, 4, 1)},
    (4, 128): {"forward": (32, 32, 8, 1), "dkdv": (32, 32, 8, 1), "dq": (32, 32, 8, 1)},
}
#: under the interpreter a larger block is fewer (slow, Python-level) programs
INTERPRETER_BLOCK = 32


def kernel_blocks(device: torch.device, dtype: torch.dtype, d: int, block_size_q: int | None = None,
                  block_size_k: int | None = None) -> dict:
    """``{"forward" | "dkdv" | "dq": (BLOCK_M, BLOCK_N, num_warps, num_stages)}`` for these inputs; given
    block sizes replace BLOCK_M (queries) and BLOCK_N (keys) of every kernel."""
    if device.type == "cuda":
        table = GPU_BLOCKS[(2 if dtype.itemsize <= 2 else 4, 64 if d <= 64 else 128)]
    else:
        table = dict.fromkeys(("forward", "dkdv", "dq"), (INTERPRETER_BLOCK, INTERPRETER_BLOCK, 4, 1))
    return {name: (block_size_q or bm, block_size_k or bn, warps, stages)
            for name, (bm, bn, warps, stages) in table.items()}


def _launch(kernels, kernel, grid, args, constants, blocks):
    """Run ``kernel[grid](*args, **constants)`` with ``blocks`` = (BLOCK_M, BLOCK_N, warps, stages); where
    the GPU has not enough shared memory for that many pipeline stages, once more with one stage."""
    block_m, block_n, warps, stages = blocks
    try:
        kernel[grid](*args, **constants, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps, num_stages=stages)
    except kernels.OutOfResources:
        if stages == 1:
            raise
        kernel[grid](*args, **constants, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps, num_stages=1)


# ----------------------------------------------------------------------------------------------
# Inputs, the autograd function and the entry point
# ----------------------------------------------------------------------------------------------

def _check_inputs(queries, keys, values, what="triton_attention"):
    """Raise ``ValueError`` naming what was expected unless the inputs fit the kernels."""
    for name, t in (("queries", queries), ("keys", keys), ("values", values)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{what}: {name} must be a tensor, got {type(t).__name__}")
        if t.dim() not in (3, 4):
            raise ValueError(f"{what}: {name} must have shape (batch, heads, n, d) or (batch, n, d), "
                             f"got {tuple(t.shape)}")
    if not queries.dim() == keys.dim() == values.dim():
        raise ValueError(f"{what}: queries {tuple(queries.shape)}, keys {tuple(keys.shape)} and values "
                         f"{tuple(values.shape)} must all be 3-D (batch, n, d) or all 4-D (batch, heads, n, d)")
    dtypes = {queries.dtype, keys.dtype, values.dtype}
    if len(dtypes) > 1:
        raise ValueError(f"{what}: queries, keys and values must have one dtype, got {queries.dtype}, "
                         f"{keys.dtype} and {values.dtype}")
    if queries.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"{what} takes float32, float16 or bfloat16, got {queries.dtype} "
                         "(use attn_utils.tiled_attention for float64)")
    devices = {queries.device, keys.device, values.device}
    if len(devices) > 1:
        raise ValueError(f"{what}: queries, keys and values must be on one device, got "
                         f"{queries.device}, {keys.device} and {values.device}")
    if queries.device.type not in ("cuda", "cpu"):
        raise ValueError(f"{what} runs on a CUDA GPU (or on the CPU through Triton's interpreter), "
                         f"got tensors on {queries.device}")
    if queries.device.type == "cpu" and queries.dtype == torch.bfloat16:
        raise ValueError(f"{what}: bfloat16 is not supported on the CPU (Triton's interpreter computes it "
                         "wrongly); use float16 or float32 there, bfloat16 on a GPU")
    q_shape, k_shape, v_shape = tuple(queries.shape), tuple(keys.shape), tuple(values.shape)
    if k_shape != v_shape:
        raise ValueError(f"{what}: keys {k_shape} and values {v_shape} must have the same shape "
                         "(the kernels take d_v = d)")
    if q_shape[0] != k_shape[0]:
        raise ValueError(f"{what}: queries {q_shape} and keys {k_shape} must have the same batch size")
    if q_shape[-1] != k_shape[-1]:
        raise ValueError(f"{what} needs queries and keys of the same size d; got queries {q_shape} "
                         f"(d={q_shape[-1]}) and keys {k_shape} (d={k_shape[-1]})")
    if queries.dim() == 4 and (k_shape[1] == 0 or q_shape[1] % k_shape[1]):
        raise ValueError(f"{what}: the query heads ({q_shape[1]}) must be a multiple of the key/value heads "
                         f"({k_shape[1]}), for grouped-query attention; queries {q_shape}, keys {k_shape}")
    if not 1 <= q_shape[-1] <= MAX_HEAD_DIM:
        raise ValueError(f"{what} takes head sizes d from 1 to {MAX_HEAD_DIM}, got d={q_shape[-1]} "
                         "(use attn_utils.tiled_attention for larger ones)")


def _lengths(valid_lens, score_shape: torch.Size, device: torch.device, what="triton_attention"):
    """Valid lengths as int32 (batch, heads_q, n_q), with stride 0 along what they share; None for none."""
    if valid_lens is None:
        return None
    valid_lens = as_lengths_tensor(valid_lens)
    if valid_lens.dtype == torch.bool:
        raise ValueError(f"{what} takes valid lengths (batch,), (batch, n_q) or the rows' shape "
                         f"{tuple(score_shape[:-1])}, not a boolean mask: use attn_utils.tiled_attention for those")
    make_mask(torch.empty((), device=device).expand(*score_shape[:-1], 1), valid_lens)  # the shared checks
    if checks_read_values(valid_lens):
        check_length_values(valid_lens, score_shape[-1])
    lengths = lengths_as_row_shape(valid_lens.to(device=device, dtype=torch.int32), score_shape)
    if len(score_shape) == 3:  # (batch, n_q, n_k): one head
        lengths = lengths.unsqueeze(1)
    batch, heads, n_q = score_shape[0], (1 if len(score_shape) == 3 else score_shape[1]), score_shape[-2]
    return lengths.expand(batch, heads, n_q)


def _forward(q, k, v, lengths, causal, scale, blocks):
    kernels = compile_kernels()
    batch, heads, n_q, d = q.shape
    n_k = k.shape[2]
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = torch.empty(batch, heads, n_q, dtype=torch.float32, device=q.device)
    if batch * heads * n_q == 0:
        return out, lse
    lens = lengths if lengths is not None else torch.zeros(1, 1, 1, dtype=torch.int32, device=q.device)
    block_m = blocks["forward"][0]
    grid = (math.ceil(n_q / block_m), batch * heads)
    args = (q, k, v, out, lse, lens, *q.stride(), *k.stride(), *v.stride(), *out.stride(), *lens.stride(),
            heads, heads // k.shape[1], n_q, n_k, scale * LOG2E)
    constants = dict(HEAD_DIM=d, BLOCK_D=max(16, _next_power_of_2(d)), CAUSAL=causal,
                     HAS_LENS=lengths is not None, PRECISION=dot_precision(q.dtype))
    _launch(kernels, kernels._forward_kernel, grid, args, constants, blocks["forward"])
    return out, lse


def dot_precision(dtype: torch.dtype) -> str:
    """``tl.dot``'s input_precision: "ieee" for float32 (not TF32); float16/bfloat16 have one way, the default."""
    return "ieee" if dtype == torch.float32 else "tf32"


def _next_power_of_2(n: int) -> int:
    """The smallest power of two >= n (``triton.next_power_of_2``, without importing Triton)."""
    return 1 << max(0, n - 1).bit_length()


def _backward(d_out, q, k, v, out, lse, lengths, causal, scale, blocks):
    kernels = compile_kernels()
    batch, heads, n_q, d = q.shape
    heads_kv, n_k = k.shape[1], k.shape[2]
    group = heads // heads_kv
    launch = batch * heads * n_q * n_k > 0
    new = torch.empty if launch else torch.zeros  # the kernels write every row, the ones that see nothing too
    dq = new(q.shape, dtype=q.dtype, device=q.device)
    # One dK, dV per query head, summed over each group below (see the module docstring): float32 when summed.
    buffer_dtype = k.dtype if group == 1 else torch.float32
    dk = new(batch, heads, n_k, d, dtype=buffer_dtype, device=k.device)
    dv = new(batch, heads, n_k, d, dtype=buffer_dtype, device=k.device)
    if launch:
        lens = lengths if lengths is not None else torch.zeros(1, 1, 1, dtype=torch.int32, device=q.device)
        constants = dict(HEAD_DIM=d, BLOCK_D=max(16, _next_power_of_2(d)))
        mask_constants = dict(CAUSAL=causal, HAS_LENS=lengths is not None, PRECISION=dot_precision(q.dtype))
        delta = torch.empty(batch, heads, n_q, dtype=torch.float32, device=q.device)
        block_m = blocks["dq"][0]
        kernels._preprocess_kernel[(math.ceil(n_q / block_m), batch * heads)](
            out, d_out, delta, *out.stride(), *d_out.stride(), heads, n_q, **constants, BLOCK_M=block_m)
        shared = (*q.stride(), *k.stride(), *v.stride(), *d_out.stride())
        sizes = (heads, group, n_q, n_k, scale * LOG2E, scale)
        row_lens = lengths is not None and n_q > 1 and lengths.stride(-1) != 0
        _launch(kernels, kernels._dkdv_kernel, (math.ceil(n_k / blocks["dkdv"][1]), batch * heads),
                (q, k, v, d_out, lse, delta, dk, dv, lens, *shared, *dk.stride(), *lens.stride(), *sizes),
                {**constants, **mask_constants, "ROW_LENS": row_lens}, blocks["dkdv"])
        _launch(kernels, kernels._dq_kernel, (math.ceil(n_q / block_m), batch * heads),
                (q, k, v, d_out, lse, delta, dq, lens, *shared, *dq.stride(), *lens.stride(), *sizes),
                {**constants, **mask_constants}, blocks["dq"])
    if group > 1:
        dk = dk.view(batch, heads_kv, group, n_k, d).sum(2).to(k.dtype)
        dv = dv.view(batch, heads_kv, group, n_k, d).sum(2).to(v.dtype)
    return dq, dk, dv


class TritonAttentionFunction(torch.autograd.Function):
    """FlashAttention-2 forward and backward kernels as one autograd function: saves Q, K, V, O and the
    log-sum-exp. Call through :func:`triton_attention`, which checks the inputs."""

    @staticmethod
    def forward(ctx, q, k, v, lengths, causal, scale, blocks):
        out, lse = _forward(q, k, v, lengths, causal, scale, blocks)
        ctx.save_for_backward(q, k, v, out, lse, lengths)
        ctx.config = (causal, scale, blocks)
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, d_out, _d_lse):
        q, k, v, out, lse, lengths = ctx.saved_tensors
        # contiguous: the gradient of out.sum() arrives as one number broadcast (stride 0), which would
        # otherwise compile kernels of its own, with scalar loads
        dq, dk, dv = _backward(d_out.contiguous(), q, k, v, out, lse, lengths, *ctx.config)
        return dq, dk, dv, None, None, None, None


def triton_attention(queries, keys, values, valid_lens=None, *, causal: bool = False, scale: float | None = None,
                     block_size_q: int | None = None, block_size_k: int | None = None):
    """``softmax(scale Q K^T) V`` by FlashAttention-2's Triton kernels; returns ``(output, logsumexp)``.

    Like :func:`attn_utils.tiled_attention`: ``scale`` defaults to ``1/sqrt(d)``; ``valid_lens`` holds
    lengths of shape (batch,), (batch, n_q) or the rows' shape (a boolean mask: use ``tiled_attention``);
    ``causal=True`` is aligned bottom-right (query i of n_q sees keys j <= i + n_k - n_q), and a query
    that sees no key gets output 0, log-sum-exp ``-inf`` and zero gradients. Keys and values may have
    fewer heads than queries (grouped-query attention). ``block_size_q`` and ``block_size_k`` (powers of
    two, at least 16) replace the defaults of :func:`kernel_blocks`. Output in the inputs' dtype,
    log-sum-exp in float32. On the CPU it needs Triton's interpreter (:func:`set_interpreter_if_needed`).
    Inputs: one dtype (float32, float16, or bfloat16 on a GPU), one device, ``d`` from 1 to 128, any strides;
    ``scale`` ``None`` or a finite number; ``causal`` a bool.
    """
    what = "triton_attention"
    _check_inputs(queries, keys, values, what)
    check_attention_scale(scale, what)
    if not isinstance(causal, bool):
        raise ValueError(f"{what}: causal must be True or False, got {type(causal).__name__} {causal!r}")
    for name, size in (("block_size_q", block_size_q), ("block_size_k", block_size_k)):
        if size is not None and (check_positive_int(name, size) < 16 or size & (size - 1)):
            raise ValueError(f"{what}: {name} must be a power of two >= 16 (a Triton block), got {size}")
    one_head = queries.dim() == 3
    score_shape = torch.Size((*queries.shape[:-1], keys.shape[-2]))  # never allocated
    lengths = _lengths(valid_lens, score_shape, queries.device, what)
    if one_head:
        queries, keys, values = queries.unsqueeze(1), keys.unsqueeze(1), values.unsqueeze(1)
    kernels = compile_kernels()
    if queries.device.type == "cpu" and not kernels.interpreted:
        raise RuntimeError(f"{what}: these tensors are on the CPU, but Triton was imported without its "
                           f"interpreter: set {INTERPRET_ENV_VAR}=1 in the environment before anything imports "
                           "triton (or move the tensors to a CUDA GPU)")
    scale = 1.0 / math.sqrt(queries.shape[-1]) if scale is None else float(scale)
    blocks = kernel_blocks(queries.device, queries.dtype, queries.shape[-1], block_size_q, block_size_k)
    out, lse = TritonAttentionFunction.apply(queries, keys, values, lengths, causal, scale, blocks)
    return (out.squeeze(1), lse.squeeze(1)) if one_head else (out, lse)
