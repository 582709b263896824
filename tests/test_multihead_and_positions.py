"""Multi-head attention and positional encodings against d2l, torch.nn.MultiheadAttention and the
formulas written out by hand."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch_reference import copy_into_torch_attention

from attn_utils.masking import causal_mask, masked_softmax
from attn_utils.multihead import MultiHeadAttention, merge_heads, split_heads, transpose_output, transpose_qkv
from attn_utils.positional import (
    LearnedPositionalEncoding,
    PositionalEncoding,
    relative_shift_matrix,
    sinusoidal_encoding,
)
from attn_utils.tolerance import assert_close

pytestmark = pytest.mark.usefixtures("one_thread")

B, Q, K, D, HEADS = 3, 5, 6, 16, 4


def _inputs(seed=0, q=Q, k=K, d=D):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, q, d, generator=g), torch.randn(B, k, d, generator=g), torch.randn(B, k, d, generator=g)


def _ours(bias=False, seed=0, fused=True):
    torch.manual_seed(seed)
    return MultiHeadAttention(D, HEADS, 0.0, bias, fused=fused).eval()


def _by_hand(mha, queries, keys, values, mask):
    """Multi-head attention head by head, with scalar-free but loop-over-heads code."""
    dh = D // HEADS
    q, k, v = mha.W_q(queries), mha.W_k(keys), mha.W_v(values)
    outs = []
    for h in range(HEADS):
        cols = slice(h * dh, (h + 1) * dh)
        scores = q[..., cols] @ k[..., cols].transpose(1, 2) / math.sqrt(dh)  # (B, Q, K)
        scores = scores.masked_fill(~mask, float("-inf")) if mask is not None else scores
        outs.append(torch.softmax(scores, -1) @ v[..., cols])
    return mha.W_o(torch.cat(outs, -1))


# ----------------------------------------------------------------------------------------------
# Multi-head attention
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("masking", ["none", "lengths", "per-query lengths", "causal", "bool 3-d"])
def test_multihead_equals_the_heads_computed_one_by_one(fused, masking):
    mha = _ours(fused=fused)
    queries, keys, values = _inputs(1)
    lens = torch.tensor([6, 2, 4])
    per_query = torch.tensor([[1, 2, 3, 4, 5], [6, 6, 1, 1, 2], [3, 3, 3, 3, 3]])
    masks = {
        "none": (None, None),
        "lengths": (lens, torch.arange(K) < lens[:, None, None]),
        "per-query lengths": (per_query, torch.arange(K) < per_query[..., None]),
        "causal": (causal_mask(Q, K), causal_mask(Q, K).expand(B, Q, K)),
        "bool 3-d": ((torch.arange(K) < lens[:, None, None]).expand(B, Q, K),
                     (torch.arange(K) < lens[:, None, None]).expand(B, Q, K)),
    }
    valid_lens, mask = masks[masking]
    got = mha(queries, keys, values, valid_lens)
    torch.testing.assert_close(got, _by_hand(mha, queries, keys, values, mask), atol=1e-5, rtol=1e-5)
    weights = mha.attention_weights
    assert weights.shape == (B, HEADS, Q, K)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, HEADS, Q))
    if mask is not None:
        assert bool((weights.masked_select(~mask.unsqueeze(1).expand_as(weights)) == 0).all())


@pytest.mark.parametrize("bias", [False, True])
def test_self_attention_packs_the_projections_into_one_product(bias):
    mha = _ours(bias, seed=12)
    x = _inputs(13, k=Q)[0]
    lens = torch.tensor([5, 1, 3])
    packed = mha(x, x, x, lens)  # the same tensor three times: one (3d, d) matrix product
    separate = mha(x, x.clone(), x.clone(), lens)  # equal values, other tensors: three products
    torch.testing.assert_close(packed, separate, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(packed, _by_hand(mha, x, x, x, torch.arange(Q) < lens[:, None, None]),
                               atol=1e-5, rtol=1e-5)
    packed.sum().backward()
    assert all(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in mha.parameters())


def _d2l_copy(d2l, mha, bias):
    ref = d2l.MultiHeadAttention(D, HEADS, 0.0, bias)
    ref(*_inputs(), None)  # materialise the lazy layers
    ref.load_state_dict(mha.state_dict())
    return ref.eval()


@pytest.mark.parametrize("bias", [False, True])
def test_multihead_equals_d2l_with_the_same_state_dict(d2l, bias):
    mha = _ours(bias, seed=2)
    ref = _d2l_copy(d2l, mha, bias)
    assert set(ref.state_dict()) == set(mha.state_dict())
    queries, keys, values = _inputs(3)
    lens = torch.tensor([6, 2, 4])
    dec_lens = torch.arange(1, Q + 1).repeat(B, 1)  # d2l's causal mask for decoder training
    for valid_lens in (None, lens, dec_lens):
        torch.testing.assert_close(mha(queries, keys, values, valid_lens), ref(queries, keys, values, valid_lens),
                                   atol=1e-5, rtol=1e-5)
        # d2l folds the heads into the batch axis: the same weights as (batch * heads, Q, K)
        torch.testing.assert_close(mha.attention_weights.reshape(B * HEADS, Q, K), ref.attention.attention_weights,
                                   atol=1e-6, rtol=1e-5)
    # and back: d2l's parameters load into ours
    ref2 = d2l.MultiHeadAttention(D, HEADS, 0.0, bias)
    ref2(queries, keys, values, None)
    fresh = MultiHeadAttention(D, HEADS, 0.0, bias)
    fresh.load_state_dict(ref2.state_dict())
    torch.testing.assert_close(fresh(queries, keys, values, lens), ref2(queries, keys, values, lens),
                               atol=1e-5, rtol=1e-5)


def _torch_copy(mha, bias):
    ref = nn.MultiheadAttention(D, HEADS, bias=bias, batch_first=True)
    copy_into_torch_attention(mha, ref)
    return ref.eval()


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("fused", [True, False])
def test_multihead_equals_torch_multihead_attention(bias, fused):
    mha = _ours(bias, seed=4, fused=fused)
    ref = _torch_copy(mha, bias)
    queries, keys, values = _inputs(5)
    lens = torch.tensor([6, 2, 4])
    padding = torch.arange(K) >= lens[:, None]  # torch: True = may NOT attend, (B, K)
    got = mha(queries, keys, values, lens)
    want, want_weights = ref(queries, keys, values, key_padding_mask=padding)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(mha.attention_weights.mean(1), want_weights, atol=1e-6, rtol=1e-5)
    x = queries[:, :, :]  # self-attention with the causal mask
    got = mha(x, x, x, causal_mask(Q, Q))
    want, _ = ref(x, x, x, attn_mask=~causal_mask(Q, Q))
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_causal_masking_leaks_nothing():
    """The gradient of output t with respect to every later input is exactly zero."""
    for fused in (True, False):
        mha = _ours(seed=6, fused=fused)
        x = torch.randn(1, 7, D, requires_grad=True)
        out = mha(x, x, x, causal_mask(7, 7))
        for t in range(7):
            (grad,) = torch.autograd.grad(out[0, t].sum(), x, retain_graph=True)
            assert bool((grad[0, t + 1:] == 0).all()), f"output {t} depends on a later input (fused={fused})"
            assert bool((grad[0, :t + 1].abs().sum(-1) > 0).all()), "output must depend on earlier inputs"


def test_a_sequence_with_no_visible_key_gets_zeros_not_nan():
    mha = _ours(seed=7)
    queries, keys, values = _inputs(8)
    for fused in (True, False):
        mha.attention.fused = fused
        out = mha(queries, keys, values, torch.tensor([0, 3, 6]))
        assert not out.isnan().any()
        torch.testing.assert_close(out[0], mha.W_o(torch.zeros(Q, D)))  # no value read: W_o(0)
        assert bool((mha.attention_weights[0] == 0).all())


def test_head_layouts_round_trip_and_agree_with_d2l(d2l):
    X = torch.arange(2 * 3 * 8, dtype=torch.float32).reshape(2, 3, 8)
    ref = d2l.MultiHeadAttention(8, 4, 0.0)
    torch.testing.assert_close(transpose_qkv(X, 4), ref.transpose_qkv(X))
    torch.testing.assert_close(transpose_output(transpose_qkv(X, 4), 4), X)
    heads = split_heads(X, 4)
    assert heads.shape == (2, 4, 3, 2)
    torch.testing.assert_close(heads[1, 2, 0], X[1, 0, 4:6])  # head 2 holds features 4..5
    torch.testing.assert_close(merge_heads(heads), X)


def test_cross_attention_with_other_input_sizes():
    torch.manual_seed(0)
    mha = MultiHeadAttention(12, 3, 0.0, query_size=5, key_size=7, value_size=9)
    out = mha(torch.randn(2, 4, 5), torch.randn(2, 6, 7), torch.randn(2, 6, 9), torch.tensor([6, 1]))
    assert out.shape == (2, 4, 12)
    assert mha.attention_weights.shape == (2, 3, 4, 6)


def test_dropout_applies_to_the_weights_in_training_only():
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, HEADS, 0.5)
    queries, keys, values = _inputs(9)
    mha.train()
    a, b = mha(queries, keys, values), mha(queries, keys, values)
    assert not torch.allclose(a, b)
    mha.eval()
    torch.testing.assert_close(mha(queries, keys, values), mha(queries, keys, values))


@pytest.mark.parametrize("call, message", [
    (lambda: MultiHeadAttention(10, 3, 0.0), "multiple of num_heads"),
    (lambda: MultiHeadAttention(8, 0, 0.0), "multiple of num_heads"),
    (lambda: MultiHeadAttention(8, 2, 0.0)(torch.randn(2, 3, 5), torch.randn(2, 4, 8), torch.randn(2, 4, 8)),
     "queries must have 8 features"),
    (lambda: MultiHeadAttention(8, 2, 0.0)(torch.randn(2, 3, 8), torch.randn(2, 4, 8), torch.randn(2, 5, 8)),
     "keys and values must come in pairs"),
    (lambda: MultiHeadAttention(8, 2, 0.0)(torch.randn(2, 3, 8), torch.randn(2, 4, 8), torch.randn(2, 4, 8),
                                           torch.tensor([1, 2, 3])),
     "valid_lens has shape"),
    (lambda: MultiHeadAttention(8, 2, 0.0)(torch.randn(2, 3, 8), torch.randn(2, 4, 8), torch.randn(2, 4, 8),
                                           torch.ones(5, 4, dtype=torch.bool)),
     "does not broadcast"),
    (lambda: MultiHeadAttention(0, 1, 0.0), "num_hiddens must be a positive integer, got 0"),
    (lambda: MultiHeadAttention(-4, 2, 0.0), "num_hiddens must be a positive integer, got -4"),
    (lambda: MultiHeadAttention(8, 2, 0.0, query_size=0), "query_size must be a positive integer, got 0"),
    (lambda: MultiHeadAttention(8, 2, 0.0)(*[torch.randn(2, 3, 8, dtype=torch.float64)] * 3),
     r"MultiHeadAttention has torch.float32 weights but got torch.float64 inputs"),
    (lambda: MultiHeadAttention(8, 2, 0.0)(torch.randn(2, 3, 8, dtype=torch.float64),
                                           *[torch.randn(2, 4, 8, dtype=torch.float64)] * 2),
     r"MultiHeadAttention has torch.float32 weights but got torch.float64 inputs"),
    (lambda: MultiHeadAttention(8, 2, 0.0)(*[torch.ones(2, 3, 8, dtype=torch.long)] * 3),
     "queries must be a floating-point tensor, got dtype torch.int64"),
    (lambda: MultiHeadAttention(8, 2, 0.0)(torch.randn(2, 3, 8), torch.randn(2, 4, 8), torch.randn(2, 4, 8),
                                           torch.tensor([1, 5])),
     r"valid_lens must be at most the number of keys, 4, got \[1, 5\]"),
])
def test_bad_input_names_what_was_expected(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_multihead_in_float64_once_converted():
    mha = MultiHeadAttention(8, 2, 0.0).double()
    assert mha(*[torch.randn(2, 3, 8, dtype=torch.float64)] * 3).dtype == torch.float64


@pytest.mark.parametrize("fused", [True, False])
def test_multihead_ignores_nan_in_padded_keys_and_values(fused):
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2, 0.0, fused=fused).eval()
    queries, keys = torch.randn(2, 3, 8), torch.randn(2, 4, 8)
    valid_lens = torch.tensor([2, 4])
    expected = mha(queries, keys, keys, valid_lens)
    corrupt = keys.clone()
    corrupt[0, 2:] = float("nan")  # padding of the first sequence
    torch.testing.assert_close(mha(queries, corrupt, corrupt, valid_lens), expected)
    corrupt[1, 0, 0] = float("nan")  # a key the second sequence does use
    out = mha(queries, corrupt, corrupt, valid_lens)
    torch.testing.assert_close(out[0], expected[0])
    assert out[1].isnan().all()


def test_multihead_on_every_device(any_device):
    mha = _ours(seed=10)
    queries, keys, values = _inputs(11)
    lens = torch.tensor([6, 2, 4])
    want = mha(queries, keys, values, lens)
    mha.to(any_device)
    got = mha(queries.to(any_device), keys.to(any_device), values.to(any_device), lens.to(any_device))
    assert got.device.type == any_device.type
    assert_close(got, want)


# ----------------------------------------------------------------------------------------------
# Positional encodings
# ----------------------------------------------------------------------------------------------

def test_sinusoidal_encoding_is_the_papers_formula():
    P = sinusoidal_encoding(50, 6)
    for p in range(50):
        for i in range(3):
            angle = p / 10000 ** (2 * i / 6)
            assert P[p, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert P[p, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_positional_encoding_equals_d2l_and_adds_with_an_offset(d2l):
    ours, ref = PositionalEncoding(32, 0.0, 100).eval(), d2l.PositionalEncoding(32, 0.0, 100).eval()
    X = torch.randn(2, 40, 32)
    torch.testing.assert_close(ours(X), ref(X), atol=1e-5, rtol=0)
    torch.testing.assert_close(ours(X[:, 10:11], offset=10), ours(X)[:, 10:11])
    assert "P" not in ours.state_dict()  # a fixed table, not a parameter: d2l's state dicts still fit
    assert ours.to(torch.float64).P.dtype == torch.float64


def test_a_fixed_linear_map_shifts_every_position_by_k():
    P = sinusoidal_encoding(200, 16).double()
    for k in (1, 5, 37):
        M = relative_shift_matrix(k, 16).double()
        torch.testing.assert_close(P[:-k] @ M, P[k:], atol=1e-5, rtol=0)
    # and the dot product of two encodings depends only on their offset
    dots = (P[:100] * P[7:107]).sum(-1)
    torch.testing.assert_close(dots, torch.full_like(dots, dots[0].item()), atol=1e-5, rtol=0)


def test_learned_positions_have_the_same_interface():
    torch.manual_seed(0)
    enc = LearnedPositionalEncoding(8, 0.0, max_len=10)
    X = torch.zeros(2, 4, 8)
    torch.testing.assert_close(enc(X)[0], enc.embedding.weight[:4])
    torch.testing.assert_close(enc(X[:, :1], offset=3)[0, 0], enc.embedding.weight[3])
    assert sum(p.numel() for p in enc.parameters()) == 80


def test_both_encodings_return_the_inputs_dtype_and_learned_ones_still_train():
    """float16 X plus float32 positions used to come back float32 from the learned encoding only."""
    for enc in (PositionalEncoding(8, 0.0, 10), LearnedPositionalEncoding(8, 0.0, 10)):
        for dtype in (torch.float16, torch.bfloat16, torch.float64):
            X = torch.zeros(2, 4, 8, dtype=dtype)
            out = enc(X)
            assert out.dtype == dtype, type(enc).__name__
            torch.testing.assert_close(out[0], enc(X.float())[0].to(dtype))
    enc = LearnedPositionalEncoding(8, 0.0, 10)
    enc(torch.zeros(1, 3, 8, dtype=torch.float16)).float().sum().backward()
    torch.testing.assert_close(enc.embedding.weight.grad[:3], torch.ones(3, 8))
    assert enc.embedding.weight.grad[3:].abs().sum() == 0


@pytest.mark.parametrize("call, message", [
    (lambda: PositionalEncoding(7, 0.0), "even"),
    (lambda: sinusoidal_encoding(0, 4), "max_len"),
    (lambda: PositionalEncoding(8, 0.0, max_len=5)(torch.zeros(1, 6, 8)), "max_len=5"),
    (lambda: PositionalEncoding(8, 0.0, max_len=5)(torch.zeros(1, 2, 8), offset=4), "positions 4..5"),
    (lambda: LearnedPositionalEncoding(8, 0.0)(torch.zeros(1, 2, 6)), r"\(batch, steps, 8\)"),
])
def test_positional_errors_name_what_was_expected(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_causal_mask_for_queries_at_the_end():
    torch.testing.assert_close(causal_mask(3, 3), torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]]).bool())
    torch.testing.assert_close(causal_mask(2, 4), torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]]).bool())
    # the mask masked_softmax applies: row i sees keys 0..i
    w = masked_softmax(torch.zeros(1, 3, 3), causal_mask(3, 3))
    torch.testing.assert_close(w[0, 2], torch.full((3,), 1 / 3))


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("Q, K, lengths", [(6, 6, None), (6, 6, [6, 3]), (1, 6, None), (3, 6, [6, 4]),
                                           (6, 4, None), (4, 4, [0, 4])])
def test_causal_equals_the_causal_mask(fused, Q, K, lengths):
    """causal=True is causal_mask (bottom-right) and-ed with the lengths, on the fused path (SDPA's own is_causal
    when nothing else masks and Q = K) and the explicit one, values, weights and gradients; rows that see no
    key (Q > K, or length 0) give zeros."""
    torch.manual_seed(0)
    layer = MultiHeadAttention(8, 2, 0.0, fused=fused).double().eval()
    X = torch.randn(2, K, 8, dtype=torch.double, requires_grad=True)
    queries = X[:, K - Q:] if Q <= K else torch.randn(2, Q, 8, dtype=torch.double)
    lens = None if lengths is None else torch.tensor(lengths)
    mask = causal_mask(Q, K).expand(2, Q, K)
    if lens is not None:
        mask = mask & (torch.arange(K) < lens[:, None, None])
    got = layer(queries, X, X, lens, causal=True)
    weights = layer.attention_weights
    expected = layer(queries, X, X, mask)
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(weights, layer.attention_weights, atol=1e-12, rtol=1e-12)
    g1, = torch.autograd.grad(got.sum(), X)
    g2, = torch.autograd.grad(expected.sum(), X)
    torch.testing.assert_close(g1, g2, atol=1e-12, rtol=1e-12)
    assert got.isfinite().all()
    empty = ~mask.any(-1)  # (2, Q): rows with no key to see
    assert float(got.detach()[empty].abs().sum()) == 0.0


def test_causal_must_be_a_bool():
    layer = MultiHeadAttention(8, 2, 0.0)
    X = torch.randn(1, 3, 8)
    with pytest.raises(ValueError, match="causal must be True or False"):
        layer(X, X, X, causal=causal_mask(3, 3))


def test_positional_encodings_refuse_integer_inputs_and_offsets_that_are_not_ints():
    """An integer X got the encodings cast to its dtype, so sin and cos were truncated to 0 (and 1)."""
    for enc in (PositionalEncoding(4, 0.0, 10), LearnedPositionalEncoding(4, 0.0, 10)):
        with pytest.raises(ValueError, match=r"floating-point X of shape \(batch, steps, 4\), got \(1, 3, 4\) of "
                                             r"dtype torch.int64"):
            enc(torch.ones(1, 3, 4, dtype=torch.long))
        for offset in (1.5, torch.tensor(2), True):
            with pytest.raises(ValueError, match="offset .* must be an int"):
                enc(torch.zeros(1, 3, 4), offset)
        assert torch.equal(enc(torch.zeros(1, 3, 4), 2), enc(torch.zeros(1, 5, 4))[:, 2:])


@pytest.mark.parametrize("k", [float("nan"), float("inf"), "3", None])
def test_the_shift_matrix_refuses_a_shift_that_is_not_a_finite_number(k):
    """A NaN shift gave a matrix of NaN."""
    with pytest.raises(ValueError, match="k .* must be a finite number"):
        relative_shift_matrix(k, 8)


def test_a_bool_number_of_heads_is_named_as_heads():
    with pytest.raises(ValueError, match="must be a multiple of num_heads, a positive int; got num_heads=True"):
        MultiHeadAttention(8, True, 0.0)  # was refused as num_kv_heads, which nobody passed


@pytest.mark.parametrize("bad", [0, -2, True, 2.0])
def test_the_head_reshapes_name_a_number_of_heads_that_is_no_count(bad):
    """0 was a ZeroDivisionError ("integer modulo by zero"), -2 an error about shape [2, 3, -2, -4], True one head."""
    from attn_utils.multihead import repeat_kv_heads

    X = torch.randn(2, 3, 8)
    for call in (lambda: split_heads(X, bad), lambda: transpose_qkv(X, bad), lambda: transpose_output(X, bad),
                 lambda: repeat_kv_heads(X[:, None], bad)):
        with pytest.raises(ValueError, match=f"num_heads must be a positive integer, got {bad!r}"):
            call()
    with pytest.raises(ValueError, match="4 query heads cannot share 0 key/value heads"):
        repeat_kv_heads(torch.zeros(2, 0, 3, 4), 4)
