"""The one key-value cache (attn_utils.kv_cache) and the one decoder stack that uses it: the translator's
decoder and the language model share it, with every position scheme, windows and shared heads."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

import attn_utils.causal_attention as causal_attention
from attn_utils.alibi import alibi_bias
from attn_utils.kv_cache import KVCache
from attn_utils.language_models import CausalLanguageModel
from attn_utils.rotary import apply_rotary
from attn_utils.transformer import make_transformer


def _keys(n, seed=0):
    return torch.randn(2, 3, 2, n, 4, generator=torch.Generator().manual_seed(seed))  # (blocks, batch, heads, n, dh)


def _append(cache, new_k, new_v):
    """One forward pass's worth of writes: every block appends its (batch, heads, T, dh)."""
    grown = cache.extended(new_k.shape[3])
    for i in range(new_k.shape[0]):
        grown.update(i, new_k[i], new_v[i])
    return grown


def test_appending_gives_the_concatenation_without_copying_the_buffers_each_token():
    k, v = _keys(3), _keys(3, 1)
    cache = _append(KVCache.empty(2, 3, 2, 4), k, v)
    buffers = [b.data_ptr() for b in cache._k]
    for step in range(4):
        new_k, new_v = _keys(1, 10 + step), _keys(1, 20 + step)
        cache = _append(cache, new_k, new_v)
        k, v = torch.cat([k, new_k], dim=3), torch.cat([v, new_v], dim=3)
    assert torch.equal(cache.keys, k) and torch.equal(cache.values, v) and cache.length == cache.positions == 7
    assert [b.data_ptr() for b in cache._k] == buffers  # written in place: room was there (capacity 16)


def test_two_continuations_of_one_prefix_never_write_over_each_other():
    prefix = _append(KVCache.empty(2, 3, 2, 4), _keys(3), _keys(3, 1))
    first = _append(prefix, _keys(1, 2), _keys(1, 3))
    second = _append(prefix, _keys(1, 4), _keys(1, 5))  # the same slot: copied, not overwritten
    assert torch.equal(first.keys[:, :, :, 3], _keys(1, 2)[:, :, :, 0])
    assert torch.equal(second.keys[:, :, :, 3], _keys(1, 4)[:, :, :, 0])
    assert torch.equal(prefix.keys, _keys(3)) and prefix.length == 3


def test_a_window_keeps_the_last_positions_and_the_buffer_stays_bounded():
    cache = KVCache.empty(2, 3, 2, 4)
    everything = torch.zeros(2, 3, 2, 0, 4)
    for step in range(40):
        new = _keys(1, step)
        cache = _append(cache, new, new).kept(5)
        everything = torch.cat([everything, new], dim=3)
    assert torch.equal(cache.keys, everything[:, :, :, -5:]) and cache.length == 40 and cache.positions == 5
    assert cache._k[0].shape[2] <= 32  # compacted when full, never grown with the text


def test_reorder_picks_batch_rows_of_every_field():
    cache = KVCache(_keys(3), _keys(3, 1), cross_keys=_keys(5, 2), cross_values=_keys(5, 3),
                    src_valid_lens=torch.tensor([5, 4, 2]))
    index = torch.tensor([2, 2, 0])
    picked = cache.reorder(index)
    assert torch.equal(picked.keys, _keys(3)[:, index]) and torch.equal(picked.cross_values, _keys(5, 3)[:, index])
    assert picked.src_valid_lens.tolist() == [2, 2, 5] and picked.length == 3


def test_bad_caches_are_named():
    with pytest.raises(ValueError, match=r"\(num_blks, batch, kv_heads, positions, d / heads\), got \(3, 2, 4\)"):
        KVCache(torch.zeros(3, 2, 4), torch.zeros(3, 2, 4))
    with pytest.raises(ValueError, match="must have one shape"):
        KVCache(_keys(3), _keys(4))
    with pytest.raises(ValueError, match="at least its 3 positions"):
        KVCache(_keys(3), _keys(3), 2)


# --- one stack: the translator's encoder has the positions of the language models too ------------------------------
# (the decoder's cached decoding with every option: tests/test_transformer.py)

def test_the_encoder_with_alibi_adds_the_symmetric_bias_and_with_rotary_rotates_queries_and_keys():
    bias = alibi_bias(2, 3, 3, symmetric=True)  # slopes 1/16 and 1/256
    assert torch.equal(bias[0], -torch.tensor([[0.0, 1, 2], [1, 0, 1], [2, 1, 0]]) / 16)
    X = torch.randn(2, 5, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    lens = torch.tensor([5, 3])
    keep = torch.arange(5) < lens[:, None, None, None]  # (batch, 1, 1, keys)
    for scheme in ("rotary", "alibi"):
        torch.manual_seed(0)
        block = make_transformer(20, 21, 16, 32, 4, 1, position_scheme=scheme).double().eval().encoder.blks[0]
        mha = block.attention
        q, (k, v) = mha.project_q(X), mha.project_kv(X, X)  # (2, 4, 5, 4)
        extra = None
        if scheme == "rotary":
            q, k = apply_rotary(q), apply_rotary(k)
        else:
            extra = alibi_bias(4, 5, 5, symmetric=True).double()
        mask = torch.zeros(2, 1, 1, 5, dtype=torch.float64).masked_fill(~keep, float("-inf"))
        heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask if extra is None else mask + extra)
        expected = X + mha.W_o(heads.transpose(1, 2).reshape(2, 5, 16))  # post-norm: LN(X + attention)
        with torch.no_grad():
            got = block._self_attention(X, lens, None) + X
        torch.testing.assert_close(got, expected.detach(), rtol=0, atol=1e-10)


def test_what_the_blocks_share_is_computed_once_per_forward_pass(monkeypatch):
    calls = {"alibi": 0, "rotary": 0}

    def counting(name, function):
        def counted(*args, **kwargs):
            calls[name] += 1
            return function(*args, **kwargs)
        return counted

    monkeypatch.setattr(causal_attention, "alibi_bias", counting("alibi", causal_attention.alibi_bias))
    monkeypatch.setattr(causal_attention, "rotary_cos_sin", counting("rotary", causal_attention.rotary_cos_sin))
    tokens = torch.randint(1, 30, (2, 6), generator=torch.Generator().manual_seed(0))
    for scheme in ("alibi", "rotary"):
        model = CausalLanguageModel(30, 16, 32, 4, num_blks=3, position_scheme=scheme).eval()
        with torch.no_grad():
            _, cache = model(tokens)
            model(tokens[:, :1], cache)
        assert calls[scheme] == 2, f"{scheme}: {calls[scheme]} computations for 2 forward passes of 3 blocks"


# --- a cache that does not fit the model is named, never read wrongly ---------------------------------------------

def test_a_length_below_the_positions_cannot_be_set():
    """A rotary (or learned, or sinusoidal) model places new tokens at ``length``: a cache of 4 positions
    whose length was set to 2 gave logits off by 0.56 for a rotary model, without a word."""
    model = CausalLanguageModel(30, 16, 32, 4, 2, position_scheme="rotary").double().eval()
    X = torch.randint(30, (2, 6), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        full, _ = model(X)
        _, cache = model(X[:, :4])
        for bad in (2, 3, -1, 4.0, True, torch.tensor(4)):
            with pytest.raises(ValueError, match=r"length \(tokens seen\) must be an int of at least its 4 positions"):
                cache.length = bad
        assert cache.length == 4
        torch.testing.assert_close(model(X[:, 4:], cache)[0], full[:, 4:], rtol=0, atol=1e-12)
        cache.length = 9  # as if 5 earlier tokens had left a window: allowed, as with_length does
        assert cache.length == 9 and cache.with_length(12).length == 12 and cache.extended(2).length == 11


def test_the_shape_is_read_without_stacking_the_buffers():
    cache = _append(KVCache.empty(2, 3, 2, 4), _keys(3), _keys(3, 1))
    assert cache.shape == tuple(cache.keys.shape) == (2, 3, 2, 3, 4) and cache.kept(2).shape == (2, 3, 2, 2, 4)
    assert cache.device == torch.device("cpu")


def test_update_names_keys_that_do_not_fit():
    grown = KVCache.empty(2, 3, 2, 4).extended(1)
    with pytest.raises(ValueError, match=r"\(batch=3, kv_heads=2, T, d / heads=4\) .* got \(3, 2, 1, 8\)"):
        grown.update(0, torch.zeros(3, 2, 1, 8), torch.zeros(3, 2, 1, 8))
    with pytest.raises(ValueError, match=r"T at most the cache's 1 positions, got \(3, 2, 2, 4\)"):
        grown.update(0, torch.zeros(3, 2, 2, 4), torch.zeros(3, 2, 2, 4))  # wrote slots -1 and 0
    with pytest.raises(ValueError, match=r"got \(3, 2, 1, 4\) and \(3, 2, 2, 4\)"):
        grown.update(0, torch.zeros(3, 2, 1, 4), torch.zeros(3, 2, 2, 4))


@pytest.mark.parametrize("other, what", [(dict(num_hiddens=32), "d / heads is 8"),
                                         (dict(num_heads=2), r"kv_heads=2, P, d / heads\); got \(2, 2, 4, 4, 4\)"),
                                         (dict(num_blks=3), r"num_blks=3, .*got \(2, 2, 4, 4, 4\)")])
def test_a_language_model_names_the_cache_of_another_model(other, what):
    """Another head size failed inside the cache's write ("The expanded size of the tensor (4) must match")."""
    sizes = dict(num_hiddens=16, num_heads=4, num_blks=2) | other
    torch.manual_seed(0)
    mine = CausalLanguageModel(30, 16, 32, 4, 2, position_scheme="rotary").eval()
    theirs = CausalLanguageModel(30, ffn_num_hiddens=32, position_scheme="rotary", **sizes).eval()
    X = torch.randint(30, (2, 5), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        _, cache = mine(X[:, :4])
        mine(X[:, 4:], cache)  # its own cache: fine
        with pytest.raises(ValueError, match=f"cache must hold keys and values .*{what}"):
            theirs(X[:, 4:], cache)


@pytest.mark.parametrize("other, what", [(dict(num_blks=3), r"num_blks=3, .*got \(2, 2, 4, 0, 4\)"),
                                         (dict(num_hiddens=32), "d / heads is 8"),
                                         (dict(num_heads=2), r"kv_heads=2, P, d / heads\); got \(2, 2, 4, 0, 4\)")])
def test_a_translator_names_the_state_of_another_translator(other, what):
    """Another number of blocks failed with an IndexError, another head size inside the cache's write."""
    sizes = dict(num_hiddens=16, num_heads=4, num_blks=2) | other
    torch.manual_seed(0)
    model = make_transformer(20, 21, 16, 32, 4, 2).eval()
    theirs = make_transformer(20, 21, ffn_num_hiddens=32, **sizes).eval()
    src = torch.randint(20, (2, 5), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        state = model.decoder.init_state(model.encoder(src))
        model.decoder(src[:, :1], state)
        with pytest.raises(ValueError, match=f"cache must hold keys and values .*{what}"):
            theirs.decoder(src[:, :1], state)
        cross = KVCache.empty(2, 2, 4, 4, cross_keys=state.cross_keys[:, :, :, :, :2], cross_values=state.cross_values)
        with pytest.raises(ValueError, match=r"cross_keys must be \(num_blks=2, batch=2, heads=4, S, d / heads=4\)"):
            model.decoder(src[:, :1], cross)


def test_a_cache_on_another_device_is_named():
    from simulated_accelerator import ACCELERATOR, SimulatedAccelerator

    with SimulatedAccelerator(), torch.no_grad():
        model = CausalLanguageModel(30, 16, 32, 4, 2).eval().to(ACCELERATOR)
        X = torch.randint(30, (2, 3)).to(ACCELERATOR)
        with pytest.raises(ValueError, match="the cache is on cpu but the model on cuda"):
            model(X, KVCache.empty(2, 2, 4, 4))  # met the model inside attention ("same device")
        assert model(X, model.empty_cache(2))[0].shape == (2, 3, 30)


def test_an_empty_cache_names_sizes_that_are_not_counts():
    for name, sizes in [("num_blks", (0, 3, 2, 4)), ("num_blks", (2.5, 3, 2, 4)), ("kv_heads", (2, 3, 0, 4)),
                        ("head_dim", (2, 3, 2, -1)), ("batch", (2, True, 2, 4))]:
        with pytest.raises(ValueError, match=f"{name} must be a"):
            KVCache.empty(*sizes)
    with pytest.raises(ValueError, match="at least one block"):
        KVCache(torch.zeros(0, 3, 2, 1, 4), torch.zeros(0, 3, 2, 1, 4))  # its keys could not be stacked
    assert KVCache.empty(2, 0, 2, 4).shape == (2, 0, 2, 0, 4)


def test_token_ids_on_another_device_than_the_model_are_named():
    from simulated_accelerator import ACCELERATOR, SimulatedAccelerator

    with SimulatedAccelerator(), torch.no_grad():
        model = CausalLanguageModel(30, 16, 32, 4, 2).eval().to(ACCELERATOR)
        translator = make_transformer(30, 30, 16, 32, 4, 1).eval().to(ACCELERATOR)
        X = torch.randint(30, (2, 3))  # left on the CPU
        with pytest.raises(ValueError, match="the token ids are on cpu but the model on cuda"):
            model(X)  # met the embedding's weight on the device ("same device")
        with pytest.raises(ValueError, match="the token ids are on cpu but the model on cuda"):
            translator(X, X.to(ACCELERATOR), None)
        assert model(X.to(ACCELERATOR))[0].shape == (2, 3, 30)
