"""Grouped-query attention, score biases, and the GPT-style model's position schemes, windows and caches,
against computations written out by hand."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F

from attn_utils import CausalLanguageModel, kv_cache_bytes, time_generation
from attn_utils.alibi import alibi_bias
from attn_utils.attention import DotProductAttention
from attn_utils.causal_attention import POSITION_SCHEMES, causal_self_attention
from attn_utils.kv_cache import KVCache
from attn_utils.masking import causal_mask, sliding_window_mask
from attn_utils.multihead import MultiHeadAttention, repeat_kv_heads
from attn_utils.rotary import apply_rotary
from attn_utils.sampling import decode_steps, filled_cache

G = torch.Generator().manual_seed


def gqa_by_hand(layer: MultiHeadAttention, X: torch.Tensor, mask=None, bias=None) -> torch.Tensor:
    """Every query head computed on its own, with its group's key/value head: softmax(q k^T / sqrt(dh) + bias) v."""
    dh, group = layer.head_dim, layer.num_heads // layer.num_kv_heads
    q, k, v = layer.W_q(X), layer.W_k(X), layer.W_v(X)
    outputs = []
    for h in range(layer.num_heads):
        g = h // group  # the key/value head this query head shares
        scores = q[..., h * dh:(h + 1) * dh] @ k[..., g * dh:(g + 1) * dh].transpose(-1, -2) / math.sqrt(dh)
        if bias is not None:
            scores = scores + bias[h]
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        outputs.append(torch.softmax(scores, dim=-1) @ v[..., g * dh:(g + 1) * dh])
    return layer.W_o(torch.cat(outputs, dim=-1))


# --- grouped-query attention -------------------------------------------------------------------------------------

@pytest.mark.parametrize("num_kv_heads", [1, 2, 4])
@pytest.mark.parametrize("fused", [True, False])
def test_gqa_equals_heads_computed_one_by_one_with_shared_key_value_heads(num_kv_heads, fused):
    torch.manual_seed(0)
    layer = MultiHeadAttention(16, 4, 0.0, num_kv_heads=num_kv_heads, fused=fused).double()
    X = torch.randn(2, 5, 16, dtype=torch.float64, generator=G(1))
    assert layer.W_k.weight.shape == layer.W_v.weight.shape == (num_kv_heads * 4, 16)
    torch.testing.assert_close(layer(X, X, X), gqa_by_hand(layer, X))
    mask = causal_mask(5, 5)
    torch.testing.assert_close(layer(X, X, X, mask), gqa_by_hand(layer, X, mask))
    keys, values = layer.project_kv(X, X)
    assert keys.shape == values.shape == (2, num_kv_heads, 5, 4)  # only the shared heads are kept
    assert layer.attention_weights.shape == (2, 4, 5, 5)


def test_gqa_with_as_many_key_value_heads_as_query_heads_is_todays_layer():
    torch.manual_seed(0)
    plain = MultiHeadAttention(12, 3, 0.0)
    grouped = MultiHeadAttention(12, 3, 0.0, num_kv_heads=3)
    assert {k: v.shape for k, v in plain.state_dict().items()} == {k: v.shape for k, v in grouped.state_dict().items()}
    grouped.load_state_dict(plain.state_dict())
    X = torch.randn(2, 4, 12, generator=G(2))
    torch.testing.assert_close(grouped(X, X, X), plain(X, X, X), rtol=0, atol=0)


@pytest.mark.skipif("enable_gqa" not in (F.scaled_dot_product_attention.__doc__ or ""),
                    reason="this torch has no enable_gqa in scaled_dot_product_attention")
@pytest.mark.parametrize("num_kv_heads", [1, 2])
def test_gqa_equals_torch_sdpa_with_enable_gqa(num_kv_heads):
    torch.manual_seed(0)
    layer = MultiHeadAttention(16, 4, 0.0, num_kv_heads=num_kv_heads).double()
    X = torch.randn(3, 6, 16, dtype=torch.float64, generator=G(3))
    q, (k, v) = layer.project_q(X), layer.project_kv(X, X)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)  # (batch, heads, n, dh)
    want = layer.W_o(want.transpose(1, 2).reshape(3, 6, 16))
    torch.testing.assert_close(layer(X, X, X, causal_mask(6, 6)), want)


def test_repeat_kv_heads_gives_each_query_head_its_groups_head():
    X = torch.arange(2 * 3).reshape(1, 2, 3, 1).float()  # 2 key/value heads
    out = repeat_kv_heads(X, 6)  # groups of 3: heads 0-2 read head 0, heads 3-5 read head 1
    assert out.shape == (1, 6, 3, 1)
    assert [out[0, h, 0, 0].item() for h in range(6)] == [0, 0, 0, 3, 3, 3]
    with pytest.raises(ValueError, match="equal groups"):
        repeat_kv_heads(X, 5)


@pytest.mark.parametrize("bad", [0, 3, 2.0, True, -1])
def test_gqa_rejects_key_value_heads_that_do_not_divide_the_heads(bad):
    with pytest.raises(ValueError, match="num_kv_heads must be a positive int that divides num_heads=4"):
        MultiHeadAttention(16, 4, 0.0, num_kv_heads=bad)


def test_attend_heads_names_the_shapes_it_expected():
    layer = MultiHeadAttention(16, 4, 0.0, num_kv_heads=2)
    q = torch.randn(1, 4, 3, 4)
    with pytest.raises(ValueError, match=r"projected keys must be \(batch, 2 heads, n, 4\), got \(1, 4, 3, 4\)"):
        layer.attend_heads(q, q, q)


# --- a bias added to the scores -------------------------------------------------------------------------------------

@pytest.mark.parametrize("fused", [True, False])
def test_dot_product_attention_adds_the_bias_before_the_softmax_and_keeps_masks(fused):
    q, k, v = (torch.randn(2, 3, 5, 4, dtype=torch.float64, generator=G(i)) for i in range(3))
    bias = alibi_bias(3, 5, 5).double()  # (heads, Q, K)
    mask = causal_mask(5, 5)
    layer = DotProductAttention(0.0, fused=fused)
    got = layer(q, k, v, mask, bias)
    scores = (q @ k.transpose(-1, -2) / 2 + bias).masked_fill(~mask, float("-inf"))
    torch.testing.assert_close(got, torch.softmax(scores, -1) @ v)
    torch.testing.assert_close(layer.attention_weights, torch.softmax(scores, -1))
    assert float(layer.attention_weights[..., 0, 1:].abs().max()) == 0.0  # the mask still wins over the bias


@pytest.mark.parametrize("bias", [torch.tensor(0.7), torch.tensor([0.3]), torch.tensor([0.0, -1.0, 2.0, 0.5, 1.5])],
                         ids=["0-d", "(1,)", "(K,)"])
@pytest.mark.parametrize("heads", [False, True])
@pytest.mark.parametrize("masking", ["none", "lengths", "causal"])
def test_the_fused_path_takes_a_0d_or_1d_bias_as_the_explicit_path_does(bias, heads, masking):
    """Such a bias broadcasts to the scores (the docstring's promise, kept by the explicit path), but SDPA
    took it as the mask itself and raised an IndexError ("Dimension specified as -2")."""
    batch = (2, 3) if heads else (2,)  # (batch, heads) or (batch,)
    q = torch.randn(*batch, 4, 8, dtype=torch.float64, generator=G(1))  # 4 queries, 5 keys
    k, v = (torch.randn(*batch, 5, 8, dtype=torch.float64, generator=G(i)) for i in (2, 3))
    lens = torch.tensor([5, 2]) if masking == "lengths" else None
    causal = masking == "causal"
    fused, explicit = DotProductAttention(0.0, fused=True), DotProductAttention(0.0, fused=False)
    got = fused(q, k, v, lens, bias.double(), causal=causal)
    want = explicit(q, k, v, lens, bias.double(), causal=causal)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    torch.testing.assert_close(fused.attention_weights, explicit.attention_weights, rtol=0, atol=1e-12)
    scores = q @ k.transpose(-1, -2) / math.sqrt(8) + bias.double()  # and both are the hand computation
    if lens is not None:
        scores = scores.masked_fill(torch.arange(5) >= lens.reshape(2, *[1] * (q.dim() - 1)), float("-inf"))
    if causal:
        scores = scores.masked_fill(~causal_mask(4, 5), float("-inf"))
    torch.testing.assert_close(got, torch.softmax(scores, -1) @ v, rtol=0, atol=1e-12)


def test_a_bias_of_the_wrong_shape_or_type_is_named():
    q = torch.randn(1, 2, 3, 4)
    for layer in (DotProductAttention(0.0), DotProductAttention(0.0, fused=False)):
        with pytest.raises(ValueError, match=r"bias of shape \(5, 5\) does not broadcast to scores of shape"):
            layer(q, q, q, attn_bias=torch.zeros(5, 5))
        with pytest.raises(ValueError, match="bias must be a floating-point tensor"):
            layer(q, q, q, attn_bias=torch.zeros(3, 3, dtype=torch.long))


# --- causal self-attention with positions inside it ----------------------------------------------------------------

def test_rotary_self_attention_rotates_queries_and_keys_by_their_absolute_positions():
    torch.manual_seed(0)
    layer = MultiHeadAttention(8, 2, 0.0).double()
    X = torch.randn(1, 4, 8, dtype=torch.float64, generator=G(4))
    cache = KVCache.empty(1, 1, 2, 4, dtype=torch.float64).with_length(10).extended(4)  # tokens 10..13
    out = causal_self_attention(layer, X, cache, 0, position_scheme="rotary")
    keys = cache.keys[0]
    where = torch.arange(10, 14)
    q = apply_rotary(layer.project_q(X), where)
    k = apply_rotary(layer.project_kv(X, X)[0], where)
    torch.testing.assert_close(keys, k)
    scores = (q @ k.transpose(-1, -2) / 2).masked_fill(~causal_mask(4, 4), float("-inf"))
    heads = torch.softmax(scores, -1) @ layer.project_kv(X, X)[1]  # (1, 2, 4, 4)
    torch.testing.assert_close(out, layer.W_o(heads.transpose(1, 2).reshape(1, 4, 8)))


def test_alibi_self_attention_equals_scores_plus_the_paper_bias():
    torch.manual_seed(0)
    layer = MultiHeadAttention(8, 2, 0.0).double()
    X = torch.randn(2, 6, 8, dtype=torch.float64, generator=G(5))
    out = causal_self_attention(layer, X, position_scheme="alibi")
    torch.testing.assert_close(out, gqa_by_hand(layer, X, causal_mask(6, 6), alibi_bias(2, 6, 6).double()))


def test_sliding_window_self_attention_sees_only_the_window_and_keeps_a_rolling_cache():
    torch.manual_seed(0)
    layer = MultiHeadAttention(8, 2, 0.0).double()
    X = torch.randn(1, 7, 8, dtype=torch.float64, generator=G(6))
    cache = KVCache.empty(1, 1, 2, 4, dtype=torch.float64).extended(7)
    out = causal_self_attention(layer, X, cache, 0, window=3)
    torch.testing.assert_close(out, gqa_by_hand(layer, X, sliding_window_mask(7, 7, 3)))
    kept = cache.kept(3)
    assert kept.keys.shape == kept.values.shape == (1, 1, 2, 3, 4)  # only the last 3 positions are kept
    torch.testing.assert_close(kept.keys[0], layer.project_kv(X, X)[0][:, :, -3:])


def test_unknown_position_schemes_and_windows_are_named():
    layer = MultiHeadAttention(8, 2, 0.0)
    X = torch.randn(1, 2, 8)
    with pytest.raises(ValueError, match="position_scheme must be one of"):
        causal_self_attention(layer, X, position_scheme="relative")
    with pytest.raises(ValueError, match="window must be None"):
        causal_self_attention(layer, X, window=0)
    with pytest.raises(ValueError, match="position_scheme must be one of"):
        CausalLanguageModel(10, position_scheme="rope")


# --- the GPT-style model with today's options --------------------------------------------------------------------

def modern_lm(device="cpu", **options):
    torch.manual_seed(0)
    return CausalLanguageModel(30, 16, 32, 4, 2, max_len=64, **options).to(device=device, dtype=torch.float64).eval()


OPTIONS = [dict(position_scheme=p) for p in POSITION_SCHEMES] + [
    dict(position_scheme="rotary", num_kv_heads=2), dict(position_scheme="alibi", num_kv_heads=1),
    dict(position_scheme="learned", num_kv_heads=1), dict(position_scheme="rotary", window=3),
    dict(position_scheme="alibi", window=4, num_kv_heads=2), dict(position_scheme="sinusoidal", window=1)]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
@pytest.mark.parametrize("chunk", [1, 3])
def test_cached_decoding_equals_recomputation_for_every_option(options, chunk, any_device):
    model = modern_lm(any_device, **options)
    X = torch.randint(30, (2, 11), generator=G(7)).to(any_device)
    with torch.no_grad():
        full, cache_full = model(X)
        cache, pieces = None, []
        for i in range(0, 11, chunk):
            logits, cache = model(X[:, i:i + chunk], cache)
            pieces.append(logits)
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=0, atol=1e-10)
    kept = 11 if options.get("window") is None else options["window"]
    assert cache.keys.shape == (2, 2, options.get("num_kv_heads", 4), kept, 4) and cache.length == 11
    torch.testing.assert_close(cache.keys, cache_full.keys[:, :, :, -kept:], rtol=0, atol=1e-10)


@pytest.mark.parametrize("positions", ["rotary", "alibi"])
def test_relative_positions_give_the_same_logits_at_any_offset_and_past_max_len(positions):
    model = modern_lm(position_scheme=positions)  # max_len=64 does not bound them
    X = torch.randint(30, (2, 9), generator=G(8))
    with torch.no_grad():
        at_zero, _ = model(X)
        far = model.empty_cache(2).with_length(1000)  # as if 1,000 tokens had scrolled out of a window
        at_1000, _ = model(X, far)
        long_logits, _ = model(torch.randint(30, (1, 150), generator=G(9)))
    torch.testing.assert_close(at_1000, at_zero, rtol=0, atol=1e-9)
    assert long_logits.shape == (1, 150, 30) and bool(torch.isfinite(long_logits).all())


def test_absolute_positions_change_the_logits_with_the_offset_and_stop_at_max_len():
    model = modern_lm(position_scheme="learned")
    X = torch.randint(30, (2, 9), generator=G(8))
    with torch.no_grad():
        at_zero, _ = model(X)
        at_50, _ = model(X, model.empty_cache(2).with_length(50))
    assert float((at_50 - at_zero).abs().max()) > 1e-3
    with pytest.raises(ValueError, match="max_len=64"):
        model(X, model.empty_cache(2).with_length(60))


def test_the_window_limits_what_each_position_sees_in_every_block():
    model = modern_lm(position_scheme="rotary", window=3)
    with torch.no_grad():
        model(torch.randint(30, (1, 8), generator=G(10)))
    for weights in model.attention_weights:  # (1, heads, 8, 8)
        assert float(weights.masked_fill(sliding_window_mask(8, 8, 3), 0).abs().max()) == 0.0
        torch.testing.assert_close(weights.sum(-1), torch.ones(1, 4, 8, dtype=torch.float64))


def test_a_plain_key_value_pair_is_still_a_cache_and_bad_caches_are_named():
    model = modern_lm(num_kv_heads=2)
    X = torch.randint(30, (2, 5), generator=G(11))
    with torch.no_grad():
        full, cache = model(X)
        pair_logits, _ = model(X[:, 4:], (cache.keys[:, :, :, :4], cache.values[:, :, :, :4]))
    torch.testing.assert_close(pair_logits, full[:, 4:], rtol=0, atol=1e-10)
    with pytest.raises(ValueError, match=r"kv_heads=2, P, d / heads\); got \(2, 2, 4, 0, 4\)"):
        model(X, (torch.zeros(2, 2, 4, 0, 4), torch.zeros(2, 2, 4, 0, 4)))
    with pytest.raises(ValueError, match="length .* must be an int of at least its 4 positions"):
        model(X[:, :1], KVCache(cache.keys[:, :, :, :4], cache.values[:, :, :, :4], 3))
    with pytest.raises(ValueError, match="cache must be a KVCache"):
        model(X, [cache.keys, cache.values])
    with pytest.raises(ValueError, match="cache must be a KVCache"):  # a translator's cache is not a language model's
        model(X, KVCache(cache.keys, cache.values, cross_keys=cache.keys, cross_values=cache.values))


def test_time_generation_counts_the_shared_heads_and_the_window_in_the_cache_bytes():
    cases = [(dict(), 4, 9), (dict(num_kv_heads=1), 1, 9), (dict(window=4, position_scheme="rotary"), 4, 4)]
    for options, heads, kept in cases:
        model = modern_lm(**options)
        row, = time_generation(model, [8], prompt_len=2, repeats=1)
        assert row["cache_bytes"] == 2 * 2 * heads * kept * 4 * 8  # keys and values, 2 blocks, float64


@pytest.mark.parametrize("options, kept", [(dict(), 12), (dict(num_kv_heads=1), 12), (dict(window=5), 5)])
def test_a_filled_cache_has_the_shape_of_length_tokens_and_decodes_on(options, kept):
    model = modern_lm(position_scheme="rotary", **options)
    cache = filled_cache(model, 12, batch=2)
    heads = options.get("num_kv_heads", 4)
    assert cache.keys.shape == cache.values.shape == (2, 2, heads, kept, 4) and cache.length == 12
    assert cache.nbytes == kv_cache_bytes(2, heads, kept, 4, batch=2, dtype=torch.float64)
    after = decode_steps(model, cache, steps=3)
    assert after.length == 15 and after.keys.shape[3] == (15 if "window" not in options else 5)
    with pytest.raises(ValueError, match="length must be a non-negative integer, got -1"):
        filled_cache(model, -1)


@pytest.mark.parametrize("fused", [True, False])
def test_a_scale_that_is_not_a_finite_number_is_named_on_both_paths(fused):
    """A NaN scale gave NaN on the explicit path and zeros on the fused one."""
    for bad in (float("nan"), float("inf"), "2", True):
        with pytest.raises(ValueError, match="scale must be None .* or a finite number"):
            DotProductAttention(0.0, scale=bad, fused=fused)
    q = torch.randn(2, 3, 4, generator=G(0))
    torch.testing.assert_close(DotProductAttention(0.0, scale=0.0, fused=fused)(q, q, q), q.mean(-2, keepdim=True)
                               .expand(2, 3, 4))  # scale 0: equal weights, the mean of the values
    with pytest.raises(ValueError, match="fused must be True or False, got 'no'"):
        DotProductAttention(0.0, fused="no")  # read as True


def test_the_fused_function_names_a_bad_scale():
    from attn_utils.attention import fused_dot_product_attention

    q = torch.randn(2, 3, 4, generator=G(0))
    with pytest.raises(ValueError, match="scale must be None"):
        fused_dot_product_attention(q, q, q, scale=float("nan"))


def test_the_other_scaled_scores_name_a_factor_that_is_not_a_finite_number():
    """A NaN beta or scale made every weight NaN."""
    from attn_utils.attention import CosineAttention, DistanceAttention, GeneralAttention

    for make, name in [(lambda v: CosineAttention(beta=v), "beta"), (lambda v: CosineAttention(v, learn_beta=True),
                                                                     "beta"),
                       (lambda v: GeneralAttention(scale=v), "scale"), (lambda v: DistanceAttention(scale=v), "scale")]:
        for bad in (float("nan"), float("inf"), None, "1"):
            with pytest.raises(ValueError, match=f"{name} must be a finite number, got"):
                make(bad)
        assert make(0.5) is not None
