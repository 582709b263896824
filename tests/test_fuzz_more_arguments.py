"""Fuzzing the argument checks of the modules ``test_fuzz_arguments`` does not reach: positions (rotary
angles, sinusoidal and learned encodings, ALiBi, sliding windows), sampling and generation, key-value
caches, the training loop and the exercise checkers.

The property is the same: a call returns a documented result (checked to be finite and of the documented
shape, where that is cheap) or raises ``ValueError`` whose message names the offending argument (or the
exception its docstring documents); it never hangs (small sizes, tiny models, bounded training budgets)
and never returns NaN silently. As there, each draw is a valid call with at most one defect, so a
regression that refuses valid input fails too; here each test is parametrized by the argument it spoils
(None: a valid call), see ``draw_arguments``. ``FUZZ`` (derandomized, no deadline) comes from
``test_fuzz_arguments``; the sizes are small, so CI stays fast and a failure reproduces."""

from __future__ import annotations

import contextlib
import functools
import io
import math
import re
import time

import pytest
import torch
from hypothesis import event, given, settings
from hypothesis import strategies as st
from test_fuzz_arguments import FUZZ
from torch import nn

from attn_utils.alibi import alibi_bias
from attn_utils.exercises import CheckResult, ExerciseFailed, check_exercise, grade
from attn_utils.kv_cache import KVCache
from attn_utils.language_models import CausalLanguageModel
from attn_utils.losses import causal_lm_loss
from attn_utils.masking import causal_mask, masked_softmax, sliding_window_mask
from attn_utils.positional import (
    LearnedPositionalEncoding,
    NoPositionalEncoding,
    PositionalEncoding,
    relative_shift_matrix,
    sinusoidal_encoding,
)
from attn_utils.rotary import apply_rotary, rotary_cos_sin
from attn_utils.sampling import generate, sample_from, sampling_probs
from attn_utils.trainers import train_language_model
from attn_utils.training_loop import fit

NAN, INF = float("nan"), float("inf")
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
#: values that are no positive int (``checks.check_positive_int``), and none that may be 0 either
NOT_POSITIVE_INTS = [0, -1, True, 2.0, "3", None]
NOT_COUNTS = [-1, True, 2.0, "3", None]
NOT_BOOLS = [1, 0, "yes", "no", None, 1.0]


def expect(call, named=None, validate=None, documented=()):
    """Run ``call``. Without a defect (``named`` None) it must return a result that passes ``validate``;
    with one it must raise ``ValueError`` (or ``TypeError``, or one of ``documented``) whose message matches
    the regex ``named``."""
    try:
        out = call()
    except (ValueError, TypeError, *documented) as err:
        event(type(err).__name__)
        assert named is not None, f"a defect-free call raised {type(err).__name__}: {err}"
        assert re.search(named, str(err)), (named, f"{type(err).__name__}: {err}")
        return None
    event("returned")
    assert named is None, f"the defect ({named}) was accepted, returning {out!r:.300}"
    if validate is not None:
        validate(out)
    return out


def draw_arguments(data, good: dict, bad: dict, spoiled: str | None):
    """Keyword arguments drawn from ``good``'s strategies, then, unless ``spoiled`` is None, that one replaced by
    a value drawn from ``bad[spoiled] = (values, regex naming it)``. Returns ``(kwargs, the regex or None)``.

    Each test is parametrized by the argument it spoils (None: none), rather than drawing it: Hypothesis's
    choices are far from uniform (some arguments were never spoiled in 80 draws, or nearly every draw was
    clean), and a parameter runs every kind of defect, and valid calls, on every run."""
    assert spoiled is None or spoiled in bad, spoiled
    kwargs = {name: data.draw(strategy, label=name) for name, strategy in good.items()}
    if spoiled is None:
        return kwargs, None
    values, named = bad[spoiled]
    kwargs[spoiled] = data.draw(st.sampled_from(values), label=f"bad {spoiled}")
    event(f"bad {spoiled}: {kwargs[spoiled]!r:.40}")
    return kwargs, named


def finite(t: torch.Tensor, shape=None, dtype=None) -> None:
    assert isinstance(t, torch.Tensor), type(t)
    assert shape is None or tuple(t.shape) == tuple(shape), (tuple(t.shape), shape)
    assert dtype is None or t.dtype == dtype, (t.dtype, dtype)
    assert bool(t.isfinite().all()), t


def seeded(data) -> torch.Generator:
    return torch.Generator().manual_seed(data.draw(st.integers(0, 2**16), label="seed"))


# ---------------------------------------------------------------------------------------------
# Positions: rotary angles, sinusoidal and learned encodings, ALiBi, sliding windows
# ---------------------------------------------------------------------------------------------


def _log10_angle_bound(max_position: float, dim: int, base: float) -> tuple[float, float]:
    """log10 of the largest |angle| ``p * base^(-2i / dim)`` and of the largest frequency: above about 308.25
    either overflows float64."""
    largest_frequency_log10 = max(0.0, -math.log10(base) * (dim - 2) / dim)
    return (math.log10(max_position) if max_position > 0 else -math.inf) + largest_frequency_log10, \
        largest_frequency_log10


@st.composite
def positions(draw, n=None):
    """A tensor of finite positions (integers, fractions, or huge floats), of ``n`` entries if given."""
    kind = draw(st.sampled_from(["arange", "int", "float", "huge", "0-d", "empty"]))
    n = draw(st.integers(1, 6)) if n is None else n
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    if kind == "arange":
        start = draw(st.sampled_from([0, 3, 10**6, 2**40]))
        return torch.arange(start, start + n)
    if kind == "int":
        return torch.randint(-(2**40), 2**40, (n,), generator=gen)
    if kind == "float":
        return draw(st.sampled_from([1.0, 1e3, 1e6])) * torch.randn(n, generator=gen, dtype=torch.float64)
    if kind == "huge":
        return torch.full((n,), 1e300, dtype=torch.float64)
    return torch.tensor(7) if kind == "0-d" else torch.zeros(0, dtype=torch.long)


GOOD_BASES = [10000.0, 10000, 100.0, 2.0, 1.0, 0.5, 1e-300, 1e-320]
BAD_BASES = ([0.0, -1.0, NAN, INF, True, "10000", None], r"\bbase\b")
BAD_POSITIONS = [torch.tensor([0.0, NAN]), torch.tensor([INF, 1.0]), torch.tensor([True, False]),
                 torch.tensor([1j, 2j]), [0, 1], "0 1", 3]


def _overflows(positions: torch.Tensor, dim: int, base: float) -> bool:
    top = float(positions.abs().max()) if positions.numel() else 0.0
    angle, frequency = _log10_angle_bound(top, dim, base)
    return max(angle, frequency) > 308.0  # a little below float64's 308.25: no draw lies near the edge


@pytest.mark.parametrize("spoiled", [None, "dim", "base", "dtype", "positions", "overflow"])
@settings(FUZZ, max_examples=25)
@given(positions(), st.data())
def test_rotary_cos_sin_returns_finite_unit_pairs_or_names_the_argument(spoiled, where, data):
    kwargs, named = draw_arguments(data, {
        "dim": st.sampled_from([2, 4, 6, 16, 64]), "base": st.sampled_from(GOOD_BASES),
        "dtype": st.sampled_from(FLOATS)}, {
        "dim": ([0, -2, 3, 5, True, 4.0, "4", None], r"\bdim\b|feature size d"), "base": BAD_BASES,
        "dtype": ([torch.int64, torch.bool, torch.complex64, "float32", None, float], r"\bdtype\b"),
        "positions": (BAD_POSITIONS, r"\bpositions\b")}, None if spoiled == "overflow" else spoiled)
    where = kwargs.pop("positions", where)
    if spoiled == "overflow":  # finite positions and base whose angles (or frequencies) overflow float64
        kwargs["base"], kwargs["dim"] = data.draw(st.sampled_from([(1e-300, 4), (1e-300, 64), (1e-320, 64)]))
        if kwargs["base"] == 1e-300:
            where = torch.full_like(where, 1e300, dtype=torch.float64)
        assert _overflows(where, kwargs["dim"], kwargs["base"]) or not where.numel()
    if named is None and _overflows(where, kwargs["dim"], kwargs["base"]):
        named = r"overflow.*\bbase\b|\bbase\b.*overflow"  # angles beyond float64: refused, not NaN
        event("angles overflow")

    def valid(out):
        cos, sin = out
        shape = (*where.shape, kwargs["dim"] // 2)
        finite(cos, shape, kwargs["dtype"]), finite(sin, shape, kwargs["dtype"])
        one = (cos.double() ** 2 + sin.double() ** 2)
        assert bool(((one - 1).abs() <= 4 * torch.finfo(kwargs["dtype"]).eps).all()), one

    expect(lambda: rotary_cos_sin(where, **kwargs), named, valid)


@pytest.mark.parametrize("spoiled", [None, "base", "positions", "x", "overflow"])
@settings(FUZZ, max_examples=25)
@given(st.integers(1, 2), st.integers(0, 5), st.sampled_from([2, 4, 8, 16]), st.sampled_from(FLOATS), st.data())
def test_apply_rotary_keeps_shape_dtype_and_lengths_or_names_the_argument(spoiled, batch, n, d, dtype, data):
    x = data.draw(st.sampled_from([1.0, 1e3]), label="scale") * torch.randn(batch, n, d, generator=seeded(data))
    x = x.to(dtype)
    where = data.draw(st.sampled_from(["default", "offset", "per row", "float"]), label="positions kind")
    kwargs, named = draw_arguments(data, {"base": st.sampled_from(GOOD_BASES)}, {
        "base": BAD_BASES, "positions": ([*BAD_POSITIONS[:4], "0 1", torch.arange(n + 2), torch.zeros(3, n)],
                                         r"\bpositions\b"),
        "x": ([x.long(), x > 0, x.to(torch.complex64), x[0, :, 0], x.tolist(), None, x[..., :-1] if d > 2 else
               torch.randn(2, 3)], r"\bx\b|feature size d")}, None if spoiled == "overflow" else spoiled)
    x = kwargs.pop("x", x)
    if "positions" not in kwargs:
        kwargs["positions"] = {"default": None, "offset": torch.arange(5, 5 + n),
                               "per row": torch.arange(batch * n).reshape(batch, n) * 1000,
                               "float": torch.linspace(-3.5, 3.5, n, dtype=torch.float64)}[where]
    if spoiled == "overflow":  # huge positions with a base below 1 (overflows for d >= 4)
        kwargs["base"], kwargs["positions"] = 1e-300, torch.full((n,), 1e300, dtype=torch.float64)
    if named is None and isinstance(kwargs["positions"], torch.Tensor) \
            and _overflows(kwargs["positions"], x.shape[-1], kwargs["base"]):
        named = r"overflow.*\bbase\b|\bbase\b.*overflow"

    def valid(out):
        finite(out, x.shape, x.dtype)
        if dtype in (torch.float32, torch.float64):  # rotations keep the length of every pair
            torch.testing.assert_close(out.double().norm(dim=-1), x.double().norm(dim=-1), rtol=1e-4, atol=1e-4)

    expect(lambda: apply_rotary(x, **kwargs), named, valid)


@pytest.mark.parametrize("spoiled", [None, "max_len", "num_hiddens"])
@settings(FUZZ, max_examples=20)
@given(st.data())
def test_sinusoidal_encoding_and_shift_matrix_are_bounded_or_name_the_argument(spoiled, data):
    kwargs, named = draw_arguments(data, {
        "max_len": st.integers(1, 40), "num_hiddens": st.sampled_from([2, 4, 8, 32])}, {
        "max_len": (NOT_POSITIVE_INTS, r"\bmax_len\b"),
        "num_hiddens": ([0, 3, -2, 4.0, "4", None, True], r"\bnum_hiddens\b")}, spoiled)
    P = expect(lambda: sinusoidal_encoding(**kwargs), named,
               lambda P: (finite(P, (kwargs["max_len"], kwargs["num_hiddens"]), torch.float32),
                          assert_all(P.abs() <= 1)))
    k, named = data.draw(st.sampled_from([(0, None), (3, None), (-2, None), (0.5, None), (1e300, None),
                                          (NAN, r"\bk\b"), (INF, r"\bk\b"), ("1", r"\bk\b"), (None, r"\bk\b"),
                                          (True, r"\bk\b")]), label="k")
    if P is None:
        return
    M = expect(lambda: relative_shift_matrix(k, kwargs["num_hiddens"]), named,
               lambda M: finite(M, (kwargs["num_hiddens"],) * 2, torch.float32))
    if M is not None and k in (0, 3) and kwargs["max_len"] > 3:  # P[p] @ M == P[p + k]
        torch.testing.assert_close(P[:-3] @ M, P[k:len(P) - 3 + k], atol=1e-5, rtol=0)


def assert_all(condition: torch.Tensor) -> None:
    assert bool(condition.all()), condition


ENCODINGS = {"sinusoidal": PositionalEncoding, "learned": LearnedPositionalEncoding,
             "none": lambda num_hiddens, dropout, max_len=1000: NoPositionalEncoding(num_hiddens, dropout, max_len)}


@pytest.mark.parametrize("spoiled", [None, "num_hiddens", "dropout", "max_len", "offset", "X"])
@pytest.mark.parametrize("kind", list(ENCODINGS))
@settings(FUZZ, max_examples=12)
@given(st.integers(1, 2), st.integers(0, 6), st.sampled_from(FLOATS), st.data())
def test_positional_encodings_add_finite_positions_or_name_the_argument(kind, spoiled, batch, steps, dtype, data):
    build_bad = {"num_hiddens": ([0, 3, 4.0, None], r"\bnum_hiddens\b"), "max_len": (NOT_POSITIVE_INTS, r"\bmax_len\b"),
                 "dropout": ([1.0, -0.1, NAN, True, "0.1", None], r"\bdropout\b")}
    build, named = draw_arguments(data, {
        "num_hiddens": st.sampled_from([2, 8]), "dropout": st.sampled_from([0.0, 0.1]),
        "max_len": st.integers(1, 12)}, build_bad, spoiled if spoiled in build_bad else None)
    layer = expect(lambda: ENCODINGS[kind](**build), named)
    if layer is None:
        return
    layer.eval()
    d, max_len = build["num_hiddens"], build["max_len"]
    X = torch.randn(batch, steps, d, generator=seeded(data)).to(dtype)
    call, named = draw_arguments(data, {"offset": st.integers(0, 6)}, {
        "offset": ([-1, True, 1.0, "1", None], r"\boffset\b"),
        "X": ([X.long(), X[0], X.tolist(), torch.randn(batch, steps, d + 2), None], r"\bX\b")},
        spoiled if spoiled in ("offset", "X") else None)
    X, offset = call.get("X", X), call["offset"]
    if kind == "none" and spoiled == "offset":
        named = None  # no positions are added: the offset is documented to be no limit, and is not read
    if named is None and kind != "none" and offset + steps > max_len:
        named = r"\bmax_len\b"  # the positions do not fit: refused, naming what to change

    def valid(out):
        finite(out, X.shape)
        if kind != "learned":  # a learned encoding adds float32 weights, which promote a float16 X
            assert out.dtype == X.dtype, (out.dtype, X.dtype)

    expect(lambda: layer(X, offset), named, valid)


@pytest.mark.parametrize("spoiled", [None, "num_heads", "num_queries", "num_keys", "symmetric"])
@settings(FUZZ, max_examples=20)
@given(st.data())
def test_alibi_bias_is_a_finite_non_positive_penalty_or_names_the_argument(spoiled, data):
    num_keys = data.draw(st.integers(1, 7), label="num_keys")
    kwargs, named = draw_arguments(data, {
        "num_heads": st.integers(1, 12), "num_queries": st.integers(1, num_keys), "num_keys": st.just(num_keys),
        "symmetric": st.booleans()}, {
        "num_heads": (NOT_POSITIVE_INTS, r"\bnum_heads\b"),
        "num_queries": (NOT_POSITIVE_INTS + [num_keys + 1], r"\bnum_queries\b"),
        "num_keys": (NOT_POSITIVE_INTS, r"\bnum_keys\b"), "symmetric": (NOT_BOOLS, r"\bsymmetric\b")}, spoiled)

    def valid(bias):
        Q, K = kwargs["num_queries"], kwargs["num_keys"]
        finite(bias, (kwargs["num_heads"], Q, K), torch.float32)
        assert_all(bias <= 0 if kwargs["symmetric"] else bias[:, causal_mask(Q, K)] <= 0)  # a penalty on earlier keys
        assert bool((bias[:, -1, -1] == 0).all())  # the last query is the last key: no penalty

    expect(lambda: alibi_bias(**kwargs), named, valid)


@pytest.mark.parametrize("spoiled", [None, "num_queries", "num_keys", "window"])
@settings(FUZZ, max_examples=20)
@given(st.data())
def test_sliding_window_mask_is_causal_and_windowed_or_names_the_argument(spoiled, data):
    num_keys = data.draw(st.integers(1, 7), label="num_keys")
    kwargs, named = draw_arguments(data, {
        "num_queries": st.integers(1, num_keys), "num_keys": st.just(num_keys), "window": st.integers(1, 9)}, {
        "num_queries": (NOT_POSITIVE_INTS + [num_keys + 1], r"\bnum_queries\b"),
        "num_keys": (NOT_POSITIVE_INTS, r"\bnum_keys\b"), "window": (NOT_POSITIVE_INTS, r"\bwindow\b")}, spoiled)

    def valid(mask):
        Q, K, window = kwargs["num_queries"], kwargs["num_keys"], kwargs["window"]
        assert mask.dtype == torch.bool and tuple(mask.shape) == (Q, K)
        assert not bool((mask & ~causal_mask(Q, K)).any())  # never a later key
        seen = torch.arange(K - Q, K) + 1  # how many keys each query could see without a window
        assert mask.sum(dim=-1).tolist() == seen.clamp(max=window).tolist()

    expect(lambda: sliding_window_mask(**kwargs), named, valid)


# ---------------------------------------------------------------------------------------------
# Sampling: the next-token distribution, one draw per row, generation with a tiny language model
# ---------------------------------------------------------------------------------------------

GOOD_TEMPERATURES = [0, 0.0, 1e-45, 1e-8, 0.7, 1, 1.0, 1e6, 1e308]
BAD_TEMPERATURES = ([-1.0, -1e-9, NAN, INF, -INF, True, "1", None, 1j], r"\btemperature\b")
BAD_TOP_K = ([0, -1, True, 2.0, "2"], r"\btop_k\b")


@pytest.mark.parametrize("spoiled", [None, "temperature", "top_k", "logits"])
@settings(FUZZ, max_examples=40)
@given(st.integers(1, 3), st.integers(1, 6), st.sampled_from(FLOATS), st.data())
def test_sampling_probs_is_a_distribution_or_names_the_argument(spoiled, batch, vocab, dtype, data):
    scale = data.draw(st.sampled_from([1.0, 100.0, 1e4]), label="scale")
    logits = (scale * torch.randn(batch, vocab, generator=seeded(data))).to(dtype)
    if vocab > 1 and data.draw(st.booleans(), label="some -inf"):
        logits[:, 0] = -INF  # banned tokens: never drawn
    spoil = {"NaN": lambda t: t.index_fill(1, torch.tensor([0]), NAN), "+inf": lambda t: t.index_fill(
        1, torch.tensor([vocab - 1]), INF), "row of -inf": lambda t: t.index_fill(0, torch.tensor([0]), -INF),
        "integers": lambda t: t.long(), "no vocab": lambda t: t[:, :0], "list": lambda t: t.tolist(),
        "0-d": lambda t: t[0, 0]}
    kwargs, named = draw_arguments(data, {
        "temperature": st.sampled_from(GOOD_TEMPERATURES), "top_k": st.sampled_from([None, 1, 2, vocab + 5])}, {
        "temperature": BAD_TEMPERATURES, "top_k": BAD_TOP_K, "logits": (list(spoil), r"\blogits\b")}, spoiled)
    if spoiled == "logits":
        logits = spoil[kwargs.pop("logits")](logits)

    def valid(probs):
        finite(probs, logits.shape)
        assert_all(probs >= 0)
        assert_all(probs[logits == -INF] == 0)
        total = probs.double().sum(dim=-1)
        assert_all((total - 1).abs() <= 8 * torch.finfo(probs.dtype).eps * vocab)
        if kwargs["temperature"] == 0:  # greedy: all the mass on one token
            assert_all((probs == 1).sum(dim=-1) == 1)
        elif kwargs["top_k"] is not None:
            assert_all((probs > 0).sum(dim=-1) <= kwargs["top_k"])

    expect(lambda: sampling_probs(logits, **kwargs), named, valid)


@pytest.mark.parametrize("spoiled", [None, "probs", "generator"])
@settings(FUZZ, max_examples=30)
@given(st.integers(0, 3), st.integers(1, 6), st.sampled_from(FLOATS), st.data())
def test_sample_from_draws_a_token_of_positive_probability_or_names_the_argument(spoiled, batch, vocab, dtype, data):
    probs = torch.rand(batch, vocab, generator=seeded(data)).to(dtype)
    if data.draw(st.booleans(), label="zeros"):
        probs[:, :-1] = 0  # only the last token can be drawn
    bad_probs = [probs.long() + 1, probs[:, :0].clone() if batch else torch.zeros(2, 0), probs.tolist(),
                 probs.reshape(-1), probs[None], None]
    if batch:
        bad_probs += [probs.index_fill(1, torch.tensor([0]), -0.5), probs.index_fill(1, torch.tensor([0]), NAN),
                      probs.index_fill(1, torch.tensor([0]), INF), probs.index_fill(0, torch.tensor([0]), 0.0)]
    kwargs, named = draw_arguments(data, {
        "generator": st.sampled_from([None, torch.Generator().manual_seed(1)])}, {
        "probs": (bad_probs, r"\bprobs\b"), "generator": ([0, 7, "cpu", torch.device("cpu")], r"\bgenerator\b")},
        spoiled)
    probs = kwargs.pop("probs", probs)

    def valid(index):
        assert index.dtype == torch.long and tuple(index.shape) == (batch,), (index.dtype, index.shape)
        assert_all((index >= 0) & (index < vocab))
        assert_all(probs[torch.arange(batch), index] > 0)

    expect(lambda: sample_from(probs, **kwargs), named, valid)


VOCAB, MAX_LEN = 11, 12


@functools.cache
def tiny_lm(position_scheme: str = "learned", window: int | None = None, num_kv_heads: int | None = None):
    """A tiny untrained causal language model (vocab 11, d 8, 2 heads, 2 blocks, max_len 12), in eval mode."""
    torch.manual_seed(0)
    return CausalLanguageModel(VOCAB, 8, 16, 2, 2, max_len=MAX_LEN, position_scheme=position_scheme,
                               window=window, num_kv_heads=num_kv_heads).eval()


@pytest.mark.parametrize("spoiled", [None, "max_new_tokens", "temperature", "top_k", "use_cache", "return_logits",
                                     "prompt", "ids", "generator"])
@settings(FUZZ, max_examples=15)
@given(st.integers(1, 2), st.integers(1, 4), st.data())
def test_generate_extends_the_prompt_or_names_the_argument(spoiled, batch, length, data):
    prompt = torch.randint(1, VOCAB, (batch, length), generator=seeded(data))
    if data.draw(st.booleans(), label="int32"):
        prompt = prompt.int()
    bad_prompts = {"empty": prompt[:, :0], "float": prompt.float(), "1-d": prompt[0], "3-d": prompt[None],
                   "bool": prompt > 3, "list": prompt.tolist(), "none": None}
    model_only = {"too big": prompt.index_fill(1, torch.tensor([0]), VOCAB), "negative": prompt.index_fill(
        1, torch.tensor([0]), -1), "int16": prompt.to(torch.int16)}  # refused when the model reads them
    kwargs, named = draw_arguments(data, {
        "max_new_tokens": st.integers(0, 4), "temperature": st.sampled_from(GOOD_TEMPERATURES),
        "top_k": st.sampled_from([None, 1, 3, VOCAB + 1]), "use_cache": st.booleans(),
        "return_logits": st.booleans()}, {
        "max_new_tokens": (NOT_COUNTS, r"\bmax_new_tokens\b"), "temperature": BAD_TEMPERATURES, "top_k": BAD_TOP_K,
        "use_cache": (NOT_BOOLS, r"\buse_cache\b"), "return_logits": (NOT_BOOLS, r"\breturn_logits\b"),
        "prompt": (list(bad_prompts), r"\bprompt\b"), "ids": (list(model_only), r"token ids"),
        "generator": ([0, "seed", torch.device("cpu")], r"\bgenerator\b")}, spoiled)
    if spoiled == "prompt":
        prompt = bad_prompts[kwargs.pop("prompt")]
    elif spoiled == "ids":
        prompt = model_only[kwargs.pop("ids")]
        if kwargs["max_new_tokens"] == 0:
            named = None  # 0 new tokens: the model never reads the prompt, which comes back as it is
    generator = kwargs.pop("generator", torch.Generator().manual_seed(0))
    new = kwargs["max_new_tokens"]
    if named is None and length + new - 1 > MAX_LEN and new:
        named = r"\bmax_len\b"  # the learned positions end at max_len: refused when a step reaches them

    def valid(out):
        tokens, logits = out if kwargs["return_logits"] else (out, None)
        assert tokens.dtype == prompt.dtype and tuple(tokens.shape) == (batch, length + new), tokens.shape
        assert torch.equal(tokens[:, :length], prompt)
        assert_all((tokens[:, length:] >= 0) & (tokens[:, length:] < VOCAB))
        if logits is not None:
            finite(logits, (batch, new, VOCAB), torch.float32)

    expect(lambda: generate(tiny_lm(), prompt, generator=generator, **kwargs), named, valid)


# ---------------------------------------------------------------------------------------------
# Caches: a KVCache built from bad tensors, and a language model given a cache of another model
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("spoiled", [None, "keys", "values", "length"])
@settings(FUZZ, max_examples=20)
@given(st.integers(1, 3), st.integers(0, 2), st.integers(1, 2), st.integers(0, 4), st.integers(1, 4), st.data())
def test_kv_cache_holds_its_keys_and_values_or_names_the_argument(spoiled, blocks, batch, heads, positions_, head_dim,
                                                                  data):
    shape = (blocks, batch, heads, positions_, head_dim)
    keys, values = torch.randn(shape, generator=seeded(data)), torch.randn(shape, generator=seeded(data))
    kwargs, named = draw_arguments(data, {
        "length": st.sampled_from([None, positions_, positions_ + 3])}, {
        "keys": ([keys[0], keys.tolist(), None, keys[:0], keys.long(), keys > 0], r"\bkeys\b|\bblock\b"),
        "values": ([values[0], None, values[..., :1] if head_dim > 1 else values[..., :0],
                    values.double(), values.to("meta")], r"\bvalues\b"),
        "length": ([positions_ - 1, True, 2.0, "3"] if positions_ else [-1, True, 2.0, "3"], r"\blength\b")},
        spoiled)
    keys, values = kwargs.pop("keys", keys), kwargs.pop("values", values)

    def valid(cache):
        assert cache.shape == shape and cache.positions == positions_
        assert cache.length == (positions_ if kwargs["length"] is None else kwargs["length"])
        assert torch.equal(cache.keys, keys) and torch.equal(cache.values, values)

    expect(lambda: KVCache(keys, values, **kwargs), named, valid)


SCHEMES = ["learned", "sinusoidal", "rotary", "alibi"]


CACHES = ["as it is", "pair", "empty", "longer", "batch", "blocks", "heads", "head size", "float64", "float16",
          "int64", "meta", "4-d", "list", "triple", "dict", "short length", "values of another length", "cross keys",
          "past max_len", "ids"]


@pytest.mark.parametrize("kind", CACHES)
@settings(FUZZ, max_examples=6)
@given(st.sampled_from(SCHEMES), st.sampled_from([None, 3]), st.sampled_from([None, 1]), st.integers(1, 2),
       st.integers(0, 5), st.integers(1, 3), st.data())
def test_language_model_extends_a_cache_or_names_what_does_not_fit(kind, scheme, window, kv_heads, batch, prefix, T,
                                                                  data):
    model = tiny_lm(scheme, window, kv_heads)
    gen = seeded(data)
    X = torch.randint(0, VOCAB, (batch, T), generator=gen)
    if prefix:
        _, cache = model(torch.randint(0, VOCAB, (batch, prefix), generator=gen))
    else:
        cache = model.empty_cache(batch)
    k, v = cache.keys, cache.values  # (blocks, batch, kv heads, P, d / heads)
    other = {"batch": (k.repeat(1, 2, 1, 1, 1), r"\bbatch\b"), "blocks": (torch.cat([k, k]), r"\bnum_blks\b"),
             "heads": (k.repeat(1, 1, 3, 1, 1), r"\bkv_heads\b"), "head size": (k[..., :2], r"d / heads"),
             "float64": (k.double(), r"the cache holds torch.float64 keys and values but the model computes in"),
             "float16": (k.half(), r"the cache holds torch.float16 keys and values but the model computes in"),
             "int64": (k.long(), r"the cache's keys and values must be floating-point"),
             "meta": (k.to("meta"), r"the cache is on meta but the model on cpu")}
    event(f"{scheme}, window {window}, kv heads {kv_heads}")
    named = None
    L = cache.length  # the position of X's first token
    if kind == "pair":
        cache, L = (k, v), k.shape[3]
    elif kind == "empty":
        cache, L = model.empty_cache(batch), 0
    elif kind == "longer":  # as if earlier tokens had left a window
        cache, L = cache.with_length(L + 2), L + 2
    elif kind in other:
        spoiled, named = other[kind]
        cache = functools.partial(KVCache, spoiled, spoiled.clone(), L)  # made inside the call: it may refuse
    elif kind == "4-d":
        cache, named = (k[0], v[0]), r"the cache's keys must be"
    elif kind in ("list", "triple", "dict"):
        cache = {"list": [k, v], "triple": (k, v, L), "dict": {"keys": k, "values": v}}[kind]
        named = r"cache must be a KVCache"
    elif kind == "short length":
        named = r"\blength\b"
        cache = functools.partial(KVCache, k, v, k.shape[3] - 1 if k.shape[3] else -1)
    elif kind == "values of another length":
        cache, named = (k, nn.functional.pad(v, (0, 0, 0, 1))), r"one shape"  # one position more
    elif kind == "cross keys":
        cache, named = KVCache(k, v, L, cross_keys=k, cross_values=v), r"cache must be a KVCache of this model"
    elif kind == "past max_len":
        cache, L = cache.with_length(MAX_LEN), MAX_LEN
    elif kind == "ids":
        X, named = X.index_fill(1, torch.tensor([0]), VOCAB), r"token ids"
    if named is None and scheme in ("learned", "sinusoidal") and L + T > MAX_LEN:
        named = r"\bmax_len\b"  # positions the encoding has not got
    P = k.shape[3] if kind not in ("empty",) else 0

    def valid(out):
        logits, new = out
        finite(logits, (batch, T, VOCAB), torch.float32)
        assert isinstance(new, KVCache) and new.length == L + T
        assert new.positions == (P + T if window is None else min(P + T, window))

    expect(lambda: model(X, cache() if isinstance(cache, functools.partial) else cache), named, valid)


# ---------------------------------------------------------------------------------------------
# The training loop: fit and train_language_model with bounded budgets on tiny models
# ---------------------------------------------------------------------------------------------

_X = torch.randn(16, 3, generator=torch.Generator().manual_seed(0))
_Y = _X @ torch.tensor([[1.0], [-2.0], [0.5]])


def _mse(model, step):
    return ((model(_X) - _Y) ** 2).mean()


def _stop(model, step):
    raise StopIteration


STEP_LOSSES = {  # step_loss functions that cannot train anything, and what their error says
    "not callable": (3, r"step_loss must be a function"),
    "a vector": (lambda m, s: (m(_X) - _Y) ** 2, r"scalar loss"),
    "integers": (lambda m, s: torch.tensor(3), r"scalar loss"),
    "detached": (lambda m, s: _mse(m, s).detach(), r"requires_grad"),
    "a float": (lambda m, s: 0.5, r"step_loss must return a loss tensor"),
    "ran out": (_stop, r"ran out of batches"),
    "NaN at once": (lambda m, s: _mse(m, s) * NAN, r"loss was nan at step 0"),
    "a value that is no number": (lambda m, s: (_mse(m, s), {"loss": "low"}), r"step_loss's value 'loss'"),
    "a value of two numbers": (lambda m, s: (_mse(m, s), {"tokens": torch.ones(2)}), r"step_loss's value 'tokens'"),
}
EVALUATES = {  # evaluate functions whose result is no {name: number}
    "a list": (lambda m: [1.0], r"evaluate must return a dict"),
    "a string value": (lambda m: {"acc": "high"}, r"evaluate's value 'acc'"),
    "a value of two numbers": (lambda m: {"acc": torch.ones(2)}, r"evaluate's value 'acc'"),
    "None value": (lambda m: {"acc": None}, r"evaluate's value 'acc'"),
}


def _good_evaluate(model):
    with torch.no_grad():
        return {"val_loss": float(_mse(model, 0)), "tensor": torch.tensor(0.5)}


FIT_DEFECTS = ["max_steps", "time_budget", "lr", "clip", "warmup", "schedule", "optimizer", "eval_every", "eval_points",
               "divergence_factor", "step_loss", "evaluate", "no budget", "endless"]


@pytest.mark.parametrize("spoiled", [None, *FIT_DEFECTS])
@settings(FUZZ, max_examples=12)
@given(st.data())
def test_fit_trains_within_its_budget_or_names_the_argument(spoiled, data):
    budget = data.draw(st.sampled_from(["steps", "steps", "time", "both"]), label="budget")
    good = {
        "max_steps": st.integers(1, 5) if budget != "time" else st.none(),
        "time_budget": st.sampled_from([0.01, 0.02]) if budget == "time" else st.sampled_from(
            [None, INF, 60.0, 30] if budget == "steps" else [0.01, 5.0]),
        "lr": st.sampled_from([0.0, 0, 1e-3, 0.01, 0.1]), "clip": st.sampled_from([None, 0.5, 1.0, 1, INF]),
        "warmup": st.sampled_from([0, 2, 100]), "schedule": st.sampled_from(["linear", "constant"]),
        "optimizer": st.sampled_from(["adam", "adamw", "sgd"]), "eval_every": st.sampled_from([None, 1, 2, 50]),
        "eval_points": st.sampled_from([0, 0, 2]), "divergence_factor": st.sampled_from([10.0, 3, None, INF])}
    bad = {
        "max_steps": (NOT_POSITIVE_INTS[:-1], r"\bmax_steps\b"),
        "time_budget": ([0, -1.0, NAN, True, "1"], r"\btime_budget\b"),
        "lr": ([-1e-3, NAN, INF, True, "0.1", None], r"\blr\b"),
        "clip": ([0, 0.0, -1.0, NAN, True, "1"], r"\bclip\b"), "warmup": (NOT_COUNTS, r"\bwarmup\b"),
        "schedule": (["cosine", None, 1], r"\bschedule\b"), "optimizer": (["rmsprop", None], r"\boptimizer\b"),
        "eval_every": ([0, -2, True, 1.5, "2"], r"\beval_every\b"), "eval_points": (NOT_COUNTS, r"\beval_points\b"),
        "divergence_factor": ([1, 0.5, NAN, True, "10"], r"\bdivergence_factor\b"),
        "step_loss": (list(STEP_LOSSES), None), "evaluate": (list(EVALUATES) + ["missing"], None)}
    kwargs, named = draw_arguments(data, good, bad, spoiled if spoiled in bad else None)
    step_loss, evaluate = _mse, _good_evaluate
    if spoiled == "step_loss":
        step_loss, named = STEP_LOSSES[kwargs.pop("step_loss")]
    elif spoiled == "evaluate":
        which = kwargs.pop("evaluate")
        evaluate, named = EVALUATES[which] if which != "missing" else (None, r"need an evaluate function")
        if not (kwargs["eval_every"] or kwargs["eval_points"]):
            kwargs["eval_every"] = 1  # so that evaluate is called (or missed)
    elif spoiled == "max_steps" and kwargs["time_budget"] is None:
        kwargs["time_budget"] = 0.01
    if spoiled == "time_budget" and kwargs["max_steps"] is None:
        named = r"\btime_budget\b|give a budget"
    if spoiled == "endless":  # time_budget=inf without max_steps would never end
        kwargs["max_steps"], kwargs["time_budget"], named = None, INF, r"finite bound"
    elif spoiled == "no budget":
        kwargs["max_steps"], kwargs["time_budget"], named = None, None, r"give a budget"
    torch.manual_seed(0)
    model = nn.Linear(3, 1)

    def valid(history):
        steps, max_steps = history.steps, kwargs["max_steps"]
        assert steps and steps == list(range(1, len(steps) + 1))
        if max_steps is not None:
            assert len(steps) <= max_steps
            if kwargs["time_budget"] in (None, INF, 60.0, 30):
                assert len(steps) == max_steps
        assert all(math.isfinite(x) for x in history.loss) and len(history.lr) == len(steps)
        assert all(0 <= lr <= kwargs["lr"] for lr in history.lr)
        if kwargs["eval_every"] or kwargs["eval_points"]:
            assert history.eval_steps and history.eval_steps[-1] == steps[-1]  # always at the end
            if kwargs["eval_every"] and not kwargs["eval_points"]:
                every = [s for s in steps if s % kwargs["eval_every"] == 0]
                assert history.eval_steps == every + ([] if steps[-1] in every else [steps[-1]])
        assert not model.training

    start = time.perf_counter()
    expect(lambda: fit(model, step_loss, evaluate=evaluate, progress=False, **kwargs), named, valid,
           documented=(FloatingPointError,))
    # at most 5 steps of a 4-parameter model or 0.02 s: seconds even on a loaded machine; minutes mean no bound held
    assert time.perf_counter() - start < 120, "a bounded budget ran long"


CORPUS = torch.tensor([[1, 4, 5, 6, 2, 0], [1, 7, 8, 9, 10, 2]])


@pytest.mark.parametrize("spoiled", [None, "max_steps", "lr", "warmup", "clip"])
@settings(FUZZ, max_examples=6)
@given(st.data())
def test_train_language_model_trains_a_tiny_model_or_names_the_argument(spoiled, data):
    kwargs, named = draw_arguments(data, {
        "max_steps": st.integers(1, 3), "lr": st.sampled_from([1e-3, 3e-3]), "warmup": st.sampled_from([0, 1, 100]),
        "clip": st.sampled_from([1.0, 0.5, INF])}, {
        "max_steps": (NOT_POSITIVE_INTS[:-1], r"\bmax_steps\b"), "lr": ([-1.0, NAN, "1e-3"], r"\blr\b"),
        "warmup": (NOT_COUNTS, r"\bwarmup\b"), "clip": ([0.0, -1.0, NAN, True, "1"], r"\bclip\b")}, spoiled)
    torch.manual_seed(0)
    model = CausalLanguageModel(VOCAB, 8, 16, 2, 1, max_len=MAX_LEN)

    def valid(history):
        assert history.steps == list(range(1, kwargs["max_steps"] + 1))
        assert all(math.isfinite(x) and x > 0 for x in history.loss) and not model.training

    expect(lambda: train_language_model(model, lambda m, step: causal_lm_loss(m, CORPUS, pad=0), progress=False,
                                        **kwargs), named, valid)


# ---------------------------------------------------------------------------------------------
# The exercise checkers: wrong functions are failed cases, wrong arguments are ValueErrors
# ---------------------------------------------------------------------------------------------

LABEL = "ch01-mask-all"  # five cheap cases: a masked softmax of float16 scores


def _correct(X, valid_lens):
    return masked_softmax(X.float(), valid_lens).half()


def _slow(X, valid_lens):
    time.sleep(0.1)
    return _correct(X, valid_lens)


def _in_place(X, valid_lens):
    X.zero_()
    return _correct(X, valid_lens)


def _not_yet(X, valid_lens):
    raise NotImplementedError


#: functions and what the checker says of them: "passed", "not implemented", or a regex of the failure
FUNCTIONS = {
    "correct": (_correct, "passed"),
    "float64": (lambda X, lens: masked_softmax(X.double(), lens), "passed"),  # more precise: a note, not a fail
    "not implemented": (_not_yet, "not implemented"),
    "wrong shape": (lambda X, lens: _correct(X, lens)[..., :1], r"expected shape"),
    "integers": (lambda X, lens: torch.zeros_like(X, dtype=torch.long), r"expected dtype"),
    "complex": (lambda X, lens: _correct(X, lens).to(torch.complex64), r"complex"),
    "NaN": (lambda X, lens: torch.full_like(X, NAN), r"got NaN"),
    "inf": (lambda X, lens: torch.full_like(X, INF), r"largest difference"),
    "a list": (lambda X, lens: _correct(X, lens).tolist(), r"expected a tensor"),
    "None": (lambda X, lens: None, r"expected a tensor"),
    "no arguments": (lambda: 0, r"raised TypeError"),
    "a class": (dict, r"raised (TypeError|ValueError)"),
    "in place": (_in_place, r"modified its input"),
    "meta": (lambda X, lens: torch.empty_like(X, device="meta"), r"expected a tensor on cpu"),
    "slow": (_slow, "passed"),  # fails with a short timeout (below)
}


def _check_the_checker(kind: str, data, spoiled: str | None) -> None:
    fn, verdict = FUNCTIONS[kind]
    kwargs, named = draw_arguments(data, {
        "label": st.just(LABEL), "timeout": st.sampled_from([30, 30.0, None, INF, 1e300]),
        "device": st.sampled_from([None, "cpu", torch.device("cpu")])}, {
        "label": (["ch01-nope", "", None, 3, [LABEL]], r"no checker for exercise"),
        "fn": ([None, 3, "my_masked_softmax", _correct(torch.zeros(1, 1, 2, dtype=torch.half), None)],
               r"pass the function itself"),
        "timeout": ([0, 0.0, -1.0, NAN, -INF, True, "5"], r"\btimeout\b"),
        "device": (["nonsense", 3.5, "cuda:99" if torch.cuda.is_available() else "cuda"], r"\bdevice\b")}, spoiled)
    fn = kwargs.pop("fn", fn)
    if kind == "slow" and spoiled != "timeout" and data.draw(st.booleans(), label="short timeout"):
        kwargs["timeout"], verdict = 0.02, r"took more than 0.02 s: the function did not return"
    label = kwargs.pop("label")

    def valid(result):
        assert isinstance(result, CheckResult) and result.label == LABEL and result.message.startswith(LABEL)
        assert result.passed == (verdict == "passed") and result.not_implemented == (verdict == "not implemented")
        assert 0 <= result.score <= 1 and result.cases_total == 5
        if verdict not in ("passed", "not implemented"):
            assert re.search(verdict, result.message), (verdict, result.message)

    result = expect(lambda: grade(label, fn, **kwargs), named, valid)
    if result is None or kind == "slow":
        return
    if result.passed or result.not_implemented:  # prints, does not raise
        with contextlib.redirect_stdout(io.StringIO()) as out:
            check_exercise(label, fn, **kwargs)
        assert out.getvalue().startswith(LABEL)
    else:
        with pytest.raises(ExerciseFailed, match=re.escape(LABEL)):
            check_exercise(label, fn, **kwargs)


@pytest.mark.parametrize("kind", list(FUNCTIONS))
@settings(FUZZ, max_examples=3)
@given(st.data())
def test_exercise_checker_says_what_is_wrong_with_a_function(kind, data):
    _check_the_checker(kind, data, None)


@pytest.mark.parametrize("spoiled", ["label", "fn", "timeout", "device"])
@settings(FUZZ, max_examples=10)
@given(st.sampled_from([k for k in FUNCTIONS if k != "slow"]), st.data())
def test_exercise_checker_names_a_wrong_argument(spoiled, kind, data):
    _check_the_checker(kind, data, spoiled)


# ---------------------------------------------------------------------------------------------
# Regressions: what the fuzzing above found, one focused test each
# ---------------------------------------------------------------------------------------------


def test_rotary_refuses_angles_that_overflow_instead_of_returning_nan():
    """Huge positions with a base below 1 (or a base so small that a frequency is inf) made cos and sin NaN."""
    with pytest.raises(ValueError, match=r"angles .* overflow float64 for positions up to 1e\+300 with base=1e-300"):
        rotary_cos_sin(torch.tensor([0.0, 1e300], dtype=torch.float64), 4, base=1e-300)
    with pytest.raises(ValueError, match=r"base=1e-320 is so small that the frequency .* overflows for d = 64"):
        rotary_cos_sin(torch.arange(3), 64, base=1e-320)  # 0 * inf = NaN even at position 0
    cos, sin = rotary_cos_sin(torch.tensor([2**40]), 64, base=1e-300)  # large, but within float64: fine
    assert cos.isfinite().all() and sin.isfinite().all()


def test_apply_rotary_refuses_positions_that_broadcast_to_more_rows_than_x():
    """Positions (3, n) against x (1, n, d) broadcast, and the result had shape (3, n, d), not x's."""
    with pytest.raises(ValueError, match=r"positions of shape \(3, 2\) do not broadcast against the \(1, 2\)"):
        apply_rotary(torch.randn(1, 2, 4), torch.zeros(3, 2, dtype=torch.long))
    assert apply_rotary(torch.randn(2, 3, 4), torch.arange(3)[None]).shape == (2, 3, 4)  # (1, n) is fine


def test_rotary_names_a_dtype_that_is_not_floating_point_and_features_of_size_zero():
    for dtype in ("float32", torch.int64, None):  # .to("float32") read it as a device; int64 truncated to 0 and 1
        with pytest.raises(ValueError, match=r"dtype must be a floating-point torch.dtype"):
            rotary_cos_sin(torch.arange(3), 4, dtype=dtype)
    with pytest.raises(ValueError, match=r"feature size d must be even and positive .* got d = 0"):
        apply_rotary(torch.randn(2, 3, 0))  # said "dim must be a positive integer", an argument it has not


def test_sampling_probs_keeps_banned_tokens_at_zero_at_huge_temperatures():
    """-inf / inf was NaN: a temperature beyond float32's range gave NaN probabilities."""
    for dtype in FLOATS:
        probs = sampling_probs(torch.tensor([[0.0, float("-inf"), 2.0]], dtype=dtype), temperature=1e308)
        torch.testing.assert_close(probs.float(), torch.tensor([[0.5, 0.0, 0.5]]))


def test_sample_from_and_generate_name_a_generator_that_is_not_one_and_probs_without_tokens():
    with pytest.raises(ValueError, match=r"probs must hold at least one token per row .* got shape \(2, 0\)"):
        sample_from(torch.zeros(2, 0))  # returned a (2, 0) tensor, not one token per row
    for seed in (0, "cpu"):  # an AttributeError ('int' object has no attribute 'device') before
        with pytest.raises(ValueError, match=rf"generator must be a torch.Generator .* got {re.escape(repr(seed))}"):
            sample_from(torch.ones(2, 3), seed)
        with pytest.raises(ValueError, match=r"generator must be a torch.Generator"):
            generate(tiny_lm(), torch.ones(1, 2, dtype=torch.long), 1, temperature=0, generator=seed)


def test_kv_cache_refuses_integer_keys_and_keys_and_values_of_two_dtypes_or_devices():
    keys = torch.randn(2, 1, 2, 3, 4)
    for values, named in ((keys.double(), "values torch.float64 on cpu"), (keys.to("meta"), "on meta")):
        with pytest.raises(ValueError, match=rf"floating-point tensors of one dtype on one device, .*{named}"):
            KVCache(keys, values)
    with pytest.raises(ValueError, match=r"got keys torch.int64 on cpu"):
        KVCache(keys.long(), keys.long())  # the model's keys were written into it truncated
    assert KVCache(keys.half(), keys.half()).dtype == torch.float16


def test_language_model_names_a_cache_of_another_dtype():
    """The error named the attention's queries and keys ("must have the same dtype"), not the cache."""
    model = tiny_lm()
    with pytest.raises(ValueError, match=r"the cache holds torch.float64 keys .* the model computes in torch.float32"):
        model(torch.ones(1, 2, dtype=torch.long), model.empty_cache(1, dtype=torch.float64))


def test_positional_encodings_name_a_negative_offset():
    """It said "positions -1..-2 do not fit max_len=1", naming neither the offset nor what is wrong with it."""
    for layer in (PositionalEncoding(2, 0.0, max_len=1), LearnedPositionalEncoding(2, 0.0, max_len=1)):
        with pytest.raises(ValueError, match=r"^offset \(the position of X's first step\) must be an int >= 0, got -1"):
            layer(torch.zeros(1, 0, 2), offset=-1)


def test_fit_names_an_evaluate_value_that_is_not_one_number():
    """float() raised its own ValueError ("could not convert string to float") or a RuntimeError."""
    for value, shown in (("high", "str 'high'"), (torch.ones(2), r"Tensor shape \(2,\)"), (None, "NoneType None")):
        with pytest.raises(ValueError, match=rf"^evaluate's value 'acc' must be a number .* got {shown} at step 1$"):
            fit(nn.Linear(3, 1), _mse, max_steps=2, evaluate=lambda m, v=value: {"acc": v}, eval_every=1,
                progress=False)


def test_exercise_checker_refuses_the_meta_device_by_name():
    """Meta tensors have shapes and no values: every case failed with an error about the meta device."""
    for device in ("meta", torch.device("meta")):
        with pytest.raises(ValueError, match=r"device 'meta' holds shapes but no values"):
            grade(LABEL, _correct, device=device)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_exercise_checker_names_a_device_this_machine_lacks():
    """The case inputs' .to("cuda") raised AssertionError, which reads like an ExerciseFailed."""
    with pytest.raises(ValueError, match=r"device 'cuda' is not available on this machine"):
        grade(LABEL, _correct, device="cuda")
