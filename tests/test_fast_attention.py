"""Online softmax, tiled attention and the memory measurements, against torch and hand counts."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from simulated_accelerator import simulated
from torch.nn import functional as F

from attn_utils import (
    FlashAttentionFunction,
    attention_memory,
    causal_mask,
    fast_attention,
    interleaved_medians,
    loglog_slope,
    masked_softmax,
    merge_attention_blocks,
    online_softmax,
    saved_tensor_bytes,
    tiled_attention,
)
from attn_utils.tolerance import assert_close

D64 = torch.float64


def randn(*shape, seed=0, dtype=D64, device="cpu", grad=False):
    t = torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype).to(device)
    return t.requires_grad_() if grad else t


def explicit(q, k, v, mask=None, causal=False, scale=None):
    """The reference: scores, masked softmax, weighted sum (autograd through all of it)."""
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * scale
    if causal:  # bottom-right aligned: query i sees keys j <= i + n_k - n_q
        allowed = causal_mask(q.shape[-2], k.shape[-2], device=q.device)
        mask = allowed if mask is None else masked_mask(mask, scores) & allowed
    return masked_softmax(scores, mask) @ v


def masked_mask(valid_lens, scores):
    from attn_utils import make_mask
    return make_mask(scores, valid_lens)


# ---------------------------------------------------------------- online softmax

@pytest.mark.parametrize("block_size", [1, 3, 7, 16, 100])
def test_online_softmax_equals_torch_softmax(block_size):
    X = randn(4, 5, 23, seed=1)
    torch.testing.assert_close(online_softmax(X, block_size=block_size), torch.softmax(X, dim=-1))


def test_online_softmax_hand_computed():
    # softmax([0, ln 3]) = [1/4, 3/4], read one column at a time
    out = online_softmax(torch.tensor([[0.0, math.log(3.0)]], dtype=D64), block_size=1)
    torch.testing.assert_close(out, torch.tensor([[0.25, 0.75]], dtype=D64))


def test_online_softmax_huge_logits_where_the_naive_formula_overflows():
    X = torch.tensor([[1000.0, 999.0, -1000.0], [3e38, 3e38, 0.0]])
    naive = torch.exp(X) / torch.exp(X).sum(-1, keepdim=True)
    assert torch.isnan(naive).any()  # exp(1000) = inf, and inf / inf = NaN
    out = online_softmax(X, block_size=1)
    torch.testing.assert_close(out, torch.softmax(X, dim=-1))
    torch.testing.assert_close(out[1], torch.tensor([0.5, 0.5, 0.0]))


def test_online_softmax_minus_inf_and_fully_masked_rows_give_zeros_not_nan():
    X = randn(3, 6, seed=2)
    X[0, 2] = float("-inf")
    X[1] = float("-inf")  # no visible entry at all
    out = online_softmax(X, block_size=4)
    assert not torch.isnan(out).any()
    assert out[0, 2] == 0 and torch.equal(out[1], torch.zeros(6, dtype=D64))
    torch.testing.assert_close(out, masked_softmax(X))


@pytest.mark.parametrize("valid_lens", [torch.tensor([0, 3, 7]), torch.tensor([[1, 2], [0, 7], [4, 5]])])
def test_online_softmax_takes_masked_softmax_valid_lens(valid_lens):
    X = randn(3, 2, 7, seed=3)
    torch.testing.assert_close(online_softmax(X, valid_lens, block_size=3), masked_softmax(X, valid_lens))
    mask = randn(3, 2, 7, seed=4) > 0
    torch.testing.assert_close(online_softmax(X, mask, block_size=2), masked_softmax(X, mask))


def test_online_softmax_gradient_equals_torch_softmax():
    X = randn(2, 9, seed=5, grad=True)
    w = randn(2, 9, seed=6)
    g1, = torch.autograd.grad((online_softmax(X, block_size=4) * w).sum(), X)
    g2, = torch.autograd.grad((torch.softmax(X, -1) * w).sum(), X)
    torch.testing.assert_close(g1, g2)


def test_merge_attention_blocks_hand_computed():
    # block 1: scores [0], value 1 -> m=0, l=1, acc=1; block 2: scores [ln 3], value 5 -> m=ln 3, l=1, acc=5
    m, l, acc = merge_attention_blocks(torch.tensor([0.0]), torch.tensor([1.0]), torch.tensor([[1.0]]),
                                       torch.tensor([math.log(3)]), torch.tensor([1.0]), torch.tensor([[5.0]]))
    torch.testing.assert_close(m, torch.tensor([math.log(3)]))
    torch.testing.assert_close(l, torch.tensor([4 / 3]))
    torch.testing.assert_close(acc / l[:, None], torch.tensor([[0.25 * 1 + 0.75 * 5]]))  # softmax-weighted mean
    # an empty block (m = -inf, l = 0) changes nothing and makes no NaN
    m2, l2, acc2 = merge_attention_blocks(m, l, acc, torch.tensor([float("-inf")]), torch.tensor([0.0]),
                                          torch.tensor([[0.0]]))
    assert torch.equal(m2, m) and torch.equal(l2, l) and torch.equal(acc2, acc)


# ---------------------------------------------------------------- tiled attention: forward

SHAPES = [((2, 9, 4), (2, 9, 4), 4), ((1, 2, 17, 8), (1, 2, 17, 8), 3), ((2, 3, 5, 4), (2, 3, 11, 4), 6),
          ((3, 1, 4), (3, 13, 4), 2)]


@pytest.mark.parametrize("q_shape, k_shape, dv", SHAPES)
@pytest.mark.parametrize("blocks", [(1, 1), (4, 3), (5, 64), (64, 64)])
@pytest.mark.parametrize("recompute", [False, True])
def test_tiled_forward_equals_explicit_and_sdpa(q_shape, k_shape, dv, blocks, recompute):
    q, k = randn(*q_shape, seed=1), randn(*k_shape, seed=2)
    v = randn(*k_shape[:-1], dv, seed=3)
    out, lse = tiled_attention(q, k, v, block_size_q=blocks[0], block_size_k=blocks[1], recompute=recompute)
    torch.testing.assert_close(out, explicit(q, k, v))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))
    torch.testing.assert_close(lse, torch.logsumexp(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1))


@settings(max_examples=25, deadline=None)
@given(n_q=st.integers(1, 20), n_k=st.integers(1, 20), bq=st.integers(1, 9), bk=st.integers(1, 9),
       causal=st.booleans(), seed=st.integers(0, 1000))
def test_tiled_forward_any_sizes(n_q, n_k, bq, bk, causal, seed):
    q, k, v = randn(2, n_q, 3, seed=seed), randn(2, n_k, 3, seed=seed + 1), randn(2, n_k, 2, seed=seed + 2)
    out, _ = tiled_attention(q, k, v, causal=causal, block_size_q=bq, block_size_k=bk)
    torch.testing.assert_close(out, explicit(q, k, v, causal=causal))


@pytest.mark.parametrize("recompute", [False, True])
def test_causal_equals_sdpa_is_causal(recompute):
    q, k, v = (randn(2, 2, 19, 8, seed=s) for s in range(3))
    out, _ = tiled_attention(q, k, v, causal=True, block_size_q=4, block_size_k=6, recompute=recompute)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))


@pytest.mark.parametrize("valid_lens", [
    torch.tensor([0, 5, 12]),  # (batch,), with an empty sequence
    torch.tensor([[1, 12, 0, 7, 3, 3, 2, 9, 11, 4]] * 3),  # (batch, queries)
    "bool",  # a boolean mask (batch, 1, keys)
    "bool-full",  # a boolean mask (batch, queries, keys)
])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("recompute", [False, True])
def test_masks_equal_explicit_and_sdpa(valid_lens, causal, recompute):
    q, k, v = randn(3, 10, 4, seed=1), randn(3, 12, 4, seed=2), randn(3, 12, 5, seed=3)
    if valid_lens == "bool":
        valid_lens = randn(3, 1, 12, seed=4) > 0
    elif valid_lens == "bool-full":
        valid_lens = randn(3, 10, 12, seed=5) > 0.5
    out, lse = tiled_attention(q, k, v, valid_lens, causal=causal, block_size_q=3, block_size_k=5,
                               recompute=recompute)
    want = explicit(q, k, v, valid_lens, causal)
    torch.testing.assert_close(out, want)
    # SDPA with the same boolean mask; rows that see no key are zeroed (SDPA's own answer varies)
    scores = torch.empty(3, 10, 12)
    mask = masked_mask(valid_lens, scores).expand(3, 10, 12)
    if causal:
        mask = mask & causal_mask(10, 12)
    visible = mask.any(-1, keepdim=True)
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=mask | ~visible).masked_fill(~visible, 0.0)
    torch.testing.assert_close(out, sdpa)
    assert torch.equal(torch.isinf(lse), ~visible.squeeze(-1))
    assert not torch.isnan(out).any()


def test_multi_head_valid_lens_are_shared_across_heads():
    q, k, v = (randn(2, 4, 9, 8, seed=s) for s in range(3))
    lens = torch.tensor([3, 9])
    out, _ = tiled_attention(q, k, v, lens, block_size_q=4, block_size_k=2)
    torch.testing.assert_close(out, explicit(q, k, v, lens))
    torch.testing.assert_close(out[0], explicit(q[0], k[0, :, :3], v[0, :, :3]))  # padding changes nothing


def test_scale_argument():
    q, k, v = (randn(1, 6, 4, seed=s) for s in range(3))
    out, _ = tiled_attention(q, k, v, scale=1.0, block_size_q=4, block_size_k=4)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, scale=1.0))


def test_float16_is_computed_in_float32():
    q, k, v = (randn(1, 2, 40, 8, seed=s, dtype=torch.float32) for s in range(3))
    out, _ = tiled_attention(q.half(), k.half(), v.half(), block_size_q=16, block_size_k=16)
    assert out.dtype == torch.float16
    torch.testing.assert_close(out.float(), F.scaled_dot_product_attention(q, k, v), atol=2e-3, rtol=2e-3)


# ---------------------------------------------------------------- causal alignment when n_q != n_k

TIGHT = {"atol": 1e-12, "rtol": 1e-12}
# one query against many keys (a decode step), and n_q < n_k with neither a multiple of the tile sizes; (1, 1) as
# the edge where both alignments agree
CROSS_LENGTHS = [(1, 1), (1, 13), (1, 40), (2, 9), (5, 23), (7, 19), (17, 50)]


def top_left_mask(n_q, n_k):
    """The wrong alignment: query i sees keys 0..i whatever n_k is (a one-query step sees key 0 only)."""
    return torch.ones(n_q, n_k, dtype=torch.bool).tril()


@pytest.mark.parametrize("n_q, n_k", CROSS_LENGTHS)
@pytest.mark.parametrize("block", [1, 3, 16])
@pytest.mark.parametrize("recompute", [False, True])
def test_causal_is_aligned_bottom_right_like_causal_mask(n_q, n_k, block, recompute):
    q = randn(2, 3, n_q, 4, seed=n_q, grad=True)
    k, v = randn(2, 3, n_k, 4, seed=n_k + 100, grad=True), randn(2, 3, n_k, 5, seed=n_k + 200, grad=True)
    mask = causal_mask(n_q, n_k)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    out, lse = tiled_attention(q, k, v, causal=True, block_size_q=block, block_size_k=block, recompute=recompute)
    torch.testing.assert_close(out, want, **TIGHT)
    scores = (q @ k.transpose(-2, -1) / 2).masked_fill(~mask, float("-inf"))  # scale 1/sqrt(4)
    torch.testing.assert_close(lse, torch.logsumexp(scores, dim=-1), **TIGHT)
    d_out = randn(2, 3, n_q, 5, seed=7)
    got_grads, want_grads = (torch.autograd.grad(o, (q, k, v), d_out) for o in (out, want))
    for name, g, w in zip("qkv", got_grads, want_grads):
        torch.testing.assert_close(g, w, **TIGHT, msg=lambda m, name=name: f"gradient of {name}: {m}")
    if n_q != n_k:  # the top-left alignment is a different answer, which the old code gave
        top_left = F.scaled_dot_product_attention(q, k, v, attn_mask=top_left_mask(n_q, n_k))
        assert not torch.allclose(out, top_left, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("n_k", [1, 5, 16, 40])
@pytest.mark.parametrize("recompute", [False, True])
def test_one_query_decode_step_sees_every_key(n_k, recompute):
    q, k, v = randn(2, 1, 4, seed=1), randn(2, n_k, 4, seed=2), randn(2, n_k, 3, seed=3)
    out, _ = tiled_attention(q, k, v, causal=True, block_size_q=3, block_size_k=3, recompute=recompute)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), **TIGHT)  # no mask at all
    if n_k > 1:
        assert not torch.allclose(out, v[:, :1], atol=1e-6, rtol=1e-6)  # not key 0 alone


@pytest.mark.parametrize("n_new", [1, 4, 11])
@pytest.mark.parametrize("block", [1, 3, 16])
def test_last_queries_alone_equal_the_last_rows_of_causal_self_attention(n_new, block):
    """The key-value cache's step: the newest n_new queries against all n keys give the same rows as
    causal self-attention over all n positions."""
    x_q, k, v = randn(2, 2, 21, 4, seed=4), randn(2, 2, 21, 4, seed=5), randn(2, 2, 21, 6, seed=6)
    full, full_lse = tiled_attention(x_q, k, v, causal=True, block_size_q=block, block_size_k=block)
    step, step_lse = tiled_attention(x_q[..., -n_new:, :], k, v, causal=True, block_size_q=block, block_size_k=block)
    torch.testing.assert_close(step, full[..., -n_new:, :], **TIGHT)
    torch.testing.assert_close(step_lse, full_lse[..., -n_new:], **TIGHT)


@pytest.mark.parametrize("n_q, n_k", CROSS_LENGTHS + [(9, 4), (13, 13), (20, 7)])
@pytest.mark.parametrize("block_q, block_k", [(1, 1), (3, 3), (16, 16), (3, 16), (16, 3), (4, 7)])
def test_causal_skips_exactly_the_tiles_that_causal_mask_hides(n_q, n_k, block_q, block_k):
    mask = causal_mask(n_q, n_k)
    for q0, q1, key_blocks in fast_attention.tile_schedule(n_q, n_k, block_q, block_k, causal=True):
        kept = set(key_blocks)
        for k0 in range(0, n_k, block_k):
            k1 = min(k0 + block_k, n_k)
            assert ((k0, k1) in kept) == bool(mask[q0:q1, k0:k1].any()), (q0, q1, k0, k1)


@pytest.mark.parametrize("n_q, n_k", [(5, 3), (9, 4), (20, 7), (3, 1)])
@pytest.mark.parametrize("recompute", [False, True])
def test_more_queries_than_keys_the_first_see_nothing_and_get_zeros(n_q, n_k, recompute):
    """causal_mask(n_q, n_k) with n_q > n_k hides every key from the first n_q - n_k queries (they come
    before the first key); tiled attention gives them a zero output, a log-sum-exp of -inf and zero
    gradients, as masked_softmax gives zero weights, and the other rows equal SDPA with that mask."""
    q = randn(2, n_q, 4, seed=1, grad=True)
    k, v = randn(2, n_k, 4, seed=2, grad=True), randn(2, n_k, 3, seed=3, grad=True)
    mask, blind = causal_mask(n_q, n_k), n_q - n_k
    assert not mask[:blind].any() and mask[blind:].any(-1).all()  # causal_mask's own rows
    out, lse = tiled_attention(q, k, v, causal=True, block_size_q=2, block_size_k=3, recompute=recompute)
    assert not torch.isnan(out).any() and not torch.isnan(lse).any()
    assert torch.equal(out[:, :blind], torch.zeros(2, blind, 3, dtype=D64))
    assert torch.equal(lse[:, :blind], torch.full((2, blind), float("-inf"), dtype=D64))
    sdpa = F.scaled_dot_product_attention(q[:, blind:], k, v, attn_mask=mask[blind:])
    torch.testing.assert_close(out[:, blind:], sdpa, **TIGHT)
    torch.testing.assert_close(out, masked_softmax(q @ k.transpose(-2, -1) / 2, mask) @ v, **TIGHT)
    gq, gk, gv = torch.autograd.grad(out.sum(), (q, k, v))
    assert not gq[:, :blind].any() and torch.isfinite(gk).all() and torch.isfinite(gv).all()
    want = torch.autograd.grad(sdpa.sum(), (k, v))
    torch.testing.assert_close(gk, want[0], **TIGHT)
    torch.testing.assert_close(gv, want[1], **TIGHT)


# ---------------------------------------------------------------- tiled attention: gradients

@pytest.mark.parametrize("recompute", [False, True])
@pytest.mark.parametrize("case", ["plain", "causal", "lengths", "bool", "cross"])
def test_gradients_equal_explicit(recompute, case):
    n_k = 7 if case == "cross" else 11
    q, k, v = randn(2, 3, 11, 4, seed=1, grad=True), randn(2, 3, n_k, 4, seed=2, grad=True), \
        randn(2, 3, n_k, 5, seed=3, grad=True)
    mask = {"lengths": torch.tensor([0, 6]), "bool": randn(2, 1, 11, n_k, seed=4) > 0}.get(case)
    causal = case == "causal"
    d_out = randn(2, 3, 11, 5, seed=5)
    out, _ = tiled_attention(q, k, v, mask, causal=causal, block_size_q=4, block_size_k=3, recompute=recompute)
    got = torch.autograd.grad(out, (q, k, v), d_out)
    want = torch.autograd.grad(explicit(q, k, v, mask, causal), (q, k, v), d_out)
    for name, g, w in zip("qkv", got, want):
        torch.testing.assert_close(g, w, msg=lambda m, name=name: f"gradient of {name}: {m}")
    if case not in ("lengths", "bool"):
        sdpa = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        for g, w in zip(got, torch.autograd.grad(sdpa, (q, k, v), d_out)):
            torch.testing.assert_close(g, w)


@pytest.mark.parametrize("recompute", [False, True])
def test_gradcheck(recompute):
    q, k, v = randn(1, 5, 3, seed=1, grad=True), randn(1, 4, 3, seed=2, grad=True), randn(1, 4, 2, seed=3, grad=True)
    lens = torch.tensor([3])
    assert torch.autograd.gradcheck(
        lambda q, k, v: tiled_attention(q, k, v, lens, block_size_q=2, block_size_k=3, recompute=recompute)[0],
        (q, k, v))
    k2, v2 = randn(1, 5, 3, seed=4, grad=True), randn(1, 5, 2, seed=5, grad=True)
    assert torch.autograd.gradcheck(
        lambda q, k, v: tiled_attention(q, k, v, causal=True, block_size_q=2, block_size_k=2, recompute=recompute)[0],
        (q, k2, v2))


def test_fully_masked_rows_have_zero_gradients():
    q, k, v = (randn(2, 4, 3, seed=s, grad=True) for s in range(3))
    out, _ = tiled_attention(q, k, v, torch.tensor([0, 4]), block_size_q=2, block_size_k=2, recompute=True)
    gq, gk, gv = torch.autograd.grad(out.sum(), (q, k, v))
    assert torch.equal(out[0], torch.zeros(4, 3, dtype=D64))
    assert not gq[0].any() and not gk[0].any() and not gv[0].any()
    assert gv[1].abs().sum() > 0


@pytest.mark.parametrize("recompute", [False, True])
def test_only_recompute_goes_through_the_flash_attention_function(recompute):
    """``recompute=True`` must run ``FlashAttentionFunction`` (whose backward recomputes the tiles); without it,
    autograd differentiates through the loops."""
    q, k, v = (randn(1, 4, 3, seed=s, grad=True) for s in range(3))
    out, _ = tiled_attention(q, k, v, block_size_q=2, block_size_k=2, recompute=recompute)
    assert (type(out.grad_fn).__name__ == f"{FlashAttentionFunction.__name__}Backward") is recompute


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("kwargs, match", [
    ({"block_size_q": 0}, "block_size_q must be a positive integer, got 0"),
    ({"block_size_k": 2.5}, "block_size_k must be a positive integer"),
    ({"block_size_k": True}, "block_size_k must be a positive integer"),
])
def test_bad_block_sizes(kwargs, match):
    q = randn(1, 4, 3)
    with pytest.raises(ValueError, match=match):
        tiled_attention(q, q, q, **kwargs)
    with pytest.raises(ValueError, match="block_size must be a positive integer"):
        online_softmax(q, block_size=0)


def test_bad_shapes_and_masks():
    q = randn(2, 4, 3)
    with pytest.raises(ValueError, match="same size d"):
        tiled_attention(q, randn(2, 4, 5), randn(2, 4, 5))
    with pytest.raises(ValueError, match="must come in pairs"):
        tiled_attention(q, q, randn(2, 5, 3))
    with pytest.raises(ValueError, match="same leading"):
        tiled_attention(q, randn(3, 4, 3), randn(3, 4, 3))
    with pytest.raises(ValueError, match="boolean mask of shape"):
        tiled_attention(q, q, q, torch.ones(2, 4, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="valid_lens has shape"):
        tiled_attention(q, q, q, torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="must be >= 0"):
        tiled_attention(q, q, q, torch.tensor([1, -2]))
    # lengths beyond the 4 keys (another batch's, or inf) are refused, as by the attention layers
    for too_long in (torch.tensor([4, 5]), torch.tensor([float("inf"), 2.0]), torch.tensor([[1, 2, 3, 9]] * 2)):
        with pytest.raises(ValueError, match="valid_lens must be at most the number of keys, 4"):
            tiled_attention(q, q, q, too_long)
    torch.testing.assert_close(tiled_attention(q, q, q, torch.tensor([4, 2]))[0],
                               masked_softmax(q @ q.transpose(1, 2) / math.sqrt(3), torch.tensor([4, 2])) @ q)
    with pytest.raises(ValueError, match="online_softmax expects floating-point"):
        online_softmax(torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="must be a tensor"):
        tiled_attention([1.0], q, q)
    with pytest.raises(ValueError, match="tiled_attention: causal must be True or False, got str 'yes'"):
        tiled_attention(q, q, q, causal="yes")
    with pytest.raises(ValueError, match="causal must be True or False, got Tensor"):
        tiled_attention(q, q, q, causal=torch.tensor(True))


# ---------------------------------------------------------------- measurements

def test_saved_bytes_hand_counted():
    # batch 1, n = 3 queries and keys, d = 4, float64 (8 bytes)
    q, k, v = (randn(1, 3, 4, seed=s, grad=True) for s in range(3))
    # explicit: the product saves q and k (12 numbers each), softmax saves its output P (9 numbers, also
    # saved by P @ v, counted once), P @ v saves v (12): (3 * 12 + 9) * 8 bytes
    assert saved_tensor_bytes(lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1) / 2, -1) @ v, q, k, v) \
        == (3 * 12 + 9) * 8
    # recomputing tiled attention: q, k, v, the output (12 each) and the log-sum-exp (3): (4 * 12 + 3) * 8
    flash = saved_tensor_bytes(lambda q, k, v: tiled_attention(q, k, v, recompute=True)[0], q, k, v)
    assert flash == (4 * 12 + 3) * 8
    # without gradients nothing is saved
    with torch.no_grad():
        assert saved_tensor_bytes(lambda: tiled_attention(q, k, v)[0]) == 0


def test_saved_bytes_grow_as_n_squared_and_as_n():
    rows = {name: [attention_memory(fn, n, heads=2, d=8, dtype=D64, backward=False)["saved_bytes"]
                   for n in (64, 128, 256)]
            for name, fn in [("loops", lambda q, k, v: tiled_attention(q, k, v, block_size_q=32, block_size_k=32)),
                             ("recompute", lambda q, k, v: tiled_attention(q, k, v, block_size_q=32,
                                                                           block_size_k=32, recompute=True))]}
    # the recomputing version: q, k, v, output (2 * n * 8 each) and log-sum-exp (2 * n), 8 bytes a number
    assert rows["recompute"] == [(4 * 2 * n * 8 + 2 * n) * 8 for n in (64, 128, 256)]
    assert loglog_slope([64, 128, 256], rows["recompute"]) == pytest.approx(1.0)
    # through the loops every tile of weights is saved: at least one (heads, n, n) map of float64
    assert all(saved >= 2 * n * n * 8 for saved, n in zip(rows["loops"], (64, 128, 256)))
    assert loglog_slope([128, 256], rows["loops"][1:]) > 1.8


def test_attention_memory_peak_and_map_size():
    result = attention_memory(F.scaled_dot_product_attention, 128, batch=1, heads=2, d=8)
    assert result["map_bytes"] == 2 * 128 * 128 * 4
    explicit_result = attention_memory(lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1), -1) @ v, 128,
                                       heads=2, d=8)
    assert explicit_result["peak_bytes"] >= explicit_result["map_bytes"]  # the map is allocated at least once


def test_loglog_slope_and_timing():
    assert loglog_slope([1, 2, 4, 8], [3, 12, 48, 192]) == pytest.approx(2.0)
    calls = []
    times = interleaved_medians([lambda: calls.append("a"), lambda: calls.append("b")], repeats=3, warmup=1)
    assert len(times) == 2 and all(t >= 0 for t in times) and calls == ["a", "b"] * 4


# ---------------------------------------------------------------- devices

@pytest.mark.parametrize("recompute", [False, True])
def test_tiled_attention_on_every_device(any_device, recompute):
    if recompute and simulated(any_device):
        pytest.skip("recomputation (torch.utils.checkpoint) saves CUDA's random state: a real GPU is needed")
    dtype = torch.float32
    q, k, v = (randn(2, 2, 13, 8, seed=s, dtype=dtype, device=any_device, grad=True) for s in range(3))
    lens = torch.tensor([5, 13], device=any_device)
    out, lse = tiled_attention(q, k, v, lens, causal=True, block_size_q=4, block_size_k=5, recompute=recompute)
    assert out.device.type == any_device.type and lse.device.type == any_device.type
    want = explicit(q, k, v, lens, causal=True)
    assert_close(out, want)
    for g, w in zip(torch.autograd.grad(out.sum(), (q, k, v)), torch.autograd.grad(want.sum(), (q, k, v))):
        assert_close(g, w)
    assert_close(online_softmax(q, block_size=3), torch.softmax(q, -1))


def test_attention_memory_on_every_device(any_device):
    if simulated(any_device):
        pytest.skip("this measures CUDA's allocator: a real GPU is needed")
    result = attention_memory(lambda q, k, v: tiled_attention(q, k, v, recompute=True)[0], 64, heads=1, d=8,
                              device=any_device)
    assert result["saved_bytes"] == (4 * 64 * 8 + 64) * 4
    assert result["peak_bytes"] > 0
