"""Fuzzing the public attention layers' argument checks: random shapes, dtypes and valid_lens, good and
bad. Every call either returns a finite result of the documented shape or raises ``ValueError``,
never another exception type and never NaN for finite inputs. Derandomized and small, so CI stays
fast and a failure reproduces.

Each case is a valid problem with at most one defect, so both outcomes are exercised (drawing every
argument at random gets nearly every call refused by the first check)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from attn_utils import AdditiveAttention, ConcatAttention, DotProductAttention, LocationAttention, masked_softmax
from attn_utils.multihead import MultiHeadAttention

FUZZ = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
LOW_PRECISION = [torch.float16, torch.bfloat16]
TENSOR_DEFECTS = ["int64", "bool", "float64", "float16", "list", "none", "0-d", "2-d"]
LENGTH_DEFECTS = ["too long", "inf", "nan", "negative", "fraction", "string", "junk", "wrong shape", "mask too big",
                  "mask wrong shape", "scalar"]


def check(call, shape):
    """Run ``call``: a ValueError is fine; anything else must be a finite tensor of ``shape``."""
    try:
        out = call()
    except ValueError:
        event("ValueError")
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
    """(queries, keys, values, valid_lens, expected output shape): valid, or with one defect."""
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
        args[which] = spoil(args[which], draw(st.sampled_from(TENSOR_DEFECTS)))
        queries, keys, values = args
    elif defect == "shape":
        bad = draw(st.sampled_from(["key batch", "value count", "key size"]))
        if bad == "key batch":
            keys, values = torch.cat([keys, keys]), torch.cat([values, values])
        elif bad == "value count":
            values = torch.cat([values, values], dim=1)
        else:
            keys = torch.cat([keys, keys], dim=-1)
    event(f"defect: {defect}")
    return queries, keys, values, lens, (batch, num_q, d_v)


@FUZZ
@given(st.integers(1, 3), st.integers(1, 4), st.integers(0, 5), st.sampled_from([None] * 10 + LENGTH_DEFECTS),
       st.sampled_from([torch.float32, torch.float64, *LOW_PRECISION, torch.int64]), st.data())
def test_masked_softmax_returns_finite_weights_or_raises_value_error(batch, num_q, num_k, defect, dtype, data):
    torch.manual_seed(data.draw(st.integers(0, 2**16)))
    X = (10 * torch.randn(batch, num_q, num_k)).to(dtype)
    lens = data.draw(lengths(batch, num_q, num_k, defect))
    check(lambda: masked_softmax(X, lens), (batch, num_q, num_k))


@pytest.mark.parametrize("fused", [True, False])
@FUZZ
@given(problems(same_size=True))
def test_dot_product_attention_returns_finite_output_or_raises_value_error(fused, problem):
    queries, keys, values, lens, shape = problem
    layer = DotProductAttention(0.0, fused=fused).eval()
    check(lambda: layer(queries, keys, values, lens), shape)


# The lazy layers that take queries and keys of different sizes, each built from one size argument
LAZY_LAYERS = {"additive": lambda n: AdditiveAttention(n, 0.0), "additive with bias": lambda n: AdditiveAttention(
               n, 0.0, bias=True), "concat": ConcatAttention, "location": lambda n: LocationAttention(n)}


@pytest.mark.parametrize("kind", list(LAZY_LAYERS))
@FUZZ
@given(st.sampled_from([5] * 4 + [1, 7, 0, -1]), problems(), st.sampled_from(["once", "same", "other"]))
def test_lazy_attention_layers_return_finite_output_or_raise_value_error(kind, num_hiddens, problem, earlier):
    queries, keys, values, lens, shape = problem
    try:
        layer = LAZY_LAYERS[kind](num_hiddens).eval()
    except ValueError:
        assert num_hiddens < 1
        return
    if isinstance(queries, torch.Tensor) and queries.is_floating_point():
        layer.to(queries.dtype)  # lazy weights take the dtype at build time; test the dtype check separately
    if earlier != "once" and all(isinstance(X, torch.Tensor) and X.dim() == 3 for X in (queries, keys)):
        # an earlier call builds the layer for its sizes: the same as this call's, or others
        d_q, d_k = (queries.shape[-1], keys.shape[-1]) if earlier == "same" else (3, 2)
        dtype = queries.dtype if queries.is_floating_point() else torch.float32  # a valid earlier call
        check(lambda: layer(torch.randn(1, 2, d_q, dtype=dtype), torch.randn(1, 4, d_k, dtype=dtype),
                            torch.randn(1, 4, 1, dtype=dtype)), (1, 2, 1))
    check(lambda: layer(queries, keys, values, lens), shape)


@settings(FUZZ, max_examples=120)  # about half the draws stop at the constructor
@given(st.sampled_from([2] * 4 + [1, 4, 0, -1]), st.sampled_from([2] * 4 + [1, 3, 0, -1]), problems(),
       st.booleans(),
       st.sampled_from(["built for the inputs", "float32", "other sizes"]))
def test_multihead_attention_returns_finite_output_or_raises_value_error(num_heads, head_dim, problem, fused, build):
    queries, keys, values, lens, (batch, num_q, _) = problem
    num_hiddens = num_heads * head_dim
    sizes = {}
    if build != "other sizes":
        for name, X in (("query_size", queries), ("key_size", keys), ("value_size", values)):
            if isinstance(X, torch.Tensor) and X.dim() == 3 and X.shape[-1] > 0:
                sizes[name] = X.shape[-1]
    try:
        layer = MultiHeadAttention(num_hiddens, num_heads, 0.0, fused=fused, **sizes).eval()
    except ValueError:
        assert num_hiddens < 1 or num_heads < 1
        return
    if build == "built for the inputs" and isinstance(queries, torch.Tensor) and queries.is_floating_point():
        layer.to(queries.dtype)
    check(lambda: layer(queries, keys, values, lens), (batch, num_q, num_hiddens))
