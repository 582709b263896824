"""Fuzzing the argument checks of the model modules: the translators of chapters 4-6 and 10 and their
decoding, the classifiers of chapter 7 (hierarchical attention, relation classification, glimpses, pooling),
kernel regression, scoring and lookup, tiled and Triton attention, the Transformer's blocks, the copying
task's heads, the registry, ``train_nw`` and the figures a reader calls.

The property is that of ``test_fuzz_arguments`` and ``test_fuzz_more_arguments``: a call returns a
documented result (finite, of the documented shape) or raises ``ValueError`` (or ``TypeError``) whose
message names the offending argument; it never hangs and never returns NaN silently. Each draw is a valid
call with at most one defect, the test parametrized by the argument it spoils (``None``: a valid call), so
a regression that refuses valid input fails too. Where the models legitimately differ (the recurrent
encoders read ``uint8`` ids and refuse source length 0, the Transformer the other way round), the draw is
``either``: refused by name, or a valid result. Models are tiny and built once; the Triton kernels run
through Triton's interpreter (``conftest`` sets it up) at sizes of a few rows.

The regression tests at the end pin each defect this fuzzing found, before and after."""

from __future__ import annotations

import functools
import importlib.util
import math
import re

import matplotlib
import pytest
import torch
from hypothesis import event, given, settings
from hypothesis import strategies as st
from matplotlib import pyplot as plt
from simulated_accelerator import ACCELERATOR, SimulatedAccelerator
from test_fuzz_arguments import FUZZ
from test_fuzz_more_arguments import (
    INF,
    NAN,
    NOT_BOOLS,
    NOT_POSITIVE_INTS,
    draw_arguments,
    expect,
    finite,
    seeded,
)
from torch import nn

from attn_utils import diagrams
from attn_utils.bahdanau import BahdanauDecoder, make_bahdanau
from attn_utils.causal_attention import causal_self_attention, self_attention_context
from attn_utils.decoding import Decoded, beam_search, decode, greedy_decode, length_normalised
from attn_utils.fast_attention import tiled_attention
from attn_utils.glimpse import (
    GlimpseClassifier,
    count_flops,
    exact_scorer_gradient,
    reinforce_surrogate,
    scorer_gradient_samples,
    soft_context,
)
from attn_utils.han import FlatDocumentClassifier, HierarchicalAttentionNetwork, display_weights
from attn_utils.induction import ablate_heads, head_scores, repeated_segments
from attn_utils.kernel_regression import (
    NWKernelRegression,
    bias_variance,
    error_vs_n,
    kernel,
    leave_one_out_mask,
    make_data,
    nadaraya_watson,
)
from attn_utils.language_models import CausalLanguageModel
from attn_utils.lookup import hard_lookup, soft_lookup
from attn_utils.luong import LuongDecoder, local_attention_weights, make_luong
from attn_utils.multihead import MultiHeadAttention
from attn_utils.online_softmax import merge_attention_blocks, online_softmax
from attn_utils.packed import run_packed
from attn_utils.plot import show_heatmaps
from attn_utils.pooling import LearnedQueryPooling, masked_mean, pool_by_scores
from attn_utils.registry import build_model, build_translator
from attn_utils.relation import AttentionBiLSTM, last_states
from attn_utils.scoring import cosine_score, dot_score, general_score, location_score
from attn_utils.seq2seq import Seq2SeqDecoder, Seq2SeqEncoder, make_seq2seq
from attn_utils.tolerance import assert_close
from attn_utils.trainers import train_nw
from attn_utils.transformer import (
    AddNorm,
    PositionWiseFFN,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
    make_transformer,
)
from attn_utils.widgets import draw_lookup

matplotlib.use("Agg")

V = 7  # every translator's source and target vocabulary
NOT_DROPOUTS = [NAN, 1.0, -0.1, True, "0.1", None]


def either(call, named: str, validate=None):
    """``call`` may return a result that passes ``validate`` or raise ``ValueError`` matching ``named``: a
    draw that some implementations accept and others refuse, both documented."""
    try:
        out = call()
    except (ValueError, TypeError) as err:
        event(f"either: {type(err).__name__}")
        assert re.search(named, str(err)), (named, f"{type(err).__name__}: {err}")
        return None
    event("either: returned")
    if validate is not None:
        validate(out)
    return out


def sizes(*names, low=1, high=3):
    return {name: st.integers(low, high) for name in names}


def bad_sizes(*names):
    return {name: (NOT_POSITIVE_INTS, rf"\b{name}\b.*positive integer") for name in names}


# ---------------------------------------------------------------------------------------------
# Constructors: sizes, dropout, flags and options
# ---------------------------------------------------------------------------------------------

SCHEMES = ["sinusoidal", "learned", "rotary", "alibi"]
BAD_DROPOUT = (NOT_DROPOUTS, r"\bdropout must be a number in \[0, 1\)")


def flag(name):
    return (NOT_BOOLS, rf"\b{name} must be True or False")


CONSTRUCTORS = {
    "Seq2SeqEncoder": (Seq2SeqEncoder, {
        **sizes("vocab_size", "embed_size", "num_hiddens", "num_layers"),
        "dropout": st.sampled_from([0.0, 0.3]), "bidirectional": st.booleans()}, {
        **bad_sizes("vocab_size", "embed_size", "num_hiddens", "num_layers"), "dropout": BAD_DROPOUT,
        "bidirectional": flag("bidirectional")}),
    "Seq2SeqDecoder": (Seq2SeqDecoder, {
        **sizes("vocab_size", "embed_size", "num_hiddens", "num_layers"), "dropout": st.sampled_from([0.0, 0.3])}, {
        **bad_sizes("vocab_size", "embed_size", "num_hiddens", "num_layers"), "dropout": BAD_DROPOUT}),
    "make_seq2seq": (make_seq2seq, {
        **sizes("src_vocab_size", "tgt_vocab_size", "embed_size", "num_hiddens", "num_layers"),
        "dropout": st.sampled_from([0.0, 0.3])}, {
        **bad_sizes("src_vocab_size", "tgt_vocab_size", "embed_size", "num_hiddens", "num_layers"),
        "dropout": BAD_DROPOUT}),
    "BahdanauDecoder": (BahdanauDecoder, {
        **sizes("vocab_size", "embed_size", "num_hiddens"), "attention_hiddens": st.sampled_from([None, 1, 3]),
        "maxout": st.booleans()}, {
        **bad_sizes("vocab_size", "embed_size", "num_hiddens"), "maxout": flag("maxout"),
        "attention_hiddens": ([0, -1, True, 2.0, "3"], r"\battention_hiddens\b.*positive integer")}),
    "make_bahdanau": (make_bahdanau, {
        **sizes("src_vocab_size", "tgt_vocab_size", "embed_size", "num_hiddens"), "uniform": st.booleans()}, {
        **bad_sizes("src_vocab_size", "tgt_vocab_size", "embed_size", "num_hiddens"), "uniform": flag("uniform")}),
    "LuongDecoder": (LuongDecoder, {
        **sizes("vocab_size", "embed_size", "num_hiddens", "num_layers"),
        "score": st.sampled_from(["dot", "general", "concat", "uniform"]),
        "local": st.sampled_from([None, "monotonic", "predictive"]), "half_width": st.integers(1, 3),
        "input_feeding": st.booleans(), "dropout": st.sampled_from([0.0, 0.3]), "scaled": st.booleans()}, {
        **bad_sizes("vocab_size", "embed_size", "num_hiddens", "num_layers"),
        "score": (["cosine", None, "Dot"], r"\bscore must be one of"),
        "local": (["local-p", True, "m"], r"\blocal must be one of"),
        "input_feeding": flag("input_feeding"), "scaled": flag("scaled"), "dropout": BAD_DROPOUT}),
    "make_luong": (lambda **kw: make_luong(**kw, local="monotonic"), {
        **sizes("src_vocab_size", "tgt_vocab_size", "embed_size", "num_hiddens", "num_layers", "half_width")}, {
        **bad_sizes("src_vocab_size", "tgt_vocab_size", "embed_size", "num_hiddens", "num_layers"),
        "half_width": (NOT_POSITIVE_INTS, r"\bhalf_width \(D\) must be a positive integer")}),
    "make_transformer": (make_transformer, {
        **sizes("src_vocab_size", "tgt_vocab_size", "ffn_num_hiddens", "num_blks", "max_len", low=2, high=4),
        "num_hiddens": st.just(4), "num_heads": st.sampled_from([1, 2]), "dropout": st.sampled_from([0.0, 0.1]),
        "norm_first": st.booleans(), "tie_embeddings": st.booleans(), "use_bias": st.booleans(),
        "position_scheme": st.sampled_from(SCHEMES), "window": st.sampled_from([None, 1, 3])}, {
        **bad_sizes("src_vocab_size", "tgt_vocab_size", "ffn_num_hiddens", "num_blks", "max_len"),
        "num_hiddens": ([0, -4, True, 4.0, "4", 3], r"\bnum_hiddens\b"), "dropout": BAD_DROPOUT,
        "norm_first": flag("norm_first"), "tie_embeddings": flag("tie_embeddings"), "use_bias": flag("use_bias"),
        "position_scheme": (["absolute", None], r"\bposition_scheme must be one of"),
        "window": ([0, -1, True, 2.0], r"\bwindow must be None")}),
    "TransformerEncoderBlock": (TransformerEncoderBlock, {
        "num_hiddens": st.just(4), "ffn_num_hiddens": st.integers(1, 4), "num_heads": st.sampled_from([1, 2]),
        "dropout": st.sampled_from([0.0, 0.1]), "norm_first": st.booleans(),
        "activation": st.sampled_from(["relu", "gelu"])}, {
        "ffn_num_hiddens": (NOT_POSITIVE_INTS, r"\bffn_num_hiddens\b"), "num_heads": ([0, 3, True, 2.0], "num_heads"),
        "dropout": BAD_DROPOUT, "norm_first": flag("norm_first"),
        "activation": (["tanh", None], r"\bactivation must be one of")}),
    "TransformerDecoderBlock": (TransformerDecoderBlock, {
        "num_hiddens": st.just(4), "ffn_num_hiddens": st.integers(1, 4), "num_heads": st.sampled_from([1, 2]),
        "dropout": st.sampled_from([0.0, 0.1]), "cross_attention": st.booleans()}, {
        "ffn_num_hiddens": (NOT_POSITIVE_INTS, r"\bffn_num_hiddens\b"), "dropout": BAD_DROPOUT,
        "cross_attention": flag("cross_attention")}),
    "AddNorm": (AddNorm, {"norm_shape": st.integers(1, 4), "dropout": st.sampled_from([0.0, 0.5])}, {
        "norm_shape": (NOT_POSITIVE_INTS, r"\bnorm_shape must be a positive integer"), "dropout": BAD_DROPOUT}),
    "PositionWiseFFN": (PositionWiseFFN, {
        **sizes("ffn_num_hiddens", "ffn_num_outputs"), "activation": st.sampled_from(["relu", "gelu"])}, {
        **bad_sizes("ffn_num_hiddens", "ffn_num_outputs"), "activation": (["swish"], "activation must be one of")}),
    "HierarchicalAttentionNetwork": (HierarchicalAttentionNetwork, {
        **sizes("vocab_size", "embed_size", "word_hidden", "sentence_hidden", "attention_size", "num_classes",
                low=2), "pooling": st.sampled_from(["attention", "mean"]), "padding_idx": st.integers(0, 1)}, {
        **bad_sizes("vocab_size", "embed_size", "word_hidden", "sentence_hidden", "attention_size", "num_classes"),
        "pooling": (["max", None], r"\bpooling must be one of"),
        "padding_idx": ([-1, 99, True, 1.5, None], r"\bpadding_idx must be")}),
    "FlatDocumentClassifier": (FlatDocumentClassifier, {
        **sizes("vocab_size", "embed_size", "hidden", "attention_size", "num_classes", low=2),
        "pooling": st.sampled_from(["attention", "mean"])}, {
        **bad_sizes("vocab_size", "embed_size", "hidden", "attention_size", "num_classes"),
        "padding_idx": ([-1, 99, True], r"\bpadding_idx must be")}),
    "AttentionBiLSTM": (AttentionBiLSTM, {
        **sizes("vocab_size", "embed_size", "hidden_size", "num_classes", low=2),
        "dropout": st.sampled_from([0.0, 0.3]), "pooling": st.sampled_from(["attention", "mean", "last"]),
        "padding_idx": st.sampled_from([None, 0, 1])}, {
        **bad_sizes("vocab_size", "embed_size", "hidden_size", "num_classes"), "dropout": BAD_DROPOUT,
        "pooling": (["max"], r"\bpooling must be one of"),
        "padding_idx": ([-1, 99, True, 1.5], r"\bpadding_idx must be")}),
    "LearnedQueryPooling": (LearnedQueryPooling, {
        "size": st.integers(1, 3), "projection_size": st.sampled_from([None, 1, 3])}, {
        "size": (NOT_POSITIVE_INTS, r"\bsize must be a positive integer"),
        "projection_size": ([0, -1, True, 2.0, "3"], r"\bprojection_size must be a positive integer")}),
    "GlimpseClassifier": (GlimpseClassifier, {
        "mode": st.sampled_from(["soft", "hard", "uniform"]), "grid": st.integers(2, 3),
        **sizes("hidden", "score_hidden", "num_classes"), "pool": st.sampled_from([1, 2, 5, 10]),
        "reward": st.sampled_from(["log_likelihood", "correct"]), "baseline": st.booleans(),
        "entropy_weight": st.sampled_from([0.0, 0.01, 1.0]), "inference": st.sampled_from(["argmax", "sample"])}, {
        **bad_sizes("hidden", "score_hidden", "num_classes"),
        "pool": ([0, -1, True, 3, 2.0, "2"], r"\bpool must"), "grid": ([1, True, 2.0, "2"], r"\bgrid must be"),
        "baseline": flag("baseline"), "entropy_weight": ([NAN, INF, -1.0, "0.1", None, True], r"\bentropy_weight\b"),
        "mode": (["glimpse"], r"\bmode must be one of"), "reward": (["accuracy"], r"\breward must be one of"),
        "inference": (["mean"], r"\binference must be")}),
    "NWKernelRegression": (NWKernelRegression, {"w": st.sampled_from([1.0, 0.0, -2.5, 3])}, {
        "w": ([NAN, INF, "3", True, None, [1.0]], r"\bw \(the learned inverse width\) must be a finite number")}),
}
CONSTRUCTOR_CASES = [(name, spoiled) for name, (_, _, bad) in CONSTRUCTORS.items() for spoiled in [None, *bad]]


@pytest.mark.parametrize(("name", "spoiled"), CONSTRUCTOR_CASES, ids=[f"{n}-{s}" for n, s in CONSTRUCTOR_CASES])
@settings(FUZZ, max_examples=4)
@given(st.data())
def test_constructors_build_or_name_the_argument(name, spoiled, data):
    build, good, bad = CONSTRUCTORS[name]
    kwargs, named = draw_arguments(data, good, bad, spoiled)
    expect(lambda: build(**kwargs), named, lambda module: isinstance(module, nn.Module) or pytest.fail(module))


# ---------------------------------------------------------------------------------------------
# The translators (chapters 4-6, 10): teacher-forced passes and decoding
# ---------------------------------------------------------------------------------------------

KINDS = ["seq2seq", "bahdanau", "luong", "luong-p", "transformer"]


@functools.cache
def translator(kind: str) -> nn.Module:
    torch.manual_seed(0)
    return {"seq2seq": lambda: make_seq2seq(V, V, 3, 4, 2),
            "bahdanau": lambda: make_bahdanau(V, V, 3, 4),
            "luong": lambda: make_luong(V, V, 3, 4, 1, score="dot"),
            "luong-p": lambda: make_luong(V, V, 3, 4, 1, local="predictive", half_width=1),
            "transformer": lambda: make_transformer(V, V, 4, 8, 2, 1, max_len=8)}[kind]().eval()


def spoil_tokens(X: torch.Tensor, defect: str):
    """``X`` (batch, steps) of ids with one defect: (the spoiled value, regex naming it, or ``either`` regex)."""
    return {
        "out of the vocabulary": (X + V, r"vocab_size=7", None),
        "negative": (X - V, r"vocab_size=7", None),
        "bool": (X > 2, r"integer tensor", None),
        "float": (X.float(), r"integer tensor", None),
        "1-D": (X[0], r"integer tensor", None),
        "3-D": (X[None], r"integer tensor", None),
        "list": (X.tolist(), r"integer tensor", None),
        "int32": (X.int(), None, None),
        "uint8": (X.to(torch.uint8), None, r"torch\.uint8"),  # recurrent models convert it, the Transformer refuses
        "no step": (X[:, :0], None, r"at least one"),  # an empty source: a Transformer reads it, an RNN refuses
    }[defect]


TOKEN_DEFECTS = ["out of the vocabulary", "negative", "bool", "float", "1-D", "3-D", "list", "int32", "uint8",
                 "no step"]
LENGTH_DEFECTS = {"too long": r"valid_lens", "negative": r"valid_lens", "fraction": r"whole numbers",
                  "nan": r"whole numbers", "bool": r"valid_lens", "wrong shape": r"valid_lens.*shape",
                  "string": r"valid_lens", "zero": None}


def spoil_lengths(lens: torch.Tensor, steps: int, defect: str):
    return {"too long": lens + steps, "negative": lens - steps - 1, "fraction": lens - 0.5,
            "nan": torch.full(lens.shape, NAN), "bool": lens > 0, "wrong shape": torch.cat([lens, lens]),
            "string": "3", "zero": torch.zeros_like(lens)}[defect]


def logits_of(batch, steps):
    return lambda logits: finite(logits, (batch, steps, V), torch.float32)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("spoiled", [None, "src", "tgt", "src_valid_lens", "rows", "empty batch"])
@settings(FUZZ, max_examples=8)
@given(st.integers(1, 2), st.integers(1, 3), st.integers(1, 3), st.sampled_from(["none", "full", "random", "float"]),
       st.data())
def test_translators_return_finite_logits_or_name_the_input(kind, spoiled, batch, src_steps, tgt_steps, lengths,
                                                            data):
    model, gen = translator(kind), seeded(data)
    batch = 0 if spoiled == "empty batch" else batch
    src, tgt = torch.randint(0, V, (batch, src_steps), generator=gen), torch.randint(0, V, (batch, tgt_steps),
                                                                                    generator=gen)
    lens = {"none": None, "full": torch.full((batch,), src_steps), "float": torch.full((batch,), float(src_steps)),
            "random": torch.randint(1, src_steps + 1, (batch,), generator=gen)}[lengths]
    named = may_refuse = None
    if spoiled in ("src", "tgt"):
        defect = data.draw(st.sampled_from(TOKEN_DEFECTS), label="defect")
        event(f"{spoiled}: {defect}")
        spoilt, named, may_refuse = spoil_tokens(src if spoiled == "src" else tgt, defect)
        if spoiled == "src":
            src, lens = spoilt, None if defect in ("1-D", "3-D", "list", "no step") else lens
        else:
            tgt = spoilt
            if defect == "no step":
                named, may_refuse = r"at least one", None  # a decoder needs a token to read
    elif spoiled == "src_valid_lens":
        defect = data.draw(st.sampled_from(list(LENGTH_DEFECTS)), label="defect")
        event(f"lengths: {defect}")
        lens, named = spoil_lengths(torch.full((batch,), src_steps), src_steps, defect), LENGTH_DEFECTS[defect]
        if defect == "zero":
            may_refuse = r"valid_lens must lie in 1\.\."  # the Transformer attends to no source key; an RNN refuses
    elif spoiled == "rows":
        tgt, named = torch.cat([tgt, tgt[:1]]), r"rows"
    call = (lambda: model(src, tgt)) if lens is None else (lambda: model(src, tgt, lens))
    if may_refuse is not None:
        either(call, may_refuse, logits_of(batch, tgt_steps))
    else:
        expect(call, named, logits_of(batch, tgt_steps))


def check_decoded(batch, max_len, source_steps):
    def validate(decoded):
        assert isinstance(decoded, Decoded) and len(decoded.tokens) == len(decoded.scores) == batch
        for row, score in zip(decoded.tokens, decoded.scores):
            assert all(isinstance(t, int) and 0 <= t < V for t in row) and len(row) <= max_len, row
            assert math.isfinite(score) and score <= 1e-6, score
        if decoded.attention is not None:
            assert len(decoded.attention) == batch
            for weights in decoded.attention:
                assert weights.shape[0] <= max_len and weights.shape[1:] == (source_steps,)
                finite(weights)
    return validate


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("spoiled", [None, "bos", "eos", "max_len", "beam_size", "alpha", "src", "src_valid_lens",
                                     "empty batch"])
@settings(FUZZ, max_examples=6)
@given(st.integers(1, 2), st.integers(1, 3), st.data())
def test_decoding_returns_tokens_of_the_vocabulary_or_names_the_argument(kind, spoiled, batch, src_steps, data):
    model, gen = translator(kind), seeded(data)
    search = data.draw(st.sampled_from(["greedy", "beam", "decode"]), label="search")
    if search == "greedy" and spoiled in ("beam_size", "alpha"):
        search = "decode"
    batch = 0 if spoiled == "empty batch" else batch
    src = torch.randint(0, V, (batch, src_steps), generator=gen)
    lens = data.draw(st.sampled_from([None, torch.full((batch,), src_steps)]), label="src_valid_lens")
    kwargs, named = draw_arguments(data, {
        "bos": st.integers(0, V - 1), "eos": st.sampled_from([*range(V), None] if search == "greedy" else range(V)),
        "max_len": st.integers(1, 3), "beam_size": st.integers(1, 3), "alpha": st.sampled_from([0.0, 0.75])}, {
        "bos": ([V, V + 5, -1, True, 1.0, "1", None], r"\bbos\b"),
        "eos": ([V, -1, True, 1.5, "2"], r"\beos\b"),
        "max_len": (NOT_POSITIVE_INTS, r"\bmax_len must be a positive integer"),
        "beam_size": (NOT_POSITIVE_INTS, r"\bbeam_size must be a positive integer"),
        "alpha": ([NAN, INF, "1", None, True], r"\balpha\b")}, spoiled if spoiled in (
        "bos", "eos", "max_len", "beam_size", "alpha") else None)
    if spoiled == "src":
        defect = data.draw(st.sampled_from(["out of the vocabulary", "bool", "float", "1-D", "list"]), label="defect")
        src, named, _ = spoil_tokens(src, defect)
        lens, named = None, named.replace("integer tensor", "src must be an integer tensor")
    elif spoiled == "src_valid_lens":
        lens, named = data.draw(st.sampled_from([
            ([src_steps] * batch, r"src_valid_lens must be a tensor"),
            (torch.full((batch + 1,), src_steps), r"src_valid_lens must be a tensor of shape"),
            (torch.full((batch,), src_steps + 1), r"valid_lens")]), label="lengths")
    if search != "greedy" and kwargs["eos"] is None and named is None:
        named = r"eos"  # a finished beam keeps emitting eos: beam search needs one
    args = (model, src, lens, kwargs["bos"], kwargs["eos"], kwargs["max_len"])
    call = {"greedy": lambda: greedy_decode(*args),
            "beam": lambda: beam_search(*args, kwargs["beam_size"], kwargs["alpha"]),
            "decode": lambda: decode(*args, kwargs["beam_size"], kwargs["alpha"])}[search]
    if search == "decode" and kwargs["beam_size"] == 1 and kwargs["eos"] is None and named == r"eos":
        named = None  # decode with one beam is greedy decoding, which runs to max_len without eos
    expect(call, named, check_decoded(batch, kwargs["max_len"] if isinstance(kwargs["max_len"], int) else 0,
                                      src_steps))


def test_decoding_an_empty_batch_gives_empty_lists_and_beam_search_matches_greedy_at_one_beam():
    model = translator("bahdanau")
    src = torch.randint(0, V, (2, 3), generator=torch.Generator().manual_seed(0))
    for search in (lambda s: greedy_decode(model, s, None, 1, 2, 3), lambda s: beam_search(model, s, None, 1, 2, 3, 2)):
        assert search(src[:0]) == Decoded([], [], [])  # Bahdanau's decoder has attention: an empty list of maps
    assert greedy_decode(translator("seq2seq"), src[:0], None, 1, 2, 3) == Decoded([], [], None)
    greedy, beam = greedy_decode(model, src, None, 1, 2, 3), beam_search(model, src, None, 1, 2, 3, 1)
    assert greedy.tokens == beam.tokens
    with pytest.raises(ValueError, match=r"alpha .* finite number, got nan"):
        length_normalised(torch.zeros(2), torch.ones(2), NAN)


# ---------------------------------------------------------------------------------------------
# Chapter 7's classifiers: hierarchical attention, relation classification, pooling, packing
# ---------------------------------------------------------------------------------------------

@functools.cache
def classifier(name: str) -> nn.Module:
    torch.manual_seed(0)
    return {"han": lambda: HierarchicalAttentionNetwork(9, 3, 2, 2, 2, 3),
            "han, mean": lambda: HierarchicalAttentionNetwork(9, 3, 2, 2, 2, 3, pooling="mean"),
            "flat": lambda: FlatDocumentClassifier(9, 3, 2, 2, 3, pooling="attention")}[name]().eval()


DOCUMENT_DEFECTS = {
    "out of the vocabulary": (lambda ids, s, d: (ids + 9, s, d), r"token ids must lie in \[0, 9\)"),
    "bool": (lambda ids, s, d: (ids > 0, s, d), r"integer token ids"),
    "uint8": (lambda ids, s, d: (ids.to(torch.uint8), s, d), r"integer token ids.*int64 or torch\.int32"),
    "float": (lambda ids, s, d: (ids.float(), s, d), r"integer token ids"),
    "2-D": (lambda ids, s, d: (ids[0], None, None), r"token ids of shape \(batch, sentences, words\)"),
    "sentence_lens too long": (lambda ids, s, d: (ids, s + ids.shape[2] + 1, d), r"sentence_lens must lie in"),
    "sentence_lens bool": (lambda ids, s, d: (ids, s > 0, d), r"sentence_lens as integers"),
    "sentence_lens float": (lambda ids, s, d: (ids, s.float(), d), r"sentence_lens as integers"),
    "sentence_lens shape": (lambda ids, s, d: (ids, torch.cat([s, s], 1), d), r"sentence_lens as integers of"),
    "doc_lens negative": (lambda ids, s, d: (ids, s, d - ids.shape[1] - 1), r"doc_lens must lie in"),
    "doc_lens bool": (lambda ids, s, d: (ids, s, d > 0), r"doc_lens as integers"),
    "doc_lens list": (lambda ids, s, d: (ids, s, d.tolist()), r"doc_lens as integers"),
}


@pytest.mark.parametrize("name", ["han", "han, mean", "flat"])
@pytest.mark.parametrize("spoiled", [None, "ids", "empty"])
@settings(FUZZ, max_examples=12)
@given(st.integers(1, 2), st.integers(1, 3), st.integers(1, 3), st.booleans(), st.data())
def test_document_classifiers_return_finite_logits_or_name_the_input(name, spoiled, batch, sentences, words,
                                                                     given_lens, data):
    model, gen = classifier(name), seeded(data)
    ids = torch.randint(1, 9, (batch, sentences, words), generator=gen)
    if spoiled == "empty":  # an empty batch, or documents of no sentence or no word: defined, not an error
        ids = data.draw(st.sampled_from([ids[:0], ids[:, :0], ids[:, :, :0]]), label="empty")
        batch = ids.shape[0]
    s = torch.randint(0, ids.shape[2] + 1, ids.shape[:2], generator=gen)
    d = torch.randint(0, ids.shape[1] + 1, ids.shape[:1], generator=gen)
    named = None
    if spoiled == "ids":
        defect = data.draw(st.sampled_from(list(DOCUMENT_DEFECTS)), label="defect")
        event(defect)
        spoil, named = DOCUMENT_DEFECTS[defect]
        ids, s, d = spoil(ids, s, d)
        given_lens = given_lens or "lens" in defect
    call = (lambda: model(ids, s, d)) if given_lens else (lambda: model(ids))
    expect(call, named, lambda logits: finite(logits, (batch, 3), torch.float32))


@functools.cache
def relation_model(pooling: str) -> nn.Module:
    torch.manual_seed(0)
    return AttentionBiLSTM(9, 3, 2, 4, dropout=0.0, pooling=pooling).eval()


@pytest.mark.parametrize("pooling", ["attention", "mean", "last"])
@pytest.mark.parametrize("spoiled", [None, "tokens", "lengths"])
@settings(FUZZ, max_examples=12)
@given(st.integers(1, 3), st.integers(1, 4), st.booleans(), st.data())
def test_relation_classifier_returns_finite_logits_or_names_the_input(pooling, spoiled, batch, steps, given_lens,
                                                                      data):
    model, gen = relation_model(pooling), seeded(data)
    tokens = torch.randint(0, 9, (batch, steps), generator=gen)
    lengths = torch.randint(1, steps + 1, (batch,), generator=gen) if given_lens else None
    named = None
    if spoiled == "tokens":
        tokens, named = data.draw(st.sampled_from([
            (tokens + 9, r"token ids must lie in \[0, 9\)"), (tokens > 4, r"torch\.int64 or torch\.int32"),
            (tokens.to(torch.uint8), r"torch\.int64 or torch\.int32"), (tokens.to(torch.int16), "torch.int64"),
            (tokens.float(), "integer dtype"), (tokens[:0], "non-empty"), (tokens[0], r"shape \(batch, steps\)"),
            (tokens.int(), None)]), label="tokens")
    elif spoiled == "lengths":
        lengths, named = data.draw(st.sampled_from([
            (torch.zeros(batch, dtype=torch.long), r"lengths must lie in \[1"),
            (torch.full((batch,), steps + 1), r"lengths must lie in \[1"),
            (torch.ones(batch, dtype=torch.bool), r"lengths must be an integer tensor"),
            (torch.full((batch,), 1.0), r"lengths must be an integer tensor"),
            (torch.ones(batch + 1, dtype=torch.long), r"lengths must be an integer tensor of shape"),
            ([1] * batch, r"lengths must be an integer tensor")]), label="lengths")
    call = (lambda: model(tokens)) if lengths is None else (lambda: model(tokens, lengths))
    expect(call, named, lambda logits: finite(logits, (batch, 4), torch.float32))


@pytest.mark.parametrize("spoiled", [None, "H", "valid_lens", "scores"])
@settings(FUZZ, max_examples=15)
@given(st.integers(0, 2), st.integers(0, 4), st.sampled_from([None, 2]), st.data())
def test_pooling_returns_finite_vectors_or_names_the_input(spoiled, batch, steps, projection, data):
    torch.manual_seed(0)
    layer, gen = LearnedQueryPooling(3, projection), seeded(data)
    H = torch.randn(batch, steps, 3, generator=gen)
    lens = data.draw(st.sampled_from([None, "lengths", "mask"]), label="valid_lens")
    lens = {None: None, "lengths": torch.randint(0, steps + 1, (batch,), generator=gen),
            "mask": torch.rand(batch, steps, generator=gen) < 0.5}[lens]
    named = None
    if spoiled == "H":
        H, named = data.draw(st.sampled_from([
            (H.double(), "float32 weights but got torch.float64"), (H.long(), "float32 weights but got torch.int64"),
            (H[..., :2], r"H of shape \(batch, steps, 3\)"), (H.sum(-1), r"H of shape"), (H.tolist(), r"H of shape")]),
            label="H")
    elif spoiled == "valid_lens":
        lens, named = data.draw(st.sampled_from([
            (torch.full((batch,), steps + 1), "at most the number of keys"), (torch.full((batch,), -1), ">= 0"),
            (torch.full((batch,), 0.5), "whole numbers"), (torch.ones(batch, steps + 1, dtype=torch.bool), "mask"),
            ("2", "valid_lens")]), label="lens")
        if batch == 0 and named in ("at most the number of keys", ">= 0", "whole numbers"):
            named = None  # no length to be wrong
    if spoiled == "scores":  # the functions under the layer
        scores, named = data.draw(st.sampled_from([(torch.randn(batch, steps + 1), r"scores must have the shape"),
                                                   ([0.0], "scores must be a tensor"),
                                                   (torch.zeros(batch, steps), None)]), label="scores")
        expect(lambda: pool_by_scores(scores, H, lens), named, lambda out: finite(out[0], (batch, 3)))
        expect(lambda: masked_mean(H, lens), None, lambda out: finite(out[0], (batch, 3)))
        return
    expect(lambda: layer(H, lens), named, lambda out: finite(out, (batch, 3), torch.float32))


@pytest.mark.parametrize("spoiled", [None, "lengths", "rnn", "X"])
@settings(FUZZ, max_examples=12)
@given(st.integers(0, 3), st.integers(1, 4), st.data())
def test_run_packed_and_last_states_return_finite_states_or_name_the_input(spoiled, N, steps, data):
    torch.manual_seed(0)
    rnn, gen = nn.GRU(2, 3, batch_first=True, bidirectional=True), seeded(data)
    X = torch.randn(N, steps, 2, generator=gen)
    lengths = torch.randint(0, steps + 1, (N,), generator=gen)
    named = None
    if spoiled == "lengths":
        lengths, named = data.draw(st.sampled_from([
            (lengths + steps + 1, r"lengths must lie in \[0"), (lengths - steps - 1, r"lengths must lie in \[0"),
            (lengths.float(), "lengths must be an integer tensor"), (lengths > 0, "lengths must be an integer tensor"),
            (lengths.tolist(), "lengths must be an integer tensor"),
            (torch.zeros(N + 1, dtype=torch.long), "lengths must be an integer")]),
            label="lengths")
        if N == 0 and "must lie" in named:
            named = None
    elif spoiled == "rnn":
        rnn, named = nn.GRU(2, 3, bidirectional=True), "batch_first=True"
    elif spoiled == "X":
        X, named = data.draw(st.sampled_from([(X.sum(-1), r"X must be a tensor \(N, steps"), ("X", "X must be")]),
                             label="X")
    out = expect(lambda: run_packed(rnn, X, lengths), named, lambda out: finite(out, (N, steps, 6)))
    if out is not None and N:
        positive = lengths.clamp(min=1)
        finite(last_states(out, positive), (N, 3))
        bad = data.draw(st.sampled_from([positive - positive, positive + steps, positive.float(), positive > 0]),
                        label="last_states lengths")
        expect(lambda: last_states(out, bad), r"\blengths must")


# ---------------------------------------------------------------------------------------------
# Chapter 7a: glimpses
# ---------------------------------------------------------------------------------------------

@functools.cache
def glimpse_model(mode: str) -> GlimpseClassifier:
    torch.manual_seed(0)
    return GlimpseClassifier(mode, grid=2, hidden=3, score_hidden=2, num_classes=4, entropy_weight=0.1)


@pytest.mark.parametrize("mode", ["soft", "hard", "uniform"])
@pytest.mark.parametrize("spoiled", [None, "images", "labels", "baseline"])
@settings(FUZZ, max_examples=5)
@given(st.integers(0, 2), st.data())
def test_glimpse_classifier_returns_finite_logits_and_losses_or_names_the_input(mode, spoiled, batch, data):
    model, gen = glimpse_model(mode), seeded(data)
    images, labels = torch.rand(batch, 1, 20, 20, generator=gen), torch.randint(0, 4, (batch,), generator=gen)
    named, baseline = None, None
    if spoiled == "images":
        images, named = data.draw(st.sampled_from([
            (images.double(), "float32 weights but got torch.float64"), ((images * 9).long(), "torch.int64 inputs"),
            (images[:, 0], r"images of shape \(batch, 1, 20, 20\)"), (images[..., :19], "images of shape"),
            ([[0.0]], "images of shape")]), label="images")
    elif spoiled == "labels":
        labels, named = data.draw(st.sampled_from([
            (labels + 4, r"labels must lie in \[0, num_classes=4\)"), (labels - 5, r"labels must lie in"),
            (labels.float(), "labels must be integer class indices"), (labels > 1, "labels must be integer"),
            (torch.zeros(batch + 1, dtype=torch.long), r"labels must be integer class indices of shape")]),
            label="labels")
        if batch == 0 and "must lie" in named:
            named = None
    elif spoiled == "baseline":
        baseline, named = data.draw(st.sampled_from([("yes", "baseline must be True or False"), (1, "baseline must"),
                                                     (False, None), (True, None)]), label="baseline")
    model.eval()
    expect(lambda: model(images), named if spoiled == "images" else None,
           lambda logits: finite(logits, (batch, 4), torch.float32))
    if batch == 0:  # a loss over no example is not defined: the rest needs a batch
        return
    model.train()
    expect(lambda: model.training_loss(images, labels), named if spoiled != "baseline" else None,
           lambda out: (finite(out[0], ()), finite(out[2], (batch, 4))))
    count = sum(p.numel() for p in model.scorer_parameters())
    expect(lambda: scorer_gradient_samples(model, images, labels, 2, baseline), named,
           lambda grads: finite(grads, (2, count)))
    if spoiled != "baseline":
        expect(lambda: exact_scorer_gradient(model, images, labels), named, lambda grad: finite(grad, (count,)))
        expect(lambda: count_flops(model.eval(), images), named if spoiled == "images" else None,
               lambda flops: flops > 0 or pytest.fail(flops))


@settings(FUZZ, max_examples=25)
@given(st.integers(1, 3), st.data())
def test_glimpse_helpers_return_finite_numbers_or_name_the_input(batch, data):
    gen = seeded(data)
    log_probs, rewards = torch.randn(batch, generator=gen), torch.randn(batch, generator=gen)
    baseline, named = data.draw(st.sampled_from([
        (None, None), (0.5, None), (torch.randn(batch, generator=gen), None), (NAN, "baseline must be"),
        (INF, "baseline must be"), ("0", "baseline must be"), (torch.zeros(batch + 1), "baseline must be a scalar")]),
        label="baseline")
    expect(lambda: reinforce_surrogate(log_probs, rewards, baseline), named, lambda out: finite(out, ()))
    bad, named = data.draw(st.sampled_from([([0.0], "log_probs must be"), (log_probs.long(), "log_probs must be"),
                                            (log_probs[:0], "the same shape")]), label="log_probs")
    expect(lambda: reinforce_surrogate(bad, rewards), named)
    features, scores = torch.randn(batch, 4, 3, generator=gen), torch.randn(batch, 4, generator=gen)
    finite(soft_context(features, scores)[0], (batch, 3))
    bad, named = data.draw(st.sampled_from([(scores[:, :3], r"scores \(batch, L\)"), ([0.0], "scores must be a tensor"),
                                            (scores.long(), "floating-point scores")]), label="scores")
    expect(lambda: soft_context(features, bad), named)


# ---------------------------------------------------------------------------------------------
# Chapter 2: kernel regression
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("spoiled", [None, "width", "values", "queries", "kernel"])
@settings(FUZZ, max_examples=20)
@given(st.integers(0, 4), st.integers(0, 5), st.sampled_from([torch.float32, torch.float64]),
       st.sampled_from(["gaussian", "boxcar", "epanechnikov", "constant"]), st.data())
def test_nadaraya_watson_returns_finite_weighted_averages_or_names_the_argument(spoiled, num_q, num_k, dtype, name,
                                                                               data):
    gen = seeded(data)
    queries, keys = torch.rand(num_q, generator=gen).to(dtype) * 5, torch.rand(num_k, generator=gen).to(dtype) * 5
    values = torch.randn(num_k, generator=gen).to(dtype)
    kwargs, named = draw_arguments(data, {"width": st.sampled_from([0.5, 3, 1e-9, INF, torch.full((num_q, num_k),
                                                                                                      0.5)])}, {
        "width": ([0, -1.0, NAN, True, "1", None, torch.tensor([1.0] * (num_k + 1)), torch.tensor([0.5, -0.5])],
                  r"\bwidth\b")}, "width" if spoiled == "width" else None)
    if spoiled == "values":
        values, named = data.draw(st.sampled_from([
            (values[:-1] if num_k else torch.zeros(1, dtype=dtype), "values must pair one-to-one with the keys"),
            (values.tolist(), "values must be a tensor"), (torch.arange(num_k), "values must have the dtype"),
            (values.to(torch.float64 if dtype == torch.float32 else torch.float32), "values must have the dtype"),
            (values[:, None].expand(num_k, 2), None)]), label="values")
    elif spoiled == "queries":
        queries, named = data.draw(st.sampled_from([
            (queries > 1, "queries must hold real numbers"), (queries.sum(), "queries must have shape"),
            (queries.tolist(), "queries must be a tensor"), (queries[None].expand(2, num_q), "leading")]),
            label="queries")
    elif spoiled == "kernel":
        name, named = data.draw(st.sampled_from([("cosine", "kernel must be one of"), (None, "kernel must be one of")]),
                                label="kernel")
    v = values.shape[1:] if isinstance(values, torch.Tensor) else ()

    def valid(out):
        predictions, weights = out
        finite(predictions, (num_q, *v), dtype), finite(weights, (num_q, num_k), dtype)
        sums = weights.sum(-1)
        assert bool(((sums - 1).abs() < 1e-4).logical_or(sums == 0).all()), sums  # weights sum to 1 (or none seen)

    expect(lambda: nadaraya_watson(queries, keys, values, name, **kwargs), named, valid)


@pytest.mark.parametrize("spoiled", [None, "n", "repeats", "noise", "high", "dtype"])
@settings(FUZZ, max_examples=10)
@given(st.data())
def test_kernel_regression_data_and_measurements_are_finite_or_name_the_argument(spoiled, data):
    kwargs, named = draw_arguments(data, {
        "n": st.integers(0, 4), "repeats": st.sampled_from([None, 0, 2]), "noise": st.sampled_from([0.0, 0.5]),
        "high": st.sampled_from([0.0, 5.0]), "dtype": st.sampled_from([torch.float32, torch.float64])}, {
        "n": ([-1, True, 2.0, "3", None], r"\bn must be a non-negative integer"),
        "repeats": ([-1, True, 2.0], r"\brepeats must be a non-negative integer"),
        "noise": ([NAN, INF, -0.5, "0.5", None], r"\bnoise must be a finite number >= 0"),
        "high": ([NAN, -1.0, INF, True], r"\bhigh must be a finite number >= 0"),
        "dtype": ([torch.int64, torch.bool, "float32", None], r"\bdtype must be a floating-point")}, spoiled)
    shape = (kwargs["n"],) if kwargs["repeats"] is None else (kwargs["repeats"], kwargs["n"])
    expect(lambda: make_data(**kwargs), named,
           lambda xy: (finite(xy[0], shape, kwargs["dtype"]), finite(xy[1], shape, kwargs["dtype"])))
    n, named = data.draw(st.sampled_from([(3, None), (0, r"\bn\b"), (-1, r"\bn\b"), (2.0, r"\bn\b")]), label="n")
    widths, w_named = data.draw(st.sampled_from([([0.5, 2.0], None), ([0.0], "width"), ([NAN], "width"),
                                                 (0.5, "widths"), (["0.5"], "width")]), label="widths")
    expect(lambda: bias_variance(widths, n=n, repeats=2, num_queries=3), named or w_named,
           lambda rows: all(math.isfinite(r["mse"]) and r["mse"] >= 0 for r in rows) or pytest.fail(rows))
    expect(lambda: error_vs_n([n], 0.5, repeats=2, num_queries=3), named if n != 0 else r"\beach n of ns\b",
           lambda rows: math.isfinite(rows[0]["mse"]) or pytest.fail(rows))
    expect(lambda: leave_one_out_mask(n), named if n != 0 else None,
           lambda mask: mask.shape == (n, n) and not bool(mask.diagonal().any()) or pytest.fail(mask))
    expect(lambda: kernel([0.0] if named else torch.zeros(2)), "u must be a real tensor" if named else None)


# ---------------------------------------------------------------------------------------------
# Chapters 1 and 3: scoring functions and lookup
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("spoiled", [None, "scale", "beta", "eps", "num_keys", "W_a"])
@settings(FUZZ, max_examples=12)
@given(st.integers(1, 2), st.integers(1, 3), st.integers(0, 4), st.sampled_from([torch.float32, torch.float64]),
       st.data())
def test_scoring_functions_return_finite_scores_or_name_the_argument(spoiled, batch, num_q, num_k, dtype, data):
    gen = seeded(data)
    q, k = torch.randn(batch, num_q, 3, generator=gen).to(dtype), torch.randn(batch, num_k, 3, generator=gen).to(dtype)
    shape = (batch, num_q, num_k)
    kwargs, named = draw_arguments(data, {
        "scale": st.sampled_from([None, 1.0, 0.5, 2]), "beta": st.sampled_from([1.0, 10, torch.ones(batch, num_q, 1)]),
        "eps": st.sampled_from([1e-8, 1.0]), "num_keys": st.integers(0, num_k),
        "W_a": st.just(torch.randn(3, 3, generator=gen).to(dtype))}, {
        "scale": ([NAN, INF, "2", True], r"\bscale must be"), "beta": ([NAN, -INF, "2", True, torch.ones(num_k + 2)],
                                                                          r"\bbeta\b"),
        "eps": ([0.0, -1.0, NAN, torch.tensor(1e-8)], r"\beps must be a finite number > 0"),
        "num_keys": ([-1, True, 2.0, "3"], r"\bnum_keys must be a non-negative integer"),
        "W_a": ([[[1.0]], torch.randn(3, 2), torch.randn(3, 3).to(torch.float16)], r"\bW_a\b")}, spoiled)
    if spoiled in (None, "scale"):
        expect(lambda: dot_score(q, k, kwargs["scale"]), named, lambda s: finite(s, shape, dtype))
    if spoiled in (None, "beta", "eps"):
        expect(lambda: cosine_score(q, k, kwargs["beta"], kwargs["eps"]), named, lambda s: finite(s, shape, dtype))
    if spoiled in (None, "num_keys"):
        W = nn.Linear(3, 4).to(dtype)
        expect(lambda: location_score(q, kwargs["num_keys"], W), named,
               lambda s: finite(s, (batch, num_q, kwargs["num_keys"]), dtype))
    if spoiled in (None, "W_a"):
        expect(lambda: general_score(q, k, kwargs["W_a"]), named, lambda s: finite(s, shape, dtype))


@pytest.mark.parametrize("spoiled", [None, "temperature", "values", "queries", "score"])
@settings(FUZZ, max_examples=15)
@given(st.integers(1, 3), st.integers(0, 4), st.sampled_from(["neg_sq_dist", "dot"]), st.data())
def test_lookups_return_finite_averages_or_name_the_argument(spoiled, num_q, num_k, score, data):
    gen = seeded(data)
    queries, keys, values = (torch.randn(num_q, 2, generator=gen), torch.randn(num_k, 2, generator=gen),
                             torch.randn(num_k, generator=gen))
    kwargs, named = draw_arguments(data, {"temperature": st.sampled_from([1.0, 1e-3, 1e6, INF, 2])}, {
        "temperature": ([0, -1.0, NAN, True, "1", None, torch.tensor([1.0, -1.0])], r"\btemperature must be")},
        "temperature" if spoiled == "temperature" else None)
    if spoiled == "values":
        values, named = data.draw(st.sampled_from([
            (values.tolist(), "values must be a tensor"), (values.long(), "values .* must have the dtype"),
            (values.double(), "values .* must have the dtype"), (torch.zeros(num_k + 1), "values must pair")]),
            label="values")
    elif spoiled == "queries":
        queries, named = data.draw(st.sampled_from([
            (queries.tolist(), "queries must be a tensor"), (queries[:, :1], "same feature size"),
            (queries.double(), "dtype"), (queries.long(), "floating-point")]), label="queries")
    elif spoiled == "score":
        score, named = "cosine", r"\bscore must be one of"

    def valid(out):
        output, weights = out
        finite(output, (num_q,)), finite(weights, (num_q, num_k))
        assert bool(((weights.sum(-1) - 1).abs() < 1e-4).all()) or num_k == 0, weights

    expect(lambda: soft_lookup(queries, keys, values, score=score, **kwargs), named, valid)
    expect(lambda: hard_lookup(queries, keys, values, score=score), None if spoiled == "temperature" else named, valid)


# ---------------------------------------------------------------------------------------------
# Chapter 11b: the online softmax, tiled attention and the Triton kernels
# ---------------------------------------------------------------------------------------------

ATTENTION_DEFECTS = {
    "scale": ([NAN, INF, "2", True], r"\bscale must be None"),
    "causal": ([1, "yes", None], r"\bcausal must be True or False"),
    "valid_lens": (["3", "fraction", "too long", "negative"], r"valid_lens"),
    "dtype": (["int64", "mixed"], r"dtype|floating-point"),
    "shape": (["key size", "value count", "batch", "2-D"], r"shape|size|batch|same|pairs"),
}


def attention_case(data, spoiled, batch, heads, n_q, n_k, d):
    """(queries, keys, values, kwargs, regex or None) for tiled and Triton attention, one defect at most."""
    gen = seeded(data)
    shape = (batch, heads) if heads else (batch,)
    q, k, v = (torch.randn(*shape, n, d, generator=gen) for n in (n_q, n_k, n_k))
    layout = data.draw(st.sampled_from(["contiguous", "transposed", "expanded"]), label="layout")
    if layout == "transposed":  # the same values in another memory order (not contiguous)
        q, k, v = (t.transpose(-1, -2).contiguous().transpose(-1, -2) for t in (q, k, v))
    elif layout == "expanded" and n_q:  # a stride-0 axis: one query repeated
        q = q[..., :1, :].expand_as(q)
    lens = data.draw(st.sampled_from([None, "lengths", "per query"]), label="valid_lens")
    lens = {None: None, "lengths": torch.randint(0, n_k + 1, (batch,), generator=gen),
            "per query": torch.randint(0, n_k + 1, (batch, n_q), generator=gen)}[lens]
    kwargs = {"causal": data.draw(st.booleans(), label="causal"), "scale": data.draw(st.sampled_from([None, 0.5, 2]),
                                                                                      label="scale")}
    if spoiled is None:
        return q, k, v, lens, kwargs, None
    values, named = ATTENTION_DEFECTS[spoiled]
    bad = data.draw(st.sampled_from(values), label=f"bad {spoiled}")
    if spoiled in ("scale", "causal"):
        kwargs[spoiled] = bad
    elif spoiled == "valid_lens":
        lens = {"3": "3", "fraction": torch.full((batch,), 0.5), "too long": torch.full((batch,), n_k + 1),
                "negative": torch.full((batch,), -1)}[bad]
    elif spoiled == "dtype":
        q, k, v = (q.long(), k.long(), v.long()) if bad == "int64" else (q, k.double(), v)
    elif bad == "key size":
        k = torch.cat([k, k], dim=-1)
    elif bad == "value count":
        v = torch.zeros(*v.shape[:-2], n_k + 1, d)
    elif bad == "batch":
        k, v = torch.cat([k, k]), torch.cat([v, v])
    else:
        q, k, v = q.reshape(-1, d), k.reshape(-1, d), v.reshape(-1, d)
    return q, k, v, lens, kwargs, named


def reference(q, k, v, lens, causal, scale):
    """Attention written out in float64: the weights of the keys each query sees, 0 for a row that sees none."""
    d = q.shape[-1]
    scores = (q.double() @ k.double().transpose(-1, -2)) * (1 / math.sqrt(d) if scale is None else scale)
    n_q, n_k = scores.shape[-2:]
    keep = torch.ones(n_q, n_k, dtype=torch.bool)
    if causal:
        keep = keep & (torch.arange(n_k) <= torch.arange(n_q)[:, None] + n_k - n_q)
    if lens is not None:
        rows = lens.reshape(lens.shape[0], *([1] * (scores.dim() - 1 - lens.dim())), *lens.shape[1:])
        keep = keep & (torch.arange(n_k) < rows[..., None])
    weights = torch.softmax(scores.masked_fill(~keep, -math.inf), dim=-1).nan_to_num(0.0)
    return weights @ v.double()


@pytest.mark.parametrize("spoiled", [None, *ATTENTION_DEFECTS, "block sizes", "recompute"])
@settings(FUZZ, max_examples=10)
@given(st.integers(1, 2), st.sampled_from([0, 2]), st.integers(0, 5), st.integers(0, 5), st.integers(1, 5), st.data())
def test_tiled_attention_equals_attention_written_out_or_names_the_argument(spoiled, batch, heads, n_q, n_k, d, data):
    q, k, v, lens, kwargs, named = attention_case(data, spoiled if spoiled in ATTENTION_DEFECTS else None,
                                                  batch, heads, n_q, n_k, d)
    kwargs["block_size_q"], kwargs["block_size_k"] = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    if spoiled == "block sizes":
        kwargs["block_size_k"], named = data.draw(st.sampled_from(NOT_POSITIVE_INTS), label="block"), r"block_size_k"
    kwargs["recompute"] = data.draw(st.booleans(), label="recompute")
    if spoiled == "recompute":
        kwargs["recompute"], named = data.draw(st.sampled_from(NOT_BOOLS), label="recompute"), "recompute must be"

    def valid(out):
        output, lse = out
        finite(output, q.shape)
        assert lse.shape == q.shape[:-1] and not bool(lse.isnan().any()), lse
        assert_close(output, reference(q, k, v, lens, kwargs["causal"], kwargs["scale"]).to(output.dtype))

    expect(lambda: tiled_attention(q, k, v, lens, **kwargs), named, valid)


needs_triton = pytest.mark.skipif(importlib.util.find_spec("triton") is None or torch.cuda.is_available(),
                                  reason="Triton's interpreter on CPU tensors (test_triton_attention's cuda tests "
                                         "run the kernels on a GPU)")


@needs_triton
@pytest.mark.parametrize("spoiled", [None, *ATTENTION_DEFECTS, "bool mask", "unsupported dtype", "head size"])
@settings(FUZZ, max_examples=5)
@given(st.sampled_from([0, 2]), st.integers(0, 4), st.integers(0, 4), st.integers(1, 5), st.data())
def test_triton_attention_equals_attention_written_out_or_names_the_argument(spoiled, heads, n_q, n_k, d, data):
    q, k, v, lens, kwargs, named = attention_case(data, spoiled if spoiled in ATTENTION_DEFECTS else None,
                                                  1, heads, n_q, n_k, d)
    if spoiled == "bool mask":
        lens, named = torch.ones(1, n_q, n_k, dtype=torch.bool), "not a boolean mask"
    elif spoiled == "unsupported dtype":
        dtype = data.draw(st.sampled_from([torch.float64, torch.bfloat16]), label="dtype")
        q, k, v, named = q.to(dtype), k.to(dtype), v.to(dtype), r"float64|bfloat16 is not supported on the CPU"
    elif spoiled == "head size":
        q, k, v, named = q[..., :0], k[..., :0], v[..., :0], "head sizes d from 1 to 128"
    if named is not None and named.startswith("dtype"):
        named = r"dtype|float32, float16 or bfloat16|one dtype"
    if spoiled == "shape":
        named = r"shape|same batch size|same size d|3-D|4-D"
    from attn_utils.triton_attention import triton_attention

    def valid(out):
        output, lse = out
        finite(output, q.shape, q.dtype)
        assert lse.shape == q.shape[:-1] and lse.dtype == torch.float32 and not bool(lse.isnan().any())
        assert_close(output, reference(q, k, v, lens, kwargs["causal"], kwargs["scale"]).to(output.dtype))

    expect(lambda: triton_attention(q, k, v, lens, block_size_q=16, block_size_k=16, **kwargs), named, valid)


@settings(FUZZ, max_examples=25)
@given(st.integers(1, 3), st.integers(0, 6), st.integers(1, 4), st.data())
def test_online_softmax_and_merging_equal_the_softmax_or_name_the_argument(rows, cols, block, data):
    X = torch.randn(rows, cols, generator=seeded(data)) * data.draw(st.sampled_from([1.0, 1e3]), label="scale")
    out = online_softmax(X, block_size=block)
    assert_close(out, torch.softmax(X, dim=-1)) if cols else finite(out, (rows, 0))
    bad, named = data.draw(st.sampled_from([(0, "block_size"), (True, "block_size"), (2.0, "block_size")]), label="b")
    expect(lambda: online_softmax(X, block_size=bad), named)
    m, l, acc = torch.zeros(rows), torch.ones(rows), torch.ones(rows, 2)
    spoiled, named = data.draw(st.sampled_from([
        ((m, l, acc), None), ((m[:1] if rows > 1 else torch.zeros(2), l, acc), "m1, l1, m2 and l2"),
        ((m, l, acc[:, None]), "acc1 and acc2"), ((m, l, None), "acc1 and acc2"), (([0.0], l, acc), "m1, l1")]),
        label="second block")
    expect(lambda: merge_attention_blocks(m, l, acc, *spoiled), named,
           lambda merged: torch.testing.assert_close(merged[1], 2 * l))


# ---------------------------------------------------------------------------------------------
# Chapter 10: the Transformer's blocks, causal self-attention and its context
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("block", ["AddNorm", "AddNorm pre-norm", "PositionWiseFFN", "encoder block", "decoder block",
                                   "causal self-attention"])
@pytest.mark.parametrize("spoiled", [None, "X", "Y"])
@settings(FUZZ, max_examples=8)
@given(st.integers(0, 2), st.integers(1, 3), st.data())
def test_transformer_blocks_keep_the_shape_or_name_the_input(block, spoiled, batch, steps, data):
    torch.manual_seed(0)
    X, Y = (torch.randn(batch, steps, 4, generator=seeded(data)) for _ in range(2))
    named = None
    if spoiled == "X":
        X, named = data.draw(st.sampled_from([
            (X[..., :3], r"\b4\b|features"), (X.double(), "float32 weights but got torch.float64"),
            (X.tolist(), r"X |inputs|must be a tensor|expected")]), label="X")
    elif spoiled == "Y":
        if not block.startswith("AddNorm"):
            return
        Y, named = data.draw(st.sampled_from([(Y[:, :1] if steps > 1 else Y[..., :2], "AddNorm"),
                                              (torch.randn(batch + 1, steps, 4), "AddNorm"), ("Y", "AddNorm")]),
                             label="Y")
    layer = {"AddNorm": lambda: AddNorm(4, 0.0), "AddNorm pre-norm": lambda: AddNorm(4, 0.0),
             "PositionWiseFFN": lambda: PositionWiseFFN(3, 4, 4),
             "encoder block": lambda: TransformerEncoderBlock(4, 3, 2, 0.0, norm_first=data.draw(st.booleans())),
             "decoder block": lambda: TransformerDecoderBlock(4, 3, 2, 0.0, cross_attention=False),
             "causal self-attention": lambda: MultiHeadAttention(4, 2, 0.0)}[block]().eval()
    call = {"AddNorm": lambda: layer(X, Y), "AddNorm pre-norm": lambda: layer.residual(X, lambda Z: Y, True),
            "causal self-attention": lambda: causal_self_attention(layer, X)}.get(block, lambda: layer(X))
    expect(call, named, lambda out: finite(out, (batch, steps, 4), torch.float32))


@pytest.mark.parametrize("spoiled", [None, "T", "P", "offset", "causal", "position_scheme", "window"])
@settings(FUZZ, max_examples=10)
@given(st.data())
def test_self_attention_context_fits_its_positions_or_names_the_argument(spoiled, data):
    kwargs, named = draw_arguments(data, {
        "T": st.integers(0, 3), "P": st.integers(0, 3), "offset": st.integers(0, 3),
        "position_scheme": st.sampled_from(SCHEMES), "window": st.sampled_from([None, 1, 2, 8]),
        "causal": st.just(True)}, {
        "T": ([-1, True, 2.0, "2"], r"\bT must be a non-negative integer"),
        "P": ([-1, True, 1.5], r"\bP must be a non-negative integer"),
        "offset": ([-1, True, 0.5, None], r"\boffset must be a non-negative integer"),
        "causal": (NOT_BOOLS, r"\bcausal must be True or False"),
        "position_scheme": (["relative", None], "position_scheme must be one of"),
        "window": ([0, -1, 1.5, True], "window must be None")}, spoiled)
    T, P = kwargs.pop("T"), kwargs.pop("P")

    def valid(context):
        keys = P + T
        if context.mask is not None:
            assert context.mask.shape == (T, keys) and context.mask.dtype == torch.bool
        if context.attn_bias is not None:
            finite(context.attn_bias, (2, T, keys))
        if context.rotary is not None:
            finite(context.rotary[0], (T, 2)), finite(context.rotary[1], (T, 2))

    expect(lambda: self_attention_context(T, P, kwargs.pop("offset"), num_heads=2, head_dim=4, **kwargs), named, valid)


# ---------------------------------------------------------------------------------------------
# Chapter 11: the copying task and its heads
# ---------------------------------------------------------------------------------------------

@functools.cache
def copying_model() -> CausalLanguageModel:
    torch.manual_seed(0)
    return CausalLanguageModel(8, 4, 8, 2, 2).eval()


@pytest.mark.parametrize("spoiled", [None, "vocab_size", "first_token", "generator", "attention_weights", "heads"])
@settings(FUZZ, max_examples=8)
@given(st.data())
def test_copying_task_and_head_scores_are_defined_or_name_the_argument(spoiled, data):
    kwargs, named = draw_arguments(data, {
        "num_sequences": st.integers(1, 2), "length": st.integers(6, 8), "vocab_size": st.integers(4, 8),
        "min_segment": st.just(2), "max_segment": st.integers(2, 3), "first_token": st.integers(0, 1),
        "generator": st.just(None)}, {
        "vocab_size": ([0, True, 2.5, "8"], r"\bvocab_size\b"),
        "first_token": ([-1, True, 1.5, None], r"\bfirst_token\b"),
        "generator": (["seed", 0], r"\bgenerator must be a torch\.Generator")}, spoiled if spoiled in (
        "vocab_size", "first_token", "generator") else None)
    batch = expect(lambda: repeated_segments(**kwargs), named,
                   lambda b: assert_all((b.tokens >= kwargs["first_token"]) & (b.tokens < kwargs["vocab_size"])))
    if batch is None:
        return
    model = copying_model()
    with torch.no_grad():
        model(batch.tokens)
    weights = [blk.attention1.attention_weights for blk in model.blks]
    named = None
    if spoiled == "attention_weights":
        weights, named = data.draw(st.sampled_from([([], "non-empty list"), (None, "non-empty list"),
                                                    ([w[..., :-1, :-1] for w in weights], r"must be \(batch=")]),
                                   label="weights")
    try:
        scores = head_scores(weights, batch.tokens)
    except ValueError as err:
        assert named is not None and re.search(named, str(err)) or "no token of the batch repeats" in str(err), err
    else:
        assert named is None, "the defect was accepted"
        for value in scores.values():
            finite(value, (2, 2))
    heads, named = ([(0, 1), (1, 0)], None) if spoiled != "heads" else data.draw(st.sampled_from([
        ([(1.0, 0)], r"\(layer, head\) pairs of ints"), ([(True, 0)], "pairs of ints"), ([(0, 2)], "head must lie"),
        ([(2, 0)], "layer must lie"), (["ab"], "pairs of ints"), ([(0,)], "pairs of ints")]), label="heads")

    def ablated():
        with ablate_heads(model, heads), torch.no_grad():
            return model(batch.tokens)[0]

    expect(ablated, named, lambda logits: finite(logits, (*batch.tokens.shape, 8)))


def assert_all(condition: torch.Tensor) -> None:
    assert bool(condition.all()), condition


# ---------------------------------------------------------------------------------------------
# The registry, train_nw and the figures a reader calls
# ---------------------------------------------------------------------------------------------

class _Data:
    src_vocab, tgt_vocab = [0] * 5, [0] * 6


@pytest.mark.parametrize("spoiled", [None, "config", "name", "data", "option"])
@settings(FUZZ, max_examples=6)
@given(st.sampled_from(["no attention", "Bahdanau", "Luong local-p", "Transformer"]), st.data())
def test_registry_builds_translators_or_names_the_argument(spoiled, name, data):
    named, options, data_ = None, {}, _Data()
    if spoiled == "name":
        name, named = data.draw(st.sampled_from(["GPT", None, "bahdanau"]), label="name"), "name must be one of"
    elif spoiled == "data":
        data_, named = data.draw(st.sampled_from([None, "tatoeba", {"src_vocab": 5}]), label="data"), "data must have"
    elif spoiled == "option":
        options, named = data.draw(st.sampled_from([({"dropout": NAN}, "dropout"), ({"colour": 1}, "colour"),
                                                    ({"num_layers": 0}, "num_layers"),
                                                    ({"half_width": 2.0}, "half_width"),
                                                    ({"embed_size": True}, "embed_size")]), label="option")
    model = expect(lambda: build_translator(name, data_, 4, 4, **options), named,
                   lambda m: m.config["src_vocab_size"] == 5 or pytest.fail(m.config))
    if spoiled == "config":
        config, named = data.draw(st.sampled_from([("bahdanau", "config must be a dict"), ({"kind": "gru"}, "kind"),
                                                   ({"kind": "seq2seq"}, "src_vocab_size")]), label="config")
        expect(lambda: build_model(config), named)
    elif model is not None:
        rebuilt = build_model(model.config)
        assert [p.shape for p in rebuilt.parameters()] == [p.shape for p in model.parameters()]


@pytest.mark.parametrize("spoiled", [None, "x", "y", "leave_one_out"])
@settings(FUZZ, max_examples=6)
@given(st.integers(2, 5), st.sampled_from([torch.float32, torch.float64]), st.booleans(), st.data())
def test_train_nw_fits_a_finite_width_or_names_the_argument(spoiled, n, dtype, leave_one_out, data):
    x, y = make_data(n, generator=seeded(data), dtype=dtype)
    named = None
    if spoiled == "x":
        x, named = data.draw(st.sampled_from([(x[None], "x must be"), ((x * 10).long(), "x must be"),
                                              (x.tolist(), "x must be"), (x[:1], "y must be")]), label="x")
    elif spoiled == "y":
        y, named = data.draw(st.sampled_from([(y[:-1], "y must be"), (y.to(torch.float16), "y must be"),
                                              (y[None], "y must be")]), label="y")
    elif spoiled == "leave_one_out":
        leave_one_out, named = data.draw(st.sampled_from(NOT_BOOLS), label="leave_one_out"), "leave_one_out must be"
    model = NWKernelRegression(1.0)
    history = expect(lambda: train_nw(model, x, y, max_steps=2, lr=0.1, leave_one_out=leave_one_out), named)
    if history is not None:
        assert math.isfinite(model.w.item()) and len(history.loss) == 2 and all(map(math.isfinite, history.loss))


DIAGRAMS = sorted(name for name in dir(diagrams) if name.startswith("draw_"))


@pytest.mark.parametrize("name", DIAGRAMS)
def test_diagrams_draw_a_figure_or_name_the_axes(name):
    draw = getattr(diagrams, name)
    try:
        assert isinstance(draw(), matplotlib.figure.Figure)
        fig, ax = plt.subplots()
        assert draw(ax) is fig
        with pytest.raises(ValueError, match="ax must be None .* or a matplotlib Axes, got str"):
            draw("ax")
    finally:
        plt.close("all")


@settings(FUZZ, max_examples=10)
@given(st.data())
def test_figures_draw_or_name_the_argument(data):
    matrices, named = data.draw(st.sampled_from([
        (torch.rand(2, 3), None), (torch.rand(1, 2, 3, 3), None), (torch.rand(0, 1, 2, 2), "at least one matrix"),
        (torch.rand(1, 1, 1, 2, 2), "show_heatmaps expects matrices")]), label="matrices")
    try:
        expect(lambda: show_heatmaps(matrices), named)
        keys, values = torch.tensor([[0.0, 0.0], [1.0, 1.0]]), torch.tensor([1.0, 2.0])
        query, named = data.draw(st.sampled_from([((0.5, 0.5), None), (torch.zeros(3), "query must be one point"),
                                                  ((0.5,), "query must be one point")]), label="query")
        expect(lambda: draw_lookup(query, keys, values), named)
        temperature = data.draw(st.sampled_from([0, NAN, "1"]), label="temperature")
        expect(lambda: draw_lookup((0.5, 0.5), keys, values, temperature=temperature), "temperature must be")
        expect(lambda: display_weights(torch.rand(2, 3), torch.rand(2, 3, 4)), None,
               lambda shown: finite(shown, (2, 3, 4)))
        expect(lambda: display_weights(-torch.rand(2, 3), torch.rand(2, 3, 4)), "sentence_weights must be >= 0")
        expect(lambda: local_attention_weights(torch.zeros(1, 1, 4), torch.tensor([4]), torch.tensor([[1.0]]),
                                               data.draw(st.sampled_from([0, 1.5, -1, True])), True), "half_width")
    finally:
        plt.close("all")


# ---------------------------------------------------------------------------------------------
# Regression tests: each defect the fuzzing found (the behaviour before is in the comments)
# ---------------------------------------------------------------------------------------------

def test_recurrent_translators_refuse_sizes_and_flags_by_name():
    # before: vocab_size=0 and embed_size=True built; -1 failed in torch ("negative dimension"); attention_hiddens=0
    # silently became num_hiddens; input_feeding="no" switched input feeding on; bidirectional=1 was taken
    for call, named in [(lambda: make_seq2seq(0, 5, 4, 4, 1), "src_vocab_size must be a positive integer, got 0"),
                        (lambda: Seq2SeqEncoder(5, True, 4, 1), "embed_size must be a positive integer, got True"),
                        (lambda: Seq2SeqDecoder(-1, 4, 4, 1), "vocab_size must be a positive integer, got -1"),
                        (lambda: BahdanauDecoder(5, 4, 4, attention_hiddens=0), "attention_hiddens must be"),
                        (lambda: make_luong(5, 5, 4, 4, 1, input_feeding="no"), "input_feeding must be True or False"),
                        (lambda: Seq2SeqEncoder(5, 4, 4, 1, bidirectional=1), "bidirectional must be True or False")]:
        with pytest.raises(ValueError, match=named):
            call()
    assert BahdanauDecoder(5, 4, 4).attention.W_q.out_features == 4  # None still means num_hiddens


@pytest.mark.parametrize("kind", ["seq2seq", "bahdanau", "luong"])
def test_recurrent_translators_name_token_ids_outside_the_vocabulary_and_other_batches(kind):
    model, src, tgt = translator(kind), torch.tensor([[1, 2, 3]]), torch.tensor([[1, 2]])
    with pytest.raises(ValueError, match=r"token ids must be integers in \[0, vocab_size=7\), got ids from 1 to 9"):
        model(src + torch.tensor([[0, 0, 6]]), tgt)  # before: IndexError "index out of range in self"
    with pytest.raises(ValueError, match=r"vocab_size=7\), got ids from -1"):
        model(src, tgt - 2)  # the decoder's input too
    with pytest.raises(ValueError, match="the decoder's input X has 2 rows but the state was made for a batch of 1"):
        model(src, tgt.repeat(2, 1))  # before: RuntimeError from torch.cat
    with pytest.raises(ValueError, match=r"decoder's input X must hold at least one step"):
        model(src, tgt[:, :0])  # before: an RNN error, "stack expects a non-empty TensorList" or torch.cat's
    with pytest.raises(ValueError, match=r"encoder's input X must hold at least one step"):
        model(src[:, :0], tgt)
    assert model(src.to(torch.uint8), tgt).equal(model(src, tgt))  # other integer dtypes still convert
    with SimulatedAccelerator():
        on_device = translator.__wrapped__(kind).to(ACCELERATOR)  # a fresh copy of the same model
        with pytest.raises(ValueError, match="the encoder's input X is on cpu but the model on cuda"):
            on_device(src, tgt.to(ACCELERATOR))  # before: torch's "Expected all tensors to be on the same device"
        finite(on_device(src.to(ACCELERATOR), tgt.to(ACCELERATOR)).cpu(), (1, 2, V))


@pytest.mark.parametrize("kind", ["seq2seq", "bahdanau", "luong"])
def test_recurrent_translators_check_source_lengths_and_take_an_empty_batch(kind):
    model, src, tgt = translator(kind), torch.tensor([[1, 2, 3], [4, 5, 6]]), torch.tensor([[1, 2], [3, 4]])
    whole = model(src, tgt, torch.tensor([2, 3]))
    assert model(src, tgt, torch.tensor([2.0, 3.0])).equal(whole)  # whole floats are lengths, as before
    with pytest.raises(ValueError, match=r"valid_lens must hold whole numbers, got \[1.5, 3.0\]"):
        model(src, tgt, torch.tensor([1.5, 3.0]))  # before: silently read as 1
    with pytest.raises(ValueError, match="whole numbers"):
        model(src, tgt, torch.tensor([NAN, 3.0]))  # before: a RuntimeError from packing
    with pytest.raises(ValueError, match="not a torch.bool tensor"):
        model(src, tgt, torch.tensor([True, True]))  # before: silently lengths 1
    with pytest.raises(ValueError, match="valid_lens must be a tensor of lengths, got str"):
        model(src, tgt, "3")  # before: TypeError "new(): invalid data type 'str'"
    if kind != "seq2seq":  # (its decoder does not read the lengths)
        with pytest.raises(ValueError, match=r"src_valid_lens must hold whole numbers"):
            model.decoder.init_state(model.encoder(src), torch.tensor([1.5, 3.0]))  # before: truncated to 1
    finite(model(src[:0], tgt[:0], torch.tensor([], dtype=torch.long)), (0, 2, V))  # before: "Cannot pack empty"


def test_decoding_names_bos_outside_the_vocabulary_and_takes_an_empty_batch():
    model, src = translator("luong"), torch.tensor([[1, 2, 3]])
    for search in (greedy_decode, beam_search):
        with pytest.raises(ValueError, match="bos must be a token index below the decoder's vocabulary size 7, got 7"):
            search(model, src, None, 7, 2, 3)  # before: IndexError inside the embedding
        assert search(model, src[:0], None, 1, 2, 3) == Decoded([], [], [])  # before: "Cannot pack" or a reshape
    with pytest.raises(ValueError, match="beam_size must be a positive integer, got True"):
        decode(model, src, None, 1, 2, 3, beam_size=True)  # before: True == 1 ran greedy decoding
    with pytest.raises(ValueError, match="alpha .* must be a finite number, got nan"):
        decode(model, src, None, 1, 2, 3, beam_size=1, alpha=NAN)  # before: accepted (and ignored)
    with pytest.raises(ValueError, match="num_steps must be a positive integer, got 0"):
        model.predict_step((src, torch.tensor([[1]]), torch.tensor([3]), None), "cpu", 0)  # before: named max_len
    with pytest.raises(ValueError, match="decoder must be an nn.Module, got str"):
        type(model)(model.encoder, "luong")  # before: built; the first call failed with "'str' is not callable"


def test_local_attention_weights_refuse_widths_flags_and_lengths_that_do_not_fit():
    scores, lens, centres = torch.zeros(2, 1, 6), torch.tensor([6, 4]), torch.tensor([[2.0], [1.0]])
    expected = local_attention_weights(scores, lens, centres, 2, True)
    for bad, named in [(0, "half_width"), (-1, "half_width"), (NAN, "half_width"), (1.5, "half_width")]:
        with pytest.raises(ValueError, match=named):  # before: -1 gave all-zero weights, NaN NaN weights
            local_attention_weights(scores, lens, centres, bad, True)
    with pytest.raises(ValueError, match="gaussian must be True or False"):
        local_attention_weights(scores, lens, centres, 2, "no")  # before: truthy, the Gaussian was applied
    with pytest.raises(ValueError, match=r"src_valid_lens must be integer lengths of shape \(2,\)"):
        local_attention_weights(scores, lens[:1], centres, 2, True)  # before: one length broadcast to both rows
    with pytest.raises(ValueError, match="src_valid_lens must be at most the number of keys, 6"):
        local_attention_weights(scores, lens + 1, centres, 2, True)  # before: silently every position
    # equal scores: 1/5 on the window 0..4 around 2, 1/4 on the sentence 0..3 around 1, times exp(-d^2 / 2)
    g1, g2 = math.exp(-0.5), math.exp(-2.0)
    torch.testing.assert_close(expected.sum(-1), torch.tensor([[(1 + 2 * g1 + 2 * g2) / 5], [(1 + 2 * g1 + g2) / 4]]))


def test_transformer_flags_and_block_inputs_are_named():
    for flag_name in ("norm_first", "tie_embeddings", "use_bias"):
        with pytest.raises(ValueError, match=f"{flag_name} must be True or False, got str 'x'"):
            make_transformer(5, 5, 4, 8, 2, 1, **{flag_name: "x"})  # before: truthy, switched on
    X = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match="norm_shape must be a positive integer"):
        AddNorm(0, 0.0)  # before: built a layer norm over nothing
    with pytest.raises(ValueError, match=r"AddNorm adds X and Y, which must have one shape"):
        AddNorm(4, 0.0)(X, X[:, :1])  # before: broadcast silently to (2, 3, 4)
    with pytest.raises(ValueError, match=r"AddNorm adds X \(torch.float32\) and Y \(torch.float64\)"):
        AddNorm(4, 0.0)(X, X.double())  # before: "mixed dtype (CPU)" from the layer norm
    with pytest.raises(ValueError, match=r"the sublayer's output"):
        AddNorm(4, 0.0).residual(X, lambda Z: Z[:, :1], norm_first=True)  # before: broadcast silently
    with pytest.raises(ValueError, match=r"PositionWiseFFN expects inputs \(\.\.\., 4\), got \(2, 3, 3\)"):
        PositionWiseFFN(3, 4, 4)(X[..., :3])  # before: "mat1 and mat2 shapes cannot be multiplied"
    with pytest.raises(ValueError, match="PositionWiseFFN has torch.float32 weights but got torch.float64"):
        PositionWiseFFN(3, 4)(X.double())


def test_document_classifiers_refuse_sizes_padding_dtypes_and_boolean_lengths():
    with pytest.raises(ValueError, match="vocab_size must be a positive integer, got 0"):
        HierarchicalAttentionNetwork(0, 3, 2, 2, 2, 3)  # before: IndexError
    with pytest.raises(ValueError, match="num_classes must be a positive integer, got 0"):
        FlatDocumentClassifier(9, 3, 2, 2, 0)  # before: built, logits of no class
    with pytest.raises(ValueError, match=r"padding_idx must be a token id in \[0, vocab_size=9\), got 99"):
        HierarchicalAttentionNetwork(9, 3, 2, 2, 2, 3, padding_idx=99)  # before: AssertionError from nn.Embedding
    with pytest.raises(ValueError, match=r"padding_idx must be a token id in \[0, vocab_size=9\), got -1"):
        HierarchicalAttentionNetwork(9, 3, 2, 2, 2, 3, padding_idx=-1)  # before: ids == -1 counted, row 8 padded
    ids = torch.tensor([[[1, 2, 0], [3, 0, 0]]])
    with pytest.raises(ValueError, match=r"int64 or torch\.int32"):
        classifier("han")(ids.to(torch.uint8))  # before: RuntimeError from the embedding
    with pytest.raises(ValueError, match="sentence_lens as integers"):
        classifier("han")(ids, torch.ones(1, 2, dtype=torch.bool))  # before: silently lengths 1
    for name in ("han", "han, mean", "flat"):  # before (HAN): "cannot reshape tensor of 0 elements"
        finite(classifier(name)(ids[:0]), (0, 3)), finite(classifier(name)(ids[:, :0]), (1, 3))
        finite(classifier(name)(ids[:, :, :0]), (1, 3))
    with pytest.raises(ValueError, match="sentence_weights must be a floating-point tensor"):
        display_weights([0.5], [[0.5]])  # before: AttributeError
    with pytest.raises(ValueError, match="sentence_weights must be >= 0"):
        display_weights(torch.tensor([-0.25]), torch.tensor([[1.0]]))  # before: NaN from the square root


def test_relation_classifier_and_last_states_refuse_what_would_index_the_padding():
    model, tokens = relation_model("last"), torch.tensor([[1, 2, 3], [4, 5, 0]])
    with pytest.raises(ValueError, match=r"torch\.int64 or torch\.int32"):
        model(tokens.to(torch.uint8))  # before: RuntimeError from the embedding (bool too)
    with pytest.raises(ValueError, match="lengths must be an integer tensor"):
        relation_model("mean")(tokens, torch.tensor([True, True]))  # before: silently lengths 1
    with pytest.raises(ValueError, match=r"padding_idx must be None or a token id in \[0, vocab_size=9\)"):
        AttentionBiLSTM(9, 3, 2, 4, padding_idx=9)  # before: AssertionError
    output = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match=r"lengths must lie in \[1, 3\] \(the steps of output\), got 0\.\.2"):
        last_states(output, torch.tensor([0, 2]))  # before: index -1 read the last (padding) step silently
    with pytest.raises(ValueError, match=r"lengths must lie in \[1, 3\]"):
        last_states(output, torch.tensor([4, 2]))  # before: IndexError
    torch.testing.assert_close(last_states(output, torch.tensor([3, 1])),
                               torch.stack([output[0, 2, :2], output[1, 0, :2]]) + output[:, 0, 2:])


def test_pooling_and_packing_refuse_dtypes_shapes_and_lengths_by_name():
    H = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match="LearnedQueryPooling has torch.float32 weights but got torch.float64"):
        LearnedQueryPooling(4)(H.double())  # before: "addmv input tensors must have the same dtype"
    with pytest.raises(ValueError, match=r"scores must have the shape of H without its last axis"):
        pool_by_scores(torch.zeros(2, 2), H)  # before: a broadcasting RuntimeError
    gru = nn.GRU(4, 2, batch_first=True)
    with pytest.raises(ValueError, match=r"lengths must lie in \[0, 3\]"):
        run_packed(gru, H, torch.tensor([-1, 2]))  # before: the row silently all zeros
    with pytest.raises(ValueError, match=r"lengths must lie in \[0, 3\]"):
        run_packed(gru, H, torch.tensor([4, 2]))  # before: RuntimeError from packing
    with pytest.raises(ValueError, match="lengths must be an integer tensor"):
        run_packed(gru, H, torch.tensor([1.5, 2.0]))  # before: silently length 1
    with pytest.raises(ValueError, match="batch_first=True"):
        run_packed(nn.GRU(4, 2), H, torch.tensor([3, 2]))  # before: steps read as the batch, silently
    out = run_packed(gru, H, torch.tensor([3, 0]))
    assert out[1].eq(0).all() and out[0].ne(0).any()


def test_glimpse_classifier_refuses_options_images_and_labels_by_name():
    for kwargs, named in [({"pool": 0}, "pool must be a positive integer"), ({"pool": -1}, "pool must be"),
                          ({"hidden": 0}, "hidden must be a positive integer"),
                          ({"entropy_weight": NAN}, "entropy_weight .* must be a finite number >= 0"),
                          ({"baseline": "no"}, "baseline must be True or False")]:
        with pytest.raises(ValueError, match=named):  # before: ZeroDivisionError, or built (NaN losses, truthy)
            GlimpseClassifier(grid=2, **kwargs)
    model, images, labels = glimpse_model("soft"), torch.rand(2, 1, 20, 20), torch.tensor([1, 3])
    with pytest.raises(ValueError, match="GlimpseClassifier has torch.float32 weights but got torch.float64"):
        model(images.double())  # before: "mat1 and mat2 must have the same dtype"
    finite(model(images[:0]), (0, 4))  # before: "cannot reshape tensor of 0 elements"
    with pytest.raises(ValueError, match=r"labels must lie in \[0, num_classes=4\), got 1\.\.7"):
        model.training_loss(images, labels + torch.tensor([0, 4]))  # before: IndexError "Target 7 is out of bounds"
    with pytest.raises(ValueError, match="labels must be integer class indices"):
        scorer_gradient_samples(glimpse_model("hard"), images, labels.float(), 2)
    with pytest.raises(ValueError, match="baseline must be True or False"):
        scorer_gradient_samples(glimpse_model("hard"), images, labels, 2, baseline="no")  # before: truthy
    with pytest.raises(ValueError, match="baseline must be None, a finite number or a tensor, got nan"):
        reinforce_surrogate(torch.zeros(2), torch.ones(2), NAN)  # before: NaN surrogate
    with pytest.raises(ValueError, match="count_flops needs a batch of at least one image"):
        count_flops(model, images[:0])  # before: a reshape error (and a division by zero)


def test_kernel_regression_refuses_widths_values_and_data_arguments_by_name():
    q, k, y = torch.tensor([0.5, 1.5]), torch.tensor([0.0, 1.0, 2.0]), torch.tensor([1.0, 2.0, 3.0])
    for width in (True, "1", None):  # before: True was a width of 1, "1" and None failed inside torch
        with pytest.raises(ValueError, match="width must be a number > 0 or a tensor"):
            nadaraya_watson(q, k, y, width=width)
    with pytest.raises(ValueError, match=r"width of shape \(4,\) does not broadcast"):
        nadaraya_watson(q, k, y, width=torch.ones(4))  # before: a broadcasting RuntimeError
    with pytest.raises(ValueError, match=r"width of shape \(2, 2, 3\) does not broadcast"):
        nadaraya_watson(q, k, y, width=torch.ones(2, 2, 3))  # before: silently two copies of the result
    with pytest.raises(ValueError, match=r"values must have the dtype of the scores, torch.float32"):
        nadaraya_watson(q, k, y.double())  # before: "expected m1 and m2 to have the same dtype"
    with pytest.raises(ValueError, match="queries must hold real numbers"):
        nadaraya_watson(q > 1, k > 1, y)
    with pytest.raises(ValueError, match=r"w \(the learned inverse width\) must be a finite number, got nan"):
        NWKernelRegression(NAN)  # before: built; every prediction NaN
    with pytest.raises(ValueError, match="noise must be a finite number >= 0, got nan"):
        make_data(3, noise=NAN)  # before: NaN targets
    with pytest.raises(ValueError, match="high must be a finite number >= 0, got -1.0"):
        make_data(3, high=-1.0)  # before: NaN targets (x ** 0.8 of negative x)
    with pytest.raises(ValueError, match="n must be a non-negative integer, got -1"):
        make_data(-1)  # before: "negative dimension"
    for call, named in [(lambda: bias_variance([0.5], n=0), "n must be a positive integer, got 0"),
                        (lambda: bias_variance([0.5], n=5, repeats=0), "repeats must be a positive integer"),
                        (lambda: bias_variance(0.5, n=5), "widths must be a sequence"),
                        (lambda: error_vs_n([0], 0.5), "each n of ns must be a positive integer, got 0"),
                        (lambda: leave_one_out_mask(-1), "n must be a non-negative integer")]:
        with pytest.raises(ValueError, match=named):  # before: ZeroDivisionError, torch.cat's error, TypeError
            call()
    torch.testing.assert_close(nadaraya_watson(q, k, y, "boxcar", width=INF)[0], torch.tensor([2.0, 2.0]))


def test_scores_and_lookups_refuse_numbers_and_dtypes_by_name():
    q, k = torch.randn(1, 2, 3), torch.randn(1, 4, 3)
    for scale in (NAN, INF, True):  # before: NaN or inf scores, True a scale of 1
        with pytest.raises(ValueError, match="scale must be None .* or a finite number"):
            dot_score(q, k, scale)
    with pytest.raises(ValueError, match="eps must be a finite number > 0, got 0"):
        cosine_score(q, torch.zeros(1, 4, 3), eps=0)  # before: 0/0 = NaN scores
    with pytest.raises(ValueError, match="beta must be"):
        cosine_score(q, k, beta=NAN)
    with pytest.raises(ValueError, match="num_keys must be a non-negative integer, got -1"):
        location_score(q, -1, nn.Linear(3, 6))  # before: the scores of 5 keys, silently
    with pytest.raises(ValueError, match=r"W_a \(torch.float64\) must have the dtype of the queries"):
        general_score(q, k, torch.eye(3, dtype=torch.float64))  # before: "expected m1 and m2 ... same dtype"
    keys, values = torch.tensor([[0.0, 0.0], [1.0, 1.0]]), torch.tensor([1.0, 2.0])
    for temperature in ("1", None, True):  # before: TypeError "'>' not supported", True a temperature of 1
        with pytest.raises(ValueError, match="temperature must be a number > 0"):
            soft_lookup(torch.zeros(1, 2), keys, values, temperature=temperature)
    with pytest.raises(ValueError, match=r"values \(torch.int64\) must have the dtype of the queries and keys"):
        soft_lookup(torch.zeros(1, 2), keys, values.long())  # before: "expected scalar type Float but found Long"
    out, weights = hard_lookup(torch.zeros(1, 2), keys[:0], values[:0])  # before: IndexError from argmax
    assert out.equal(torch.zeros(1)) and weights.shape == (1, 0)


def test_tiled_and_triton_attention_refuse_scales_and_flags_and_take_no_query():
    q = torch.randn(1, 3, 4)
    for scale in (NAN, INF, "2", True):  # before: NaN or inf outputs; "2" and True taken as numbers
        with pytest.raises(ValueError, match="tiled_attention: scale must be None"):
            tiled_attention(q, q, q, scale=scale)
    with pytest.raises(ValueError, match="recompute must be True or False"):
        tiled_attention(q, q, q, recompute="no")  # before: truthy
    with pytest.raises(ValueError, match="valid_lens must be None, integer lengths or a boolean mask, got str"):
        tiled_attention(q, q, q, "3")
    out, lse = tiled_attention(q[:, :0], q, q)  # before: "torch.cat(): expected a non-empty list of Tensors"
    assert out.shape == (1, 0, 4) and lse.shape == (1, 0)
    if importlib.util.find_spec("triton") is not None and not torch.cuda.is_available():
        from attn_utils.triton_attention import triton_attention

        with pytest.raises(ValueError, match="triton_attention: scale must be None"):
            triton_attention(q, q, q, scale=NAN)  # before: NaN output
        with pytest.raises(ValueError, match="valid_lens must be None, integer lengths"):
            triton_attention(q, q, q, "3")  # before: TypeError "new(): invalid data type 'str'"


def test_merging_attention_blocks_refuses_parts_of_other_shapes():
    m, l, acc = torch.zeros(3), torch.ones(3), torch.ones(3, 2)
    with pytest.raises(ValueError, match=r"m1, l1, m2 and l2 must be tensors of one shape"):
        merge_attention_blocks(m, l, acc, m[:1], l[:1], acc[:1])  # before: broadcast silently to 3 queries
    with pytest.raises(ValueError, match="acc1 and acc2 must both be None"):
        merge_attention_blocks(m, l, acc, m, l, None)  # before: TypeError from the arithmetic


def test_causal_context_copying_task_registry_and_train_nw_name_their_arguments():
    with pytest.raises(ValueError, match="T must be a non-negative integer, got -1"):
        self_attention_context(-1, 0, 0)  # before: accepted
    with pytest.raises(ValueError, match="causal must be True or False"):
        self_attention_context(2, 0, 0, causal="no")  # before: truthy
    assert self_attention_context(0, 2, 2, window=1, position_scheme="alibi").mask is None  # before: num_queries
    with pytest.raises(ValueError, match=r"X must be a tensor \(batch, T, d\), got list"):
        causal_self_attention(MultiHeadAttention(4, 2, 0.0), [[0.0]])  # before: AttributeError
    with pytest.raises(ValueError, match="attention_weights must be a non-empty list"):
        head_scores([], torch.tensor([[1, 2, 1, 2]]))  # before: "stack expects a non-empty TensorList"
    with pytest.raises(ValueError, match=r"\(layer, head\) pairs of ints, got \(True, 0\)"), \
            ablate_heads(copying_model(), [(True, 0)]):  # before: True taken as layer 1
        pass
    with pytest.raises(ValueError, match="generator must be a torch.Generator or None, got str"):
        repeated_segments(2, 8, 6, 2, 3, generator="seed")  # before: TypeError from randint
    with pytest.raises(ValueError, match="config must be a dict"):
        build_model("seq2seq")  # before: "dictionary update sequence element #0 has length 1"
    with pytest.raises(ValueError, match="data must have the vocabularies src_vocab and tgt_vocab"):
        build_translator("Bahdanau", None)  # before: AttributeError
    with pytest.raises(ValueError, match="num_layers must be a positive integer, got 0"):
        build_translator("Bahdanau", _Data(), 4, 4, num_layers=0)  # before: ignored silently
    x, y = torch.linspace(0, 1, 4), torch.linspace(1, 2, 4)
    with pytest.raises(ValueError, match=r"x must be a floating-point tensor of inputs \(n,\)"):
        train_nw(NWKernelRegression(), x[None], y[None], max_steps=1)  # before: every example masked, w never moved
    with pytest.raises(ValueError, match="train_nw needs at least 1 examples, got 0"):
        train_nw(NWKernelRegression(), x[:0], y[:0], max_steps=1, leave_one_out=False)  # before: NaN loss error
    with pytest.raises(ValueError, match="leave_one_out must be True or False"):
        train_nw(NWKernelRegression(), x, y, max_steps=1, leave_one_out="yes")


def test_figures_name_what_they_cannot_draw():
    try:
        with pytest.raises(ValueError, match="show_heatmaps needs at least one matrix"):
            show_heatmaps(torch.rand(0, 1, 2, 2))  # before: matplotlib's "Number of rows must be a positive integer"
        with pytest.raises(ValueError, match=r"query must be one point in the plane, \(x, y\); got shape \(3,\)"):
            draw_lookup(torch.zeros(3), torch.zeros(2, 2), torch.zeros(2))  # before: RuntimeError from reshape
        with pytest.raises(ValueError, match="ax must be None .* or a matplotlib Axes"):
            diagrams.draw_kv_cache(ax="left")  # before: AttributeError
    finally:
        plt.close("all")
