"""The Transformer's blocks against torch's own layers and d2l's encoder, the key-value cache
against full recomputation, and a translator that learns."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch_reference import copy_into_torch_attention

from attn_utils.checkpoints import load_checkpoint, save_checkpoint
from attn_utils.data import load_translation_data
from attn_utils.decoding import beam_search, greedy_decode
from attn_utils.evaluate import evaluate_bleu
from attn_utils.kv_cache import KVCache
from attn_utils.masking import causal_mask
from attn_utils.registry import build_model
from attn_utils.tolerance import assert_close
from attn_utils.trainers import train_seq2seq
from attn_utils.transformer import (
    AddNorm,
    PositionWiseFFN,
    TransformerDecoderBlock,
    TransformerEncoder,
    TransformerEncoderBlock,
    make_transformer,
    transformer_attention,
)

pytestmark = pytest.mark.usefixtures("one_thread")

D, HEADS, FFN = 16, 4, 32
SRC = torch.tensor([[4, 5, 6, 7, 2], [8, 9, 2, 0, 0], [4, 4, 5, 2, 0]])
SRC_LEN = torch.tensor([5, 3, 4])
DEC_IN = torch.tensor([[1, 4, 5, 6, 7, 8], [1, 9, 10, 0, 0, 0], [1, 4, 4, 4, 4, 0]])


def _copy_linear_and_norms(pairs):
    with torch.no_grad():
        for ours, theirs in pairs:
            theirs.weight.copy_(ours.weight)
            theirs.bias.copy_(ours.bias)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_block_equals_torch_transformer_encoder_layer(norm_first):
    torch.manual_seed(0)
    ours = TransformerEncoderBlock(D, FFN, HEADS, 0.0, use_bias=True, norm_first=norm_first).eval()
    for p in ours.parameters():  # non-trivial layer norms
        nn.init.normal_(p, std=0.3)
    theirs = nn.TransformerEncoderLayer(D, HEADS, FFN, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    copy_into_torch_attention(ours.attention, theirs.self_attn)
    _copy_linear_and_norms([(ours.ffn.dense1, theirs.linear1), (ours.ffn.dense2, theirs.linear2),
                            (ours.addnorm1.ln, theirs.norm1), (ours.addnorm2.ln, theirs.norm2)])
    X = torch.randn(3, 5, D)
    padding = torch.arange(5) >= SRC_LEN[:, None]
    # torch's fast path would drop padded rows; compare through the standard path (training flag off,
    # but inputs requiring grad)
    want = theirs(X.requires_grad_(), src_key_padding_mask=padding)
    torch.testing.assert_close(ours(X, SRC_LEN), want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_block_equals_torch_transformer_decoder_layer(norm_first):
    torch.manual_seed(1)
    ours = TransformerDecoderBlock(D, FFN, HEADS, 0.0, use_bias=True, norm_first=norm_first).eval()
    for p in ours.parameters():
        nn.init.normal_(p, std=0.3)
    theirs = nn.TransformerDecoderLayer(D, HEADS, FFN, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    copy_into_torch_attention(ours.attention1, theirs.self_attn)
    copy_into_torch_attention(ours.attention2, theirs.multihead_attn)
    _copy_linear_and_norms([(ours.ffn.dense1, theirs.linear1), (ours.ffn.dense2, theirs.linear2),
                            (ours.addnorm1.ln, theirs.norm1), (ours.addnorm2.ln, theirs.norm2),
                            (ours.addnorm3.ln, theirs.norm3)])
    X, memory = torch.randn(3, 6, D), torch.randn(3, 5, D)
    cross_k, cross_v = ours.attention2.project_kv(memory, memory)
    cache = KVCache.empty(1, 3, HEADS, D // HEADS).extended(6)
    got = ours(X, cache, 0, cross=(cross_k, cross_v), src_valid_lens=SRC_LEN)
    k, v = cache.keys[0], cache.values[0]
    want = theirs(X.requires_grad_(), memory, tgt_mask=~causal_mask(6, 6),
                  memory_key_padding_mask=torch.arange(5) >= SRC_LEN[:, None])
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert k.shape == v.shape == (3, HEADS, 6, D // HEADS)


def test_ffn_and_addnorm_are_d2ls(d2l):
    torch.manual_seed(2)
    ffn, ref = PositionWiseFFN(FFN, D), d2l.PositionWiseFFN(FFN, D)
    X = torch.randn(2, 3, D)
    ref(X)
    ref.load_state_dict(ffn.state_dict())
    torch.testing.assert_close(ffn(X), ref(X))
    norm, ref_norm = AddNorm(D, 0.0), d2l.AddNorm(D, 0.0)
    Y = torch.randn(2, 3, D)
    torch.testing.assert_close(norm(X, Y), ref_norm(X, Y))
    # pre-norm: X + sublayer(LN(X)), post-norm: LN(X + sublayer(X))
    torch.testing.assert_close(norm.residual(X, ffn, norm_first=True), X + ffn(norm.ln(X)))
    torch.testing.assert_close(norm.residual(X, ffn, norm_first=False), norm.ln(X + ffn(X)))


def test_encoder_equals_d2ls_with_the_same_state_dict(d2l):
    torch.manual_seed(3)
    ref = d2l.TransformerEncoder(12, D, FFN, HEADS, 2, 0.0).eval()
    ref(SRC, SRC_LEN)  # materialise the lazy layers
    ours = TransformerEncoder(12, D, FFN, HEADS, 2, 0.0).eval()
    ours.load_state_dict(ref.state_dict())
    torch.testing.assert_close(ours(SRC, SRC_LEN), ref(SRC, SRC_LEN), atol=1e-5, rtol=1e-5)
    for mine, theirs in zip(ours.attention_weights, ref.attention_weights):
        torch.testing.assert_close(mine.reshape(-1, 5, 5), theirs, atol=1e-6, rtol=1e-5)


def _model(seed=0, **kwargs):
    torch.manual_seed(seed)
    return make_transformer(12, 13, D, FFN, HEADS, 2, **kwargs).eval()


@pytest.mark.parametrize("kwargs", [{}, {"norm_first": False}, {"tie_embeddings": False},
                                    {"position_scheme": "learned"}, {"position_scheme": "rotary"},
                                    {"position_scheme": "alibi"},
                                    {"position_scheme": "rotary", "window": 3, "num_kv_heads": 2}],
                         ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_feeding_one_token_at_a_time_equals_one_call(kwargs):
    """The one decoder stack and cache, with every option the language models have (rotary, ALiBi, windows,
    grouped-query heads): the cache gives the logits of recomputation."""
    model = _model(4, **kwargs)
    assert model.config["position_scheme"] == kwargs.get("position_scheme", "sinusoidal")
    state = model.decoder.init_state(model.encoder(SRC, SRC_LEN), SRC_LEN)
    full, _ = model.decoder(DEC_IN, state)
    steps = []
    for t in range(DEC_IN.shape[1]):
        logits, state = model.decoder(DEC_IN[:, t:t + 1], state)
        steps.append(logits)
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
    kept = kwargs.get("window") or 6  # every block cached 6 keys, or the window's last 3
    assert state.keys.shape == (2, 3, kwargs.get("num_kv_heads", HEADS), kept, D // HEADS) and state.length == 6


def test_cached_decoding_gives_the_tokens_of_full_recomputation():
    for seed in range(3):
        model = _model(seed)
        cached = greedy_decode(model, SRC, SRC_LEN, bos=1, eos=2, max_len=12)
        recomputed = greedy_decode(model, SRC, SRC_LEN, bos=1, eos=2, max_len=12, use_cache=False)
        assert cached.tokens == recomputed.tokens
        torch.testing.assert_close(cached.scores, recomputed.scores)
        for a, b in zip(cached.attention, recomputed.attention):
            torch.testing.assert_close(a, b)


def test_causal_decoder_leaks_nothing_from_later_tokens():
    model = _model(5)
    model.decoder.embedding.weight.requires_grad_(False)
    state = model.decoder.init_state(model.encoder(SRC, SRC_LEN), SRC_LEN)
    embedded = model.decoder.embedding(DEC_IN).requires_grad_()
    model.decoder.embedding = _Fixed(embedded)
    logits, _ = model.decoder(DEC_IN, state)
    for t in range(DEC_IN.shape[1]):
        (grad,) = torch.autograd.grad(logits[:, t].sum(), embedded, retain_graph=True)
        assert bool((grad[:, t + 1:] == 0).all())
        assert bool((grad[:, t].abs().sum(-1) > 0).all())


class _Fixed(nn.Module):
    """An 'embedding' that returns given vectors, so gradients can be taken with respect to them."""

    def __init__(self, value):
        super().__init__()
        self.value = value

    def forward(self, X):
        return self.value[:, :X.shape[1]]


def test_padding_in_the_source_changes_nothing():
    model = _model(6)
    logits = model(SRC, DEC_IN, SRC_LEN)
    for b, n in enumerate(SRC_LEN.tolist()):
        alone = model(SRC[b:b + 1, :n], DEC_IN[b:b + 1], SRC_LEN[b:b + 1])
        torch.testing.assert_close(logits[b:b + 1], alone, atol=1e-5, rtol=1e-5)


def test_beam_search_carries_the_cache_and_beam_one_is_greedy():
    model = _model(7)
    greedy = greedy_decode(model, SRC, SRC_LEN, 1, 2, 10)
    one = beam_search(model, SRC, SRC_LEN, 1, 2, 10, beam_size=1)
    assert one.tokens == greedy.tokens
    four = beam_search(model, SRC, SRC_LEN, 1, 2, 10, beam_size=4)
    assert all(s4 >= s1 - 1e-5 for s4, s1 in zip(four.scores, one.scores))
    for attn, n in zip(four.attention, SRC_LEN.tolist()):
        assert bool((attn[:, n:] == 0).all())  # no weight on padding


def test_every_attention_map_is_returned():
    model = _model(8)
    maps = transformer_attention(model, SRC, SRC_LEN, DEC_IN)
    assert maps["encoder self"].shape == (2, 3, HEADS, 5, 5)
    assert maps["decoder self"].shape == (2, 3, HEADS, 6, 6)
    assert maps["cross"].shape == (2, 3, HEADS, 6, 5)
    for weights in maps.values():
        torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))
    assert bool((maps["decoder self"].triu(1) == 0).all())
    assert bool((maps["cross"][:, 1, :, :, 3:] == 0).all())  # sentence 1 has 3 source tokens
    torch.testing.assert_close(model.decoder.attention_weights, maps["cross"][-1].mean(1))


def test_tied_output_layer_and_checkpoints(tmp_path):
    model = _model(9)
    assert model.decoder.dense.weight is model.decoder.embedding.weight
    save_checkpoint(tmp_path / "t.pt", model)
    rebuilt = build_model(model.config)
    load_checkpoint(tmp_path / "t.pt", rebuilt)
    assert rebuilt.decoder.dense.weight is rebuilt.decoder.embedding.weight
    torch.testing.assert_close(rebuilt.eval()(SRC, DEC_IN, SRC_LEN), model(SRC, DEC_IN, SRC_LEN))


def test_bad_input_names_what_was_expected():
    model = _model(10)
    state = model.decoder.init_state(model.encoder(SRC, SRC_LEN), SRC_LEN)
    with pytest.raises(ValueError, match="state was made for a batch of 3"):
        model.decoder(DEC_IN[:2], state)
    with pytest.raises(ValueError, match=r"enc_outputs must have shape \(batch, steps, 16\)"):
        model.decoder.init_state(torch.zeros(3, 5, 8))
    with pytest.raises(ValueError, match="integer tensor of token indices"):
        model.encoder(torch.zeros(3, 5))
    with pytest.raises(ValueError, match="src_valid_lens must have shape"):
        model(SRC, DEC_IN, torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="max_len=256"):
        model(torch.ones(1, 300, dtype=torch.long), DEC_IN[:1])


def test_transformer_on_every_device(any_device):
    model = _model(11)
    want = model(SRC, DEC_IN, SRC_LEN)
    got = model.to(any_device)(SRC.to(any_device), DEC_IN.to(any_device), SRC_LEN.to(any_device))
    assert_close(got, want)
    decoded = greedy_decode(model, SRC.to(any_device), SRC_LEN.to(any_device), 1, 2, 6)
    assert decoded.tokens == greedy_decode(model.cpu(), SRC, SRC_LEN, 1, 2, 6).tokens


@pytest.mark.parametrize("norm_first", [True, False])
def test_the_transformer_memorises_a_handful_of_pairs(norm_first):
    tiny = load_translation_data("grammar", num_train=8, min_freq=1, verbose=False)
    torch.manual_seed(0)
    model = make_transformer(len(tiny.src_vocab), len(tiny.tgt_vocab), 32, 64, 4, 2, norm_first=norm_first)
    reached = None
    for k in range(6):
        train_seq2seq(model, tiny, lr=3e-3, max_steps=50, batch_size=8, warmup=10 if k == 0 else 0,
                      label_smoothing=0.0, eval_points=0, progress=False, seed=k)
        if evaluate_bleu(model, tiny, "train") > 99.999:
            reached = 50 * (k + 1)
            break
    assert reached is not None, "the Transformer did not memorise 8 pairs in 300 steps"


def test_ffn_activation_choice():
    torch.manual_seed(0)
    X = torch.randn(2, 3, D)
    gelu = PositionWiseFFN(FFN, D, activation="gelu")
    assert torch.allclose(gelu(X), gelu.dense2(torch.nn.functional.gelu(gelu.dense1(X))))
    relu = PositionWiseFFN(FFN, D)
    relu.load_state_dict(gelu.state_dict())  # the same parameters under both activations
    assert torch.allclose(relu(X), relu.dense2(torch.relu(relu.dense1(X))))
    assert not torch.allclose(relu(X), gelu(X))
    with pytest.raises(ValueError, match="activation must be one of"):
        PositionWiseFFN(FFN, D, activation="tanh")


# --- dropout rates and sizes: refused where the layer is built -----------------------------------------------------

def _layers_with_dropout(p):
    from attn_utils import CausalLanguageModel, MaskedLanguageModel
    from attn_utils.attention import AdditiveAttention, DotProductAttention
    from attn_utils.multihead import MultiHeadAttention
    from attn_utils.positional import LearnedPositionalEncoding, PositionalEncoding

    return {
        "MultiHeadAttention": lambda: MultiHeadAttention(8, 2, p),
        "DotProductAttention": lambda: DotProductAttention(p),
        "AdditiveAttention (a ScoredAttention)": lambda: AdditiveAttention(8, p),
        "AddNorm": lambda: AddNorm(8, p),
        "TransformerEncoderBlock": lambda: TransformerEncoderBlock(8, 16, 2, p),
        "TransformerDecoderBlock": lambda: TransformerDecoderBlock(8, 16, 2, p),
        "TransformerEncoder": lambda: TransformerEncoder(10, 8, 16, 2, 1, p),
        "CausalLanguageModel": lambda: CausalLanguageModel(10, 8, 16, 2, 1, p),
        "MaskedLanguageModel": lambda: MaskedLanguageModel(10, 8, 16, 2, 1, p),
        "make_transformer": lambda: make_transformer(10, 10, 8, 16, 2, 1, dropout=p),
        "PositionalEncoding": lambda: PositionalEncoding(8, p),
        "LearnedPositionalEncoding": lambda: LearnedPositionalEncoding(8, p),
    }


def _recurrent_models_with_dropout(p):
    """Chapters 4-7's models: the rate goes to an nn.Dropout or between the layers of a GRU or LSTM."""
    from attn_utils.luong import LuongDecoder
    from attn_utils.relation import AttentionBiLSTM
    from attn_utils.seq2seq import Seq2SeqDecoder, Seq2SeqEncoder

    return {
        "AttentionBiLSTM": lambda: AttentionBiLSTM(10, 8, 8, 3, dropout=p),
        "Seq2SeqEncoder": lambda: Seq2SeqEncoder(10, 8, 8, 2, p),
        "Seq2SeqDecoder": lambda: Seq2SeqDecoder(10, 8, 8, 2, p),
        "LuongDecoder": lambda: LuongDecoder(10, 8, 8, 2, dropout=p),
    }


@pytest.mark.parametrize("bad", [float("nan"), 1.0, 1.5, -0.1, float("inf"), True, "0.1", None])
def test_a_dropout_rate_outside_0_1_is_refused_by_every_layer(bad):
    """nn.Dropout took NaN (every activation NaN in training), 1 (every one zero) and True (read as 1)."""
    for name, make in (_layers_with_dropout(bad) | _recurrent_models_with_dropout(bad)).items():
        with pytest.raises(ValueError, match=r"dropout must be a number in \[0, 1\), got"):
            make()
            pytest.fail(f"{name} took dropout={bad!r}")


def test_dropout_rates_in_0_1_are_kept_as_given():
    for p in (0, 0.0, 0.3, 0.999):
        for name, make in _layers_with_dropout(p).items():
            rates = {m.p for m in make().modules() if isinstance(m, nn.Dropout)}
            assert rates == {p}, name
        for name, make in _recurrent_models_with_dropout(p).items():
            modules = list(make().modules())
            rates = {m.p for m in modules if isinstance(m, nn.Dropout)} | {
                m.dropout for m in modules if isinstance(m, nn.RNNBase) and m.num_layers > 1}  # between layers
            assert p in rates and rates <= {p, 0.0}, name  # 0.0: an attention layer's own dropout


@pytest.mark.parametrize("sizes, name", [((0, 8), "ffn_num_hiddens"), ((16, 0), "ffn_num_outputs"),
                                         ((16, 8, 0), "ffn_num_inputs"), ((16, True), "ffn_num_outputs")])
def test_the_ffn_names_a_size_that_is_not_positive(sizes, name):
    """nn.Linear(8, 0) built an FFN that outputs its bias alone; ffn_num_inputs=0 fell back to the outputs."""
    with pytest.raises(ValueError, match=f"{name} must be a positive integer"):
        PositionWiseFFN(*sizes)
