"""The GPT- and BERT-style language models, sampling, generation with a key-value cache, and BERT's masking."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F

from attn_utils import (
    IGNORE_INDEX,
    CausalLanguageModel,
    MaskedLanguageModel,
    TransformerDecoderBlock,
    bert_mask,
    generate,
    kv_cache_bytes,
    mask_tokens,
    sampling_probs,
    time_generation,
    train_language_model,
)
from attn_utils.kv_cache import KVCache
from attn_utils.losses import causal_lm_loss, masked_lm_loss
from attn_utils.sampling import sample_from, top_k_filter
from attn_utils.tolerance import assert_close
from attn_utils.transformer import make_transformer


def small_lm(vocab=30, device="cpu", dtype=torch.float64, **kwargs):
    torch.manual_seed(0)
    return CausalLanguageModel(vocab, 16, 32, 4, 2, max_len=64, **kwargs).to(device=device, dtype=dtype).eval()


# --- the decoder block without cross-attention -------------------------------------------------------------------

def test_block_without_cross_attention_has_no_second_attention_and_checks_its_arguments():
    blk = TransformerDecoderBlock(8, 16, 2, 0.0, norm_first=True, cross_attention=False)
    assert not hasattr(blk, "attention2") and not hasattr(blk, "addnorm2")
    X = torch.randn(1, 3, 8)
    cache = KVCache.empty(1, 1, 2, 4).extended(3)
    out = blk(X, cache, 0)
    assert out.shape == (1, 3, 8) and cache.keys.shape == (1, 1, 2, 3, 4)  # the block wrote its keys
    with pytest.raises(ValueError, match="cross_attention=False"):
        blk(X, cross=(torch.zeros(1, 2, 5, 4), torch.zeros(1, 2, 5, 4)))
    with pytest.raises(ValueError, match="cross_attention=True"):
        TransformerDecoderBlock(8, 16, 2, 0.0)(X)


def test_block_without_cross_attention_equals_a_hand_written_pre_norm_block():
    torch.manual_seed(0)
    blk = TransformerDecoderBlock(8, 16, 2, 0.0, norm_first=True, cross_attention=False).double()
    X = torch.randn(2, 5, 8, dtype=torch.float64)
    mask = torch.ones(5, 5, dtype=torch.bool).tril()
    attn = torch.nn.MultiheadAttention(8, 2, bias=False, batch_first=True).double()
    a = blk.attention1
    with torch.no_grad():
        attn.in_proj_weight.copy_(torch.cat([a.W_q.weight, a.W_k.weight, a.W_v.weight]))
        attn.out_proj.weight.copy_(a.W_o.weight)
        x = blk.addnorm1.ln(X)
        H = X + attn(x, x, x, attn_mask=~mask, need_weights=False)[0]
        expected = H + blk.ffn(blk.addnorm3.ln(H))
        got = blk(X)
    torch.testing.assert_close(got, expected)


# --- the causal language model -------------------------------------------------------------------------------------

def test_tied_weights_and_no_cross_attention():
    model = small_lm()
    assert model.dense.weight is model.embedding.weight
    assert model.dense.bias is None
    assert all(not blk.cross_attention for blk in model.blks)
    names = {n for n, _ in model.named_parameters()}
    assert "dense.weight" not in names  # counted once, as the embedding


@pytest.mark.parametrize("t", [0, 3, 6])
def test_logits_at_t_do_not_depend_on_later_tokens(t):
    model = small_lm()
    X = torch.randint(30, (3, 8), generator=torch.Generator().manual_seed(1))
    changed = X.clone()
    changed[:, t + 1:] = (changed[:, t + 1:] + 7) % 30
    with torch.no_grad():
        a, _ = model(X)
        b, _ = model(changed)
    torch.testing.assert_close(a[:, :t + 1], b[:, :t + 1], rtol=0, atol=1e-12)
    if t < 7:
        assert (a[:, t + 1:] - b[:, t + 1:]).abs().max() > 1e-3  # later positions do change


@pytest.mark.parametrize("length", [1, 5, 12])
@pytest.mark.parametrize("chunk", [1, 3])
def test_cached_step_by_step_logits_equal_full_recomputation(length, chunk):
    model = small_lm()
    X = torch.randint(30, (3, length), generator=torch.Generator().manual_seed(length))
    with torch.no_grad():
        full, cache_full = model(X)
        cache, pieces = None, []
        for i in range(0, length, chunk):  # feed `chunk` tokens after the i cached ones
            logits, cache = model(X[:, i:i + chunk], cache)
            pieces.append(logits)
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=0, atol=1e-12)
    torch.testing.assert_close(cache.keys, cache_full.keys, rtol=0, atol=1e-12)
    assert cache.keys.shape == (2, 3, 4, length, 4) and cache.length == cache_full.length == length


def test_forward_bad_inputs_raise_value_errors():
    model = small_lm()
    with pytest.raises(ValueError, match="integer tensor"):
        model(torch.randn(2, 3))
    with pytest.raises(ValueError, match=r"cache must hold .*batch=2.*got \(2, 5, 4, 0, 4\)"):
        model(torch.zeros(2, 3, dtype=torch.long), model.empty_cache(5))
    with pytest.raises(ValueError, match="max_len"):
        model(torch.zeros(1, 65, dtype=torch.long))
    with pytest.raises(ValueError, match="at least 2 steps"):
        causal_lm_loss(model, torch.zeros(2, 1, dtype=torch.long), pad=0)
    with pytest.raises(ValueError, match="every target is padding"):
        causal_lm_loss(model, torch.tensor([[1, 0, 0]]), pad=0)


@pytest.mark.parametrize("model_kind", ["causal", "masked", "translator encoder", "translator decoder"])
def test_token_ids_outside_the_vocabulary_or_not_int64_int32_are_named(model_kind):
    """They reached nn.Embedding: an IndexError ("index out of range in self") or a RuntimeError about
    "indices" on the CPU, a device-side assert on a GPU."""
    torch.manual_seed(0)
    if model_kind == "causal":
        model = small_lm()
        run = model
    elif model_kind == "masked":
        model = MaskedLanguageModel(30, 16, 32, 4, 1).eval()
        run = model
    else:
        model = make_transformer(30, 30, 16, 32, 4, 1).eval()
        good = torch.tensor([[1, 2, 3]])
        run = (lambda X: model(X, good, None)) if model_kind == "translator encoder" else \
            (lambda X: model(good, X, None))
    assert run(torch.tensor([[0, 29, 5]])) is not None
    assert run(torch.tensor([[0, 29, 5]], dtype=torch.int32)) is not None
    for ids, got in [([[1, 30]], "ids from 1 to 30"), ([[-1, 4]], "ids from -1 to 4")]:
        with pytest.raises(ValueError, match=rf"token ids must be integers in \[0, vocab_size=30\), got {got}"):
            run(torch.tensor(ids))
    for dtype in (torch.bool, torch.uint8, torch.int16):
        with pytest.raises(ValueError, match=r"token ids must be integers|integer tensor of token indices"):
            run(torch.ones(1, 3, dtype=dtype))
    with pytest.raises(ValueError, match="integer tensor of token indices"):
        run(torch.ones(1, 3))


def test_bool_tokens_are_not_token_indices():
    with pytest.raises(ValueError, match=r"prompt must be an integer tensor of token indices .*torch.bool"):
        generate(small_lm(), torch.ones(1, 2, dtype=torch.bool), 3)


def test_zero_new_tokens_are_named_not_a_view_error():
    model = small_lm()
    for cache in (None, model(torch.tensor([[1, 2]]))[1]):
        with pytest.raises(ValueError, match=r"at least one new token .*got shape \(1, 0\)"):
            model(torch.zeros(1, 0, dtype=torch.long), cache)


@pytest.mark.parametrize("make, name", [
    (lambda: CausalLanguageModel(0), "vocab_size"), (lambda: CausalLanguageModel(-3), "vocab_size"),
    (lambda: CausalLanguageModel(True), "vocab_size"), (lambda: CausalLanguageModel(10, ffn_num_hiddens=0),
                                                        "ffn_num_hiddens"),
    (lambda: CausalLanguageModel(10, num_blks=0), "num_blks"), (lambda: CausalLanguageModel(10, num_heads=0),
                                                                "num_heads"),
    (lambda: CausalLanguageModel(10, num_hiddens=12, num_heads=4, position_scheme="rotary"), "d / heads must be even"),
    (lambda: MaskedLanguageModel(0), "vocab_size"), (lambda: MaskedLanguageModel(10, num_blks=-1), "num_blks"),
    (lambda: make_transformer(0, 5), "src_vocab_size"), (lambda: make_transformer(5, 0), "tgt_vocab_size"),
    (lambda: make_transformer(5, 5, ffn_num_hiddens=0), "ffn_num_hiddens"),
    (lambda: make_transformer(5, 5, num_blks=0), "num_blks"),
])
def test_non_positive_model_sizes_are_named(make, name):
    """They built models of an empty vocabulary, an FFN of no hidden unit or no block at all."""
    with pytest.raises(ValueError, match=name):
        make()


def test_bert_masking_refuses_a_bool_probability_and_float_replacements():
    tokens = torch.tensor([[7, 8, 9]])
    draws = dict(maskable=tokens > 0, choose=torch.rand(1, 3), action=torch.rand(1, 3))
    with pytest.raises(ValueError, match=r"mask_prob must be a number in \[0, 1\], got True"):
        bert_mask(tokens, random_tokens=tokens, mask_id=4, mask_prob=True, **draws)  # masked every token
    with pytest.raises(ValueError, match="random_tokens must be an integer tensor"):
        bert_mask(tokens, random_tokens=tokens + 0.7, mask_id=4, **draws)  # truncated silently
    with pytest.raises(ValueError, match="mask_id must be a non-negative integer"):
        bert_mask(tokens, random_tokens=tokens, mask_id=4.5, **draws)
    with pytest.raises(ValueError, match="vocab_size must be a positive integer"):
        mask_tokens(tokens, tokens > 0, 4, True)


def test_causal_lm_loss_is_the_mean_over_real_targets():
    model = small_lm()
    tokens = torch.tensor([[1, 5, 6, 2, 0], [1, 7, 2, 0, 0]])
    with torch.no_grad():
        logits, _ = model(tokens[:, :-1])
        logp = torch.log_softmax(logits, dim=-1)
        by_hand = -(logp[0, 0, 5] + logp[0, 1, 6] + logp[0, 2, 2] + logp[1, 0, 7] + logp[1, 1, 2]) / 5
        torch.testing.assert_close(causal_lm_loss(model, tokens, pad=0).double(), by_hand)


# --- sampling --------------------------------------------------------------------------------------------------------

def test_top_k_keeps_exactly_k_and_breaks_ties_by_lower_index():
    logits = torch.tensor([[1.0, 3.0, 3.0, 0.0, 3.0], [5.0, 4.0, 3.0, 2.0, 1.0]])
    kept = torch.isfinite(top_k_filter(logits, 2))
    assert kept.tolist() == [[False, True, True, False, False], [True, True, False, False, False]]
    assert torch.isfinite(top_k_filter(logits, 9)).all()
    torch.testing.assert_close(top_k_filter(logits, 5), logits)


def test_sampling_probs_equals_softmax_of_logits_over_t_and_renormalised_top_k():
    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0]])
    for T in (0.3, 1.0, 2.5):
        torch.testing.assert_close(sampling_probs(logits, T), torch.softmax(logits / T, dim=-1))
    p = sampling_probs(logits, 0.5, top_k=2)
    e = torch.exp(torch.tensor([2.0, 1.0]) / 0.5)
    torch.testing.assert_close(p[0, :2], e / e.sum())
    assert p[0, 2:].abs().max() == 0


def test_temperature_zero_is_argmax_and_tiny_temperatures_do_not_overflow():
    logits = torch.tensor([[1000.0, 999.0, -5.0], [0.0, 2.0, 2.0]])
    greedy = sampling_probs(logits, 0.0)
    assert greedy.tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]  # the first maximum among ties
    tiny = sampling_probs(logits, 1e-30)
    assert not torch.isnan(tiny).any()
    assert tiny[0].tolist() == [1.0, 0.0, 0.0] and tiny[1].tolist() == [0.0, 0.5, 0.5]
    torch.testing.assert_close(sampling_probs(logits, 1.0, top_k=1), F.one_hot(logits.argmax(-1), 3).float())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("temperature", [1e-300, 1e-46, 5e-324])
def test_temperatures_that_are_zero_in_the_logits_dtype_give_the_limit_not_nan(dtype, temperature):
    """float32 turns T < 7e-46 into 0, and 0 / 0 made every probability NaN (sampling then drew the last
    token). The limit of T -> 0+ shares the mass equally among the maxima, as T = 1e-30 already did."""
    logits = torch.tensor([[1.0, 3.0, 3.0, 0.0, float("-inf")], [-2.0, 5.0, 4.0, 4.5, 0.0]], dtype=dtype)
    probs = sampling_probs(logits, temperature)
    assert probs.dtype == dtype
    assert probs.tolist() == [[0.0, 0.5, 0.5, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0, 0.0]]
    assert sampling_probs(logits, temperature, top_k=3).tolist() == probs.tolist()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
@pytest.mark.parametrize("top_k", [None, 4])
def test_ordinary_temperatures_give_the_same_bits_as_before(dtype, top_k):
    """The softmax of (logits - max) / T, bit for bit: what the stored notebooks sampled from."""
    logits = (4 * torch.randn(6, 50, generator=torch.Generator().manual_seed(3))).to(dtype)
    logits[0, 7] = float("-inf")
    kept = logits if top_k is None else top_k_filter(logits, top_k)
    for T in (0.5, 1.0, 2.0, 1e-6, 1e-30):
        before = torch.softmax((kept - kept.max(dim=-1, keepdim=True).values) / T, dim=-1)
        assert torch.equal(sampling_probs(logits, T, top_k), before), T


def test_generate_at_a_temperature_that_is_zero_in_float32_is_greedy():
    model = small_lm(dtype=torch.float32)
    prompt = torch.randint(30, (3, 2), generator=torch.Generator().manual_seed(4))
    greedy = generate(model, prompt, 8, temperature=0.0)
    tiny = generate(model, prompt, 8, temperature=1e-300, generator=torch.Generator().manual_seed(0))
    assert torch.equal(tiny, greedy)  # it drew token 29, the last, every time


@pytest.mark.parametrize("name, value", [("use_cache", "no"), ("use_cache", 0), ("use_cache", None),
                                         ("return_logits", "yes"), ("return_logits", 1)])
def test_generate_refuses_switches_that_are_not_booleans(name, value):
    """use_cache="no" is a truthy string: it used the cache, the opposite of what was asked."""
    model = small_lm(dtype=torch.float32)
    with pytest.raises(ValueError, match=f"{name} must be True or False, got {value!r}"):
        generate(model, torch.zeros(1, 2, dtype=torch.long), 3, **{name: value})


def test_infinite_logits_are_refused_rather_than_sampled_as_nan():
    with pytest.raises(ValueError, match=r"no NaN or \+inf"):
        sampling_probs(torch.tensor([[float("inf"), 0.0, 1.0]]))
    with pytest.raises(ValueError, match="logits must be a float tensor"):
        sampling_probs([[0.0, 1.0]])


@pytest.mark.parametrize("probs", [torch.zeros(1, 3), torch.tensor([[0.2, float("nan"), 0.8]]),
                                   torch.tensor([[0.5, -0.1, 0.6]]), torch.tensor([[float("inf"), 0.0, 1.0]])],
                         ids=["zeros", "nan", "negative", "inf"])
def test_sample_from_refuses_rows_it_cannot_draw_from(probs):
    """Such rows drew the last index (of probability 0, or NaN) without a word."""
    with pytest.raises(ValueError, match="finite and non-negative, with a positive sum"):
        sample_from(torch.cat([torch.tensor([[0.2, 0.3, 0.5]]), probs]), torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=r"float tensor \(batch, vocab\), got shape \(1, 3\), dtype torch.int64"):
        sample_from(torch.tensor([[0, 1, 1]]))


@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf"), "1", None, True])
def test_bad_temperature_raises(bad):
    with pytest.raises(ValueError, match="temperature"):
        sampling_probs(torch.zeros(1, 3), bad)


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "3"])
def test_bad_top_k_raises(bad):
    with pytest.raises(ValueError, match="top_k"):
        sampling_probs(torch.zeros(1, 3), 1.0, bad)


def test_bad_logits_raise():
    with pytest.raises(ValueError, match="NaN"):
        sampling_probs(torch.tensor([[0.0, float("nan")]]))
    with pytest.raises(ValueError, match="finite"):
        sampling_probs(torch.full((1, 3), float("-inf")))
    with pytest.raises(ValueError, match="float"):
        sampling_probs(torch.tensor([[1, 2]]))


def test_sample_frequencies_match_the_distribution_chi_square():
    logits = torch.tensor([1.5, 0.2, -0.3, 0.9, -2.0, 0.0])
    T, n = 0.8, 40_000
    p = torch.softmax(logits / T, dim=-1)
    probs = sampling_probs(logits.expand(n, 6), T)
    draws = sample_from(probs, torch.Generator().manual_seed(0))
    counts = torch.bincount(draws, minlength=6).double()
    chi2 = (((counts - n * p.double()) ** 2) / (n * p.double())).sum().item()
    assert chi2 < 20.5  # the 0.999 quantile of chi-square with 5 degrees of freedom


def test_sample_from_never_draws_a_zero_probability_index():
    probs = sampling_probs(torch.randn(2000, 50, generator=torch.Generator().manual_seed(0)), 1.0, top_k=3)
    draws = sample_from(probs, torch.Generator().manual_seed(1))
    assert (probs.gather(1, draws[:, None]) > 0).all()


def test_sample_from_inverts_the_cdf_by_hand():
    probs = torch.tensor([[0.2, 0.0, 0.5, 0.3]] * 4)
    gen = torch.Generator().manual_seed(5)
    u = torch.rand(4, 1, generator=torch.Generator().manual_seed(5), dtype=torch.float64).squeeze(1).tolist()
    expected = [0 if x < 0.2 else 2 if x < 0.7 else 3 for x in u]
    assert sample_from(probs, gen).tolist() == expected


def test_sample_from_draws_rows_whose_sum_overflows_by_their_proportions():
    """float64 values near 1e308 are finite, but their cumulative sum was inf: every draw was the last index."""
    huge = torch.tensor([[1e308, 1e308, 0.0, 1e308], [0.2, 0.0, 0.5, 0.3]], dtype=torch.float64)
    small = torch.tensor([[1.0, 1.0, 0.0, 1.0], [0.2, 0.0, 0.5, 0.3]], dtype=torch.float64)
    draws = torch.stack([sample_from(huge, gen) for gen in [torch.Generator().manual_seed(s) for s in range(300)]])
    same = torch.stack([sample_from(small, gen) for gen in [torch.Generator().manual_seed(s) for s in range(300)]])
    assert torch.equal(draws, same)  # the same uniform numbers land on the same tokens
    counts = torch.bincount(draws[:, 0], minlength=4)
    assert counts[2] == 0 and (counts[[0, 1, 3]] > 60).all(), counts  # about 100 each, never the zero


# --- generation ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("temperature,top_k", [(0.0, None), (1.0, None), (0.7, 5), (1.3, 1)])
def test_generate_with_and_without_cache_gives_identical_tokens_and_logits(temperature, top_k):
    model = small_lm()
    prompt = torch.randint(30, (3, 4), generator=torch.Generator().manual_seed(0))
    a, la = generate(model, prompt, 15, temperature, top_k, use_cache=True,
                     generator=torch.Generator().manual_seed(7), return_logits=True)
    b, lb = generate(model, prompt, 15, temperature, top_k, use_cache=False,
                     generator=torch.Generator().manual_seed(7), return_logits=True)
    assert torch.equal(a, b) and a.shape == (3, 19) and torch.equal(a[:, :4], prompt)
    torch.testing.assert_close(la, lb, rtol=0, atol=1e-10)


def test_generate_greedy_equals_argmax_of_the_full_forward():
    model = small_lm()
    prompt = torch.tensor([[3, 4]])
    out = generate(model, prompt, 6, temperature=0.0)
    with torch.no_grad():
        for t in range(2, 8):
            logits, _ = model(out[:, :t])
            assert out[0, t] == logits[0, -1].argmax()


def test_generate_same_seed_same_text_different_seed_different_text():
    model = small_lm(dtype=torch.float32)
    prompt = torch.zeros(4, 1, dtype=torch.long)
    a = generate(model, prompt, 20, 1.5, generator=torch.Generator().manual_seed(0))
    b = generate(model, prompt, 20, 1.5, generator=torch.Generator().manual_seed(0))
    c = generate(model, prompt, 20, 1.5, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_generate_bad_inputs_raise():
    model = small_lm()
    with pytest.raises(ValueError, match="at least one token"):
        generate(model, torch.zeros(2, 0, dtype=torch.long), 3)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate(model, torch.zeros(2, 1, dtype=torch.long), -1)
    with pytest.raises(ValueError, match="temperature"):
        generate(model, torch.zeros(2, 1, dtype=torch.long), 3, temperature=-1)
    with pytest.raises(ValueError, match="top_k"):
        generate(model, torch.zeros(2, 1, dtype=torch.long), 3, top_k=0)


def test_generate_restores_training_mode():
    model = small_lm().train()
    generate(model, torch.zeros(1, 1, dtype=torch.long), 2)
    assert model.training


def test_kv_cache_bytes_formula_and_errors():
    assert kv_cache_bytes(2, 4, 10, 8) == 2 * 2 * 4 * 10 * 8 * 4
    assert kv_cache_bytes(48, 25, 1024, 64, batch=3, dtype=torch.float16) == 2 * 48 * 25 * 1024 * 64 * 3 * 2
    model = small_lm(dtype=torch.float32)
    _, cache = model(torch.zeros(2, 10, dtype=torch.long))
    k, v = cache.keys, cache.values
    assert k.numel() * k.element_size() + v.numel() * v.element_size() == kv_cache_bytes(2, 4, 10, 4, batch=2)
    assert cache.nbytes == kv_cache_bytes(2, 4, 10, 4, batch=2)
    with pytest.raises(ValueError, match="length"):
        kv_cache_bytes(2, 4, -1, 8)


def test_time_generation_reports_each_length():
    model = small_lm(dtype=torch.float32)
    rows = time_generation(model, [4, 8], repeats=3)
    assert [r["length"] for r in rows] == [4, 8]
    assert all(r["cached_s"] > 0 and r["uncached_s"] > 0 for r in rows)
    assert all(r["speedup_min"] <= r["speedup_max"] and r["speedup_min"] > 0 for r in rows)
    assert rows[1]["cache_bytes"] == kv_cache_bytes(2, 4, 8, 4)
    with pytest.raises(ValueError, match="lengths"):
        time_generation(model, [])


# --- BERT's masking --------------------------------------------------------------------------------------------------

def test_bert_mask_exact_behaviour_from_given_draws():
    tokens = torch.tensor([[7, 8, 9, 10, 11, 12, 0]])
    maskable = tokens != 0
    choose = torch.tensor([[0.0, 0.15, 0.1, 0.1, 0.1, 0.9, 0.0]])
    action = torch.tensor([[0.5, 0.5, 0.8, 0.85, 0.95, 0.1, 0.1]])
    random_tokens = torch.tensor([[20, 21, 22, 23, 24, 25, 26]])
    inputs, labels = bert_mask(tokens, maskable, choose, action, random_tokens, mask_id=4)
    assert inputs.tolist() == [[4, 8, 22, 23, 11, 12, 0]]
    assert labels.tolist() == [[7, -100, 9, 10, 11, -100, -100]]


def test_masking_proportions_on_a_large_sample():
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(5, 1000, (400, 500), generator=gen)
    tokens[:, 450:] = 0  # padding
    maskable = tokens != 0
    inputs, labels = mask_tokens(tokens, maskable, 4, 1000, random_low=5, generator=gen)
    chosen = labels != IGNORE_INDEX
    n, m = int(maskable.sum()), int(chosen.sum())
    # binomial standard deviations: 4.5 of them is a 1-in-100,000 failure
    assert abs(m / n - 0.15) < 4.5 * math.sqrt(0.15 * 0.85 / n)
    masked = (inputs[chosen] == 4).float().mean().item()
    same = (inputs[chosen] == tokens[chosen]).float().mean().item()
    other = 1 - masked - same
    for observed, p in [(masked, 0.8), (same, 0.1 + 0.1 / 995), (other, 0.1 - 0.1 / 995)]:
        assert abs(observed - p) < 4.5 * math.sqrt(p * (1 - p) / m)
    assert not chosen[~maskable].any()  # padding never chosen
    assert (inputs[~chosen] == tokens[~chosen]).all()  # nothing else touched
    assert (inputs[chosen & (inputs != 4)] >= 5).all()  # random replacements are ordinary tokens
    torch.testing.assert_close(labels[chosen], tokens[chosen])


def test_mask_tokens_is_reproducible_and_bad_inputs_raise():
    tokens = torch.randint(5, 50, (3, 9))
    a = mask_tokens(tokens, tokens > 0, 4, 50, random_low=5, generator=torch.Generator().manual_seed(3))
    b = mask_tokens(tokens, tokens > 0, 4, 50, random_low=5, generator=torch.Generator().manual_seed(3))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    with pytest.raises(ValueError, match="boolean"):
        bert_mask(tokens, (tokens > 0).long(), torch.rand(3, 9), torch.rand(3, 9), tokens, 4)
    with pytest.raises(ValueError, match="choose must have the shape"):
        bert_mask(tokens, tokens > 0, torch.rand(3, 8), torch.rand(3, 9), tokens, 4)
    with pytest.raises(ValueError, match="random_low"):
        mask_tokens(tokens, tokens > 0, 4, 50, random_low=50)
    with pytest.raises(ValueError, match="mask_prob"):
        bert_mask(tokens, tokens > 0, torch.rand(3, 9), torch.rand(3, 9), tokens, 4, mask_prob=1.5)


def test_mlm_loss_counts_only_chosen_positions_by_hand():
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 6, dtype=torch.float64)
    labels = torch.tensor([[-100, 3, -100, -100], [5, -100, -100, 0]])
    logp = torch.log_softmax(logits, dim=-1)
    by_hand = -(logp[0, 1, 3] + logp[1, 0, 5] + logp[1, 3, 0]) / 3
    torch.testing.assert_close(masked_lm_loss(logits, labels).double(), by_hand)
    chosen = labels != IGNORE_INDEX
    torch.testing.assert_close(masked_lm_loss(logits[chosen], labels).double(), by_hand)
    changed = logits.clone()
    changed[~chosen] = 100 * torch.randn_like(changed[~chosen])  # other positions do not matter
    torch.testing.assert_close(masked_lm_loss(changed, labels), masked_lm_loss(logits, labels))
    with pytest.raises(ValueError, match="no position was chosen"):
        masked_lm_loss(logits, torch.full((2, 4), -100))
    with pytest.raises(ValueError, match="expected logits"):
        masked_lm_loss(logits, labels[:, :3])


def test_masked_lm_sees_both_sides_ignores_padding_and_ties_weights():
    torch.manual_seed(0)
    model = MaskedLanguageModel(30, 16, 32, 4, 2).double().eval()
    assert model.dense.weight is model.encoder.embedding.weight
    X = torch.randint(5, 30, (2, 6), generator=torch.Generator().manual_seed(0))
    changed = X.clone()
    changed[:, 5] = (changed[:, 5] + 3) % 30
    with torch.no_grad():
        assert (model(X)[:, 0] - model(changed)[:, 0]).abs().max() > 1e-4  # position 0 sees position 5
        lens = torch.tensor([4, 4])
        torch.testing.assert_close(model(X, lens)[:, :4], model(changed, lens)[:, :4])  # padding is invisible
        positions = torch.zeros(2, 6, dtype=torch.bool)
        positions[0, 2] = positions[1, 4] = True
        torch.testing.assert_close(model(X, predict_at=positions), model(X)[positions])
    with pytest.raises(ValueError, match="predict_at must be"):
        model(X, predict_at=positions.long())


# --- training: each model memorises a tiny corpus ------------------------------------------------------------------

CORPUS = torch.tensor([[1, 5, 6, 7, 8, 2], [1, 9, 10, 11, 2, 0], [1, 12, 6, 13, 14, 2]])


def test_causal_lm_memorises_a_tiny_corpus(one_thread):
    torch.manual_seed(0)
    model = CausalLanguageModel(16, 32, 64, 4, 2, max_len=16)
    losses = train_language_model(model, lambda m, step: causal_lm_loss(m, CORPUS, pad=0), max_steps=150, lr=3e-3,
                                  warmup=10, progress=False).loss
    # Over seeds 0-7 the loss fell to 0.058-0.066 of its start (the floor is log(3)/5 ≈ 0.22 from the ambiguous
    # first word), and generation was already exact after 50 of the 150 steps: far from both verdicts' edges.
    assert losses[-1] < 0.5 * losses[0]
    # the first word after <bos> is ambiguous (3 choices); every later token is determined by its prefix
    for row in CORPUS:
        n = int((row != 0).sum())
        out = generate(model, row[None, :2], n - 2, temperature=0.0)
        assert out[0].tolist() == row[:n].tolist()


def test_masked_lm_memorises_a_tiny_corpus(one_thread):
    torch.manual_seed(0)
    words = CORPUS[:, 1:].masked_fill(CORPUS[:, 1:] == 2, 0)  # (3, 5) without <bos>, <eos> -> padding
    model = MaskedLanguageModel(16, 32, 64, 4, 2, max_len=16)
    gen = torch.Generator().manual_seed(0)
    lens = (words != 0).sum(dim=1)

    def step_loss(m, step):
        inputs, labels = mask_tokens(words, words >= 5, 4, 16, random_low=5, mask_prob=0.3, generator=gen)
        if not (labels != IGNORE_INDEX).any():
            labels[0, 0] = words[0, 0]
        return masked_lm_loss(m(inputs, lens), labels)

    train_language_model(model, step_loss, max_steps=300, lr=3e-3, warmup=10, progress=False)
    # Over seeds 0-7 (model and masking), the right word's probability beats every other's by 0.83-0.95 at each of
    # the 11 masked positions: the argmax is far from a tie.
    with torch.no_grad():
        for row, n in zip(words, lens.tolist()):
            for i in range(n):
                X = row.clone()
                X[i] = 4
                assert model(X[None], torch.tensor([n]))[0, i].argmax() == row[i]


def test_train_language_model_bad_steps():
    with pytest.raises(ValueError, match="max_steps"):
        train_language_model(small_lm(), lambda m, s: None, max_steps=0)


# --- every device ----------------------------------------------------------------------------------------------------

def test_models_sampling_and_masking_on_any_device(any_device):
    model = small_lm(device=any_device, dtype=torch.float32)
    prompt = torch.randint(30, (2, 3), generator=torch.Generator().manual_seed(0)).to(any_device)
    a, la = generate(model, prompt, 8, 1.0, 5, generator=torch.Generator().manual_seed(1), return_logits=True)
    b, lb = generate(model, prompt, 8, 1.0, 5, use_cache=False, generator=torch.Generator().manual_seed(1),
                     return_logits=True)
    assert a.device.type == any_device.type and torch.equal(a, b)
    assert_close(la, lb)
    cpu = generate(small_lm(dtype=torch.float32), prompt.cpu(), 8, 1.0, 5, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a.cpu(), cpu)  # draws come from the CPU generator: the same text on every device
    tokens = torch.randint(5, 30, (4, 7), device=any_device)
    inputs, labels = mask_tokens(tokens, tokens > 0, 4, 30, random_low=5, generator=torch.Generator().manual_seed(0))
    assert inputs.device.type == any_device.type and labels.device.type == any_device.type
    mlm = MaskedLanguageModel(30, 16, 32, 4, 1).to(any_device)
    assert mlm(inputs).shape == (4, 7, 30)



def test_language_models_use_gelu_unless_told_otherwise():
    from attn_utils import CausalLanguageModel, MaskedLanguageModel

    for model_class in (CausalLanguageModel, MaskedLanguageModel):
        for activation, expected in [(None, torch.nn.GELU), ("relu", torch.nn.ReLU), ("gelu", torch.nn.GELU)]:
            options = {} if activation is None else {"activation": activation}
            model = model_class(30, num_hiddens=8, ffn_num_hiddens=16, num_heads=2, num_blks=2, **options)
            ffns = [m for name, m in model.named_modules() if name.endswith("ffn")]
            assert len(ffns) == 2 and all(type(f.relu) is expected for f in ffns)


def test_interleaved_times_runs_each_function_once_per_repeat_in_turn():
    from attn_utils.measure import interleaved_times

    calls = []
    times = interleaved_times([lambda: calls.append("a"), lambda: calls.append("b")], repeats=3, warmup=1)
    assert calls == ["a", "b"] * 4  # one warm-up round, then three timed ones
    assert [len(t) for t in times] == [3, 3] and all(x >= 0 for t in times for x in t)


def test_sampling_helpers_name_arguments_of_the_wrong_kind():
    from attn_utils.sampling import decode_steps, filled_cache

    with pytest.raises(ValueError, match="logits must be a float tensor"):
        top_k_filter(torch.tensor([[1, 2, 3]]), 2)  # "value cannot be converted to type int64_t" before
    with pytest.raises(ValueError, match="dtype must be a torch.dtype"):
        kv_cache_bytes(1, 1, 1, 1, dtype="float16")
    model = small_lm()
    for steps in (-1, True):
        with pytest.raises(ValueError, match="steps must be a non-negative integer"):
            decode_steps(model, model.empty_cache(1), steps)  # -1 did nothing, True one step
    with pytest.raises(ValueError, match="batch must be a non-negative integer, got True"):
        filled_cache(model, 3, batch=True)
    with pytest.raises(ValueError, match="batch must be a positive integer, got 0"):
        time_generation(model, [2], batch=0, repeats=1)  # timed an empty batch
