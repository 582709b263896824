"""Fuzzing the public attention layers' argument checks: random shapes, dtypes and valid_lens, good and
bad. A defect-free call returns a finite result of the documented shape; a call with a defect raises
``ValueError`` naming the problem, never another exception type, or (where the layer can still make
sense of it) returns a finite result of the documented shape. Never NaN for finite inputs.
Derandomized and small, so CI stays fast and a failure reproduces.

Each case is a valid problem with at most one defect, so both outcomes are exercised (drawing every
argument at random gets nearly every call refused by the first check). The test knows which draws
carry a defect, so a regression that refuses valid input fails it."""

from __future__ import annotations

import re

import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from attn_utils import AdditiveAttention, ConcatAttention, DotProductAttention, LocationAttention, masked_softmax
from attn_utils.checks import check_non_negative_int, check_positive_int
from attn_utils.data.batching import BucketBatchSampler, build_array
from attn_utils.data.digits import canvas_layout
from attn_utils.data.moby_dick import load_running_text
from attn_utils.data.splits import split_by_source
from attn_utils.data.vocab import BOS, EOS, PAD, Vocab
from attn_utils.decoding import beam_search, greedy_decode
from attn_utils.glimpse import scorer_gradient_samples
from attn_utils.induction import repeated_segments
from attn_utils.luong import LuongDecoder
from attn_utils.masking import sliding_window_mask
from attn_utils.metrics import bootstrap_bleu
from attn_utils.multihead import MultiHeadAttention
from attn_utils.ngram import KneserNeyLM
from attn_utils.pooling import LearnedQueryPooling
from attn_utils.positional import LearnedPositionalEncoding, PositionalEncoding
from attn_utils.relation import AttentionBiLSTM
from attn_utils.sampling import generate, kv_cache_bytes

FUZZ = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
LOW_PRECISION = [torch.float16, torch.bfloat16]
TENSOR_DEFECTS = ["int64", "bool", "float64", "float16", "list", "none", "0-d", "2-d"]
LENGTH_DEFECTS = ["too long", "inf", "nan", "negative", "fraction", "string", "junk", "wrong shape", "mask too big",
                  "mask wrong shape", "scalar"]


#: what the ValueError says for each kind of defect (a regex searched for in the message)
NAMED = {
    "int64": "floating-point|dtype", "bool": "floating-point|dtype", "float64": "dtype", "float16": "dtype",
    "list": "must be a tensor", "none": "must be a tensor", "0-d": "shape|0-d", "2-d": "shape",
    "lengths": "valid_lens|mask", "key batch": r"same leading \(batch\) dimensions",
    "value count": "keys and values must come in pairs", "key size": "same size",
    "integer scores": "floating-point scores", "built for other sizes": "was built|the size this layer was built for",
    "more keys than max_keys": "max_keys", "float32 weights": "float32 weights but got",
}


def check(call, shape, defects=()):
    """Run ``call``. Without ``defects`` it must return a finite tensor of ``shape``; with them it may raise a
    ValueError whose message names one of them (``NAMED``), or return such a tensor."""
    defects = [d for d in defects if d is not None]
    try:
        out = call()
    except ValueError as err:
        event("ValueError")
        assert defects, f"a defect-free call raised ValueError: {err}"
        assert any(re.search(NAMED[d], str(err)) for d in defects), (defects, str(err))
        return
    event("returned")
    assert isinstance(out, torch.Tensor) and tuple(out.shape) == shape, (type(out), getattr(out, "shape", None))
    assert out.isfinite().all(), out


def spoil(X, defect):
    """``X`` with one defect of its type or shape."""
    if defect in ("int64", "bool", "float64", "float16"):
        return X.to(getattr(torch, defect)) if defect != "bool" else X > 0
    return {"list": X.tolist(), "none": None, "0-d": X.sum(), "2-d": X[0]}[defect]


@st.composite
def lengths(draw, batch, num_q, num_k, defect=None):
    """Valid lengths or masks for (batch, num_q, num_k) scores, or with ``defect`` one that is not."""
    if defect is None:
        kind = draw(st.sampled_from(["none", "lengths", "per-query", "mask", "mask (Q, K)"]))
        if kind == "none":
            return None
        if kind in ("lengths", "per-query"):
            shape = (batch,) if kind == "lengths" else (batch, num_q)
            n = batch if kind == "lengths" else batch * num_q
            return torch.tensor(draw(st.lists(st.integers(0, num_k), min_size=n, max_size=n))).reshape(shape)
        shape = (batch, num_q, num_k) if kind == "mask" else (num_q, num_k)
        torch.manual_seed(draw(st.integers(0, 99)))
        return torch.rand(shape) < draw(st.sampled_from([0.5, 1.0, 0.0]))
    return {
        "too long": torch.full((batch,), num_k + 1), "inf": torch.full((batch,), float("inf")),
        "nan": torch.full((batch,), float("nan")), "negative": torch.full((batch,), -1),
        "fraction": torch.full((batch,), 0.5), "string": "2", "junk": [[1, 2], [3]],
        "wrong shape": torch.zeros(batch + 1, dtype=torch.long), "scalar": 1,
        "mask too big": torch.ones(batch + 1, num_q, num_k, dtype=torch.bool),
        "mask wrong shape": torch.ones(num_q, num_k + 1, dtype=torch.bool),
    }[defect]


@st.composite
def problems(draw, same_size=False):
    """(queries, keys, values, valid_lens, expected output shape, defect): valid (defect None), or with one
    defect, named as in ``NAMED`` (a spoiled dtype equal to the drawn one is none; a key size that differs from
    the query size is a defect only where they must be equal, ``same_size``)."""
    batch, num_q, num_k = draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(1, 5))
    d_q, d_v = draw(st.integers(0, 5)), draw(st.integers(0, 5))
    d_k = d_q if same_size else draw(st.integers(1, 5))
    dtype = draw(st.sampled_from([torch.float32] * 4 + LOW_PRECISION + [torch.float64]))
    torch.manual_seed(draw(st.integers(0, 2**16)))
    scale = draw(st.sampled_from([1.0, 10.0, 1e-3]))
    queries, keys, values = (scale * torch.randn(shape, dtype=dtype) for shape in
                             [(batch, num_q, d_q), (batch, num_k, d_k), (batch, num_k, d_v)])
    defect = draw(st.sampled_from([None] * 6 + ["tensor", "lengths", "shape"]))
    lens = draw(lengths(batch, num_q, num_k, draw(st.sampled_from(LENGTH_DEFECTS)) if defect == "lengths" else None))
    if defect == "tensor":
        which = draw(st.integers(0, 2))
        args = [queries, keys, values]
        defect = draw(st.sampled_from(TENSOR_DEFECTS))
        args[which] = spoil(args[which], defect)
        queries, keys, values = args
        if defect in ("float64", "float16") and getattr(torch, defect) == dtype:
            defect = None  # "spoiled" to the dtype it had
    elif defect == "shape":
        bad = draw(st.sampled_from(["key batch", "value count", "key size"]))
        if bad == "key batch":
            keys, values = torch.cat([keys, keys]), torch.cat([values, values])
        elif bad == "value count":
            values = torch.cat([values, values], dim=1)
        else:
            keys = torch.cat([keys, keys], dim=-1)
        defect = None if bad == "key size" and not (same_size and d_k > 0) else bad
    event(f"defect: {defect}")
    return queries, keys, values, lens, (batch, num_q, d_v), defect


@FUZZ
@given(st.integers(1, 3), st.integers(1, 4), st.integers(0, 5), st.sampled_from([None] * 10 + LENGTH_DEFECTS),
       st.sampled_from([torch.float32, torch.float64, *LOW_PRECISION, torch.int64]), st.data())
def test_masked_softmax_returns_finite_weights_or_raises_value_error(batch, num_q, num_k, defect, dtype, data):
    torch.manual_seed(data.draw(st.integers(0, 2**16)))
    X = (10 * torch.randn(batch, num_q, num_k)).to(dtype)
    lens = data.draw(lengths(batch, num_q, num_k, defect))
    defects = [defect and "lengths", "integer scores" if dtype == torch.int64 else None]
    check(lambda: masked_softmax(X, lens), (batch, num_q, num_k), defects)


@pytest.mark.parametrize("fused", [True, False])
@FUZZ
@given(problems(same_size=True))
def test_dot_product_attention_returns_finite_output_or_raises_value_error(fused, problem):
    queries, keys, values, lens, shape, defect = problem
    layer = DotProductAttention(0.0, fused=fused).eval()
    check(lambda: layer(queries, keys, values, lens), shape, [defect])


# The lazy layers that take queries and keys of different sizes, each built from one size argument
LAZY_LAYERS = {"additive": lambda n: AdditiveAttention(n, 0.0), "additive with bias": lambda n: AdditiveAttention(
               n, 0.0, use_bias=True), "concat": ConcatAttention, "location": lambda n: LocationAttention(n)}
# what each lazy layer is built for at its first call, from the query and key sizes
BUILT_FOR = {"additive": lambda d_q, d_k: (d_q, d_k), "additive with bias": lambda d_q, d_k: (d_q, d_k),
             "concat": lambda d_q, d_k: d_q + d_k, "location": lambda d_q, d_k: d_q}


@pytest.mark.parametrize("kind", list(LAZY_LAYERS))
@FUZZ
@given(st.sampled_from([5] * 4 + [1, 7, 0, -1]), problems(), st.sampled_from(["once", "same", "other"]))
def test_lazy_attention_layers_return_finite_output_or_raise_value_error(kind, num_hiddens, problem, earlier):
    queries, keys, values, lens, shape, defect = problem
    try:
        layer = LAZY_LAYERS[kind](num_hiddens).eval()
    except ValueError as err:
        assert num_hiddens < 1 and re.search("must be a positive int", str(err)), (num_hiddens, str(err))
        return
    defects = [defect]
    if kind == "location" and isinstance(keys, torch.Tensor) and keys.dim() == 3 and keys.shape[1] > num_hiddens:
        defects.append("more keys than max_keys")  # LocationAttention(n) scores at most n key positions
    if isinstance(queries, torch.Tensor) and queries.is_floating_point():
        layer.to(queries.dtype)  # lazy weights take the dtype at build time; test the dtype check separately
    if earlier != "once" and all(isinstance(X, torch.Tensor) and X.dim() == 3 for X in (queries, keys)):
        # an earlier (valid) call builds the layer for its sizes: the same as this call's, or others
        d_q, d_k = (queries.shape[-1], keys.shape[-1]) if earlier == "same" else (3, 2)
        if BUILT_FOR[kind](d_q, d_k) != BUILT_FOR[kind](queries.shape[-1], keys.shape[-1]):
            defects.append("built for other sizes")
        dtype = queries.dtype if queries.is_floating_point() else torch.float32
        n = min(4, num_hiddens) if kind == "location" else 4
        check(lambda: layer(torch.randn(1, 2, d_q, dtype=dtype), torch.randn(1, n, d_k, dtype=dtype),
                            torch.randn(1, n, 1, dtype=dtype)), (1, 2, 1))
    check(lambda: layer(queries, keys, values, lens), shape, defects)


@settings(FUZZ, max_examples=120)  # about half the draws stop at the constructor
@given(st.sampled_from([2] * 4 + [1, 4, 0, -1]), st.sampled_from([2] * 4 + [1, 3, 0, -1]), problems(),
       st.booleans(),
       st.sampled_from(["built for the inputs", "float32", "other sizes"]))
def test_multihead_attention_returns_finite_output_or_raises_value_error(num_heads, head_dim, problem, fused, build):
    queries, keys, values, lens, (batch, num_q, _), defect = problem
    num_hiddens = num_heads * head_dim
    sizes = {}
    if build != "other sizes":
        for name, X in (("query_size", queries), ("key_size", keys), ("value_size", values)):
            if isinstance(X, torch.Tensor) and X.dim() == 3 and X.shape[-1] > 0:
                sizes[name] = X.shape[-1]
    try:
        layer = MultiHeadAttention(num_hiddens, num_heads, 0.0, fused=fused, **sizes).eval()
    except ValueError as err:
        assert (num_hiddens < 1 or num_heads < 1) and re.search("num_hiddens|num_heads", str(err)), str(err)
        return
    if build == "built for the inputs" and isinstance(queries, torch.Tensor) and queries.is_floating_point():
        layer.to(queries.dtype)
    defects = [defect]
    for name, X in (("query_size", queries), ("key_size", keys), ("value_size", values)):
        # the sizes not given (other sizes, or 0 features) default to num_hiddens
        if isinstance(X, torch.Tensor) and X.dim() == 3 and X.shape[-1] != sizes.get(name, num_hiddens):
            defects.append("built for other sizes")
    if build != "built for the inputs" and isinstance(queries, torch.Tensor) and queries.is_floating_point() \
            and queries.dtype != torch.float32:
        defects.append("float32 weights")  # the layer keeps float32 weights
    check(lambda: layer(queries, keys, values, lens), (batch, num_q, num_hiddens), defects)


# ---------------------------------------------------------------------------------------------
# Counts: every public entry point checks them with checks.check_positive_int (or check_non_negative_int)
# ---------------------------------------------------------------------------------------------

_SRC = torch.zeros(2, 3, dtype=torch.long)
_VOCAB = Vocab(["a", "b"], reserved_tokens=[PAD, BOS, EOS])
_NO_MODEL = torch.nn.Identity()  # generate() with 0 new tokens never calls it

#: (what the message starts with, a call that passes the value to that argument and only bad values to none other)
POSITIVE_COUNTS = {
    "beam_search beam_size": ("beam_size", lambda v: beam_search(None, _SRC, None, 1, 2, max_len=5, beam_size=v)),
    "beam_search max_len": ("max_len", lambda v: beam_search(None, _SRC, None, 1, 2, max_len=v)),
    "greedy_decode max_len": ("max_len", lambda v: greedy_decode(None, _SRC, None, 1, 2, max_len=v)),
    "PositionalEncoding max_len": ("max_len", lambda v: PositionalEncoding(8, 0.0, max_len=v)),
    "LearnedPositionalEncoding max_len": ("max_len", lambda v: LearnedPositionalEncoding(8, 0.0, max_len=v)),
    "build_array num_steps": ("num_steps", lambda v: build_array([["a", "b"]], _VOCAB, v)),
    "BucketBatchSampler batch_size": ("batch_size", lambda v: BucketBatchSampler([1, 2, 2], batch_size=v)),
    "bootstrap_bleu num_samples": ("num_samples", lambda v: bootstrap_bleu([["a"]], [["a"]], num_samples=v)),
    "KneserNeyLM order": ("order", lambda v: KneserNeyLM(v, ["a", "b"])),
    "canvas_layout num": ("num", lambda v: canvas_layout(v, seed=0, grid=1)),  # grid=1: refused after num
    "load_running_text min_freq": ("min_freq", lambda v: load_running_text(v, reserved_tokens=())),  # likewise
    "sliding_window_mask window": ("window", lambda v: sliding_window_mask(3, 4, v)),
    "LuongDecoder half_width": (r"half_width \(D\)",
                                lambda v: LuongDecoder(10, 4, 4, local="monotonic", half_width=v)),
    "generate top_k": ("top_k", lambda v: generate(_NO_MODEL, _SRC, 0, top_k=v)),
    "scorer_gradient_samples num_samples": ("num_samples", lambda v: scorer_gradient_samples(None, None, None, v)),
    "LearnedQueryPooling size": ("size", lambda v: LearnedQueryPooling(v)),
    "AttentionBiLSTM hidden_size": ("hidden_size", lambda v: AttentionBiLSTM(10, 4, v, 3)),
    "repeated_segments num_sequences": ("num_sequences", lambda v: repeated_segments(v, 20, 10, 2, 4)),
}


@pytest.mark.parametrize("bad", [True, 0, -1, 2.0, "3"], ids=repr)
@pytest.mark.parametrize("entry", list(POSITIVE_COUNTS))
def test_counts_refuse_bools_zero_negatives_floats_and_strings_naming_the_argument(entry, bad):
    name, call = POSITIVE_COUNTS[entry]
    with pytest.raises(ValueError, match=rf"^{name} must be a positive integer\b.*, got {re.escape(repr(bad))}$"):
        call(bad)
    try:  # a good count gets past the check (the call may still stop later, on the stand-ins passed elsewhere)
        call(2)
    except Exception as err:  # any later failure will do, as long as it is not about this count
        assert not re.match(rf"{name} must be", str(err)), str(err)


NON_NEGATIVE_COUNTS = {
    "generate max_new_tokens": ("max_new_tokens", lambda v: generate(_NO_MODEL, _SRC, v)),
    "kv_cache_bytes length": ("length", lambda v: kv_cache_bytes(2, 2, v, 4)),
    "split_by_source num_test": ("num_test", lambda v: split_by_source(None, 0, v)),
}


@pytest.mark.parametrize("bad", [True, -1, 2.0, "3"], ids=repr)
@pytest.mark.parametrize("entry", list(NON_NEGATIVE_COUNTS))
def test_counts_that_may_be_zero_refuse_bools_negatives_floats_and_strings(entry, bad):
    name, call = NON_NEGATIVE_COUNTS[entry]
    with pytest.raises(ValueError, match=rf"^{name} must be a non-negative integer, got {re.escape(repr(bad))}$"):
        call(bad)
    try:
        call(0)
    except Exception as err:
        assert not re.match(rf"{name} must be", str(err)), str(err)


def test_check_positive_int_returns_the_count_and_says_the_hint():
    assert check_positive_int("order", 3) == 3 and check_non_negative_int("length", 0) == 0
    with pytest.raises(ValueError, match=r"^order must be a positive integer \(1 = unigram\), got 0$"):
        check_positive_int("order", 0, hint="(1 = unigram)")
    assert kv_cache_bytes(2, 2, 0, 4) == 0 and generate(_NO_MODEL, _SRC, 0).equal(_SRC)  # 0 is a count here
