"""Attention layers: by hand, against d2l and torch's fused kernel, fused vs explicit, gradients,
low precision, devices and bad input."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from simulated_accelerator import ACCELERATOR, SimulatedAccelerator
from torch.func import functional_call
from torch.nn import functional as F

from attn_utils import (
    AdditiveAttention,
    ConcatAttention,
    CosineAttention,
    DistanceAttention,
    DotProductAttention,
    GeneralAttention,
    LocationAttention,
    fused_dot_product_attention,
    masked_softmax,
)
from attn_utils.attention import (
    SCORES,
    ScoredAttention,
    SquaredDistanceAttention,
    UniformAttention,
    attend,
    score_layer,
)
from attn_utils.checks import strict_checks
from attn_utils.tolerance import assert_close

MAX_KEYS = 6
FACTORIES = {
    "dot": lambda: DotProductAttention(0.0),
    "dot_explicit": lambda: DotProductAttention(0.0, fused=False),
    "additive": lambda: AdditiveAttention(5, 0.0),
    "general": lambda: GeneralAttention(),
    "concat": lambda: ConcatAttention(5),
    "cosine": lambda: CosineAttention(beta=3.0),
    "location": lambda: LocationAttention(MAX_KEYS),
    "additive_bias": lambda: AdditiveAttention(5, 0.0, use_bias=True),
    "concat_bias": lambda: ConcatAttention(5, use_bias=True),
    "distance": lambda: DistanceAttention(),
    "neg_sq_dist": lambda: SquaredDistanceAttention(),
    "uniform": lambda: UniformAttention(),
    # built at once from their sizes (as the decoders of chapters 5 and 6 build them), not at the first call
    "additive_sized": lambda: AdditiveAttention(5, 0.0, query_size=3, key_size=4),
    "general_sized": lambda: GeneralAttention(query_size=3, key_size=4),
    "concat_sized": lambda: ConcatAttention(5, query_size=3, key_size=4),
}
SAME_SIZE = {"dot", "dot_explicit", "cosine", "neg_sq_dist"}


def sizes(name):
    """(query_size, key_size, value_size) for a layer: different sizes where the layer allows it."""
    return (4, 4, 3) if name in SAME_SIZE else (3, 4, 2)


def build(name, dtype=torch.float64, seed=0):
    """A layer with its lazy parameters materialised (by one call), in ``dtype``, in eval mode."""
    torch.manual_seed(seed)
    layer = FACTORIES[name]()
    dq, dk, dv = sizes(name)
    layer(torch.zeros(1, 1, dq), torch.zeros(1, 2, dk), torch.zeros(1, 2, dv))
    return layer.to(dtype).eval()


def inputs(name, batch=2, nq=3, nk=5, dtype=torch.float64, seed=1, grad=False):
    gen = torch.Generator().manual_seed(seed)
    dq, dk, dv = sizes(name)
    return tuple(torch.randn(batch, n, d, generator=gen, dtype=dtype, requires_grad=grad)
                 for n, d in ((nq, dq), (nk, dk), (nk, dv)))


# --- by hand: every layer against its formula, one (query, key) pair at a time -----------------

def _rows(t):
    return t.detach().double().tolist()


def pair_score(name, layer):
    """score(q, k, j) computed with plain Python from the layer's parameters."""
    def dot(a, b):
        return sum(x * y for x, y in zip(a, b))

    def mv(W, x):
        return [dot(row, x) for row in W]

    name = name.removesuffix("_sized")  # built from its sizes: the same formula
    if name in ("dot", "dot_explicit"):
        return lambda q, k, j: dot(q, k) / math.sqrt(len(q))
    if name == "neg_sq_dist":
        return lambda q, k, j: -sum((a - c) ** 2 for a, c in zip(q, k))
    if name == "uniform":
        return lambda q, k, j: 0.0
    if name == "additive":
        W_q, W_k, w_v = _rows(layer.W_q.weight), _rows(layer.W_k.weight), _rows(layer.w_v.weight)[0]
        return lambda q, k, j: dot(w_v, [math.tanh(a + b) for a, b in zip(mv(W_q, q), mv(W_k, k))])
    if name == "general":
        W_a = _rows(layer.W_a)
        return lambda q, k, j: dot(q, mv(W_a, k))
    if name == "concat":
        W_a, v_a = _rows(layer.W_a.weight), _rows(layer.v_a.weight)[0]
        return lambda q, k, j: dot(v_a, [math.tanh(z) for z in mv(W_a, q + k)])
    if name == "cosine":
        return lambda q, k, j: layer.beta * dot(q, k) / (math.sqrt(dot(q, q)) * math.sqrt(dot(k, k)))
    if name == "location":
        W_a = _rows(layer.W_a.weight)
        return lambda q, k, j: dot(W_a[j], q)
    if name == "additive_bias":
        W_q, W_k, w_v = _rows(layer.W_q.weight), _rows(layer.W_k.weight), _rows(layer.w_v.weight)[0]
        b = layer.W_q.bias.detach().double().tolist()
        return lambda q, k, j: dot(w_v, [math.tanh(a + c + d) for a, c, d in zip(mv(W_q, q), b, mv(W_k, k))])
    if name == "concat_bias":
        W_a, v_a, b = _rows(layer.W_a.weight), _rows(layer.v_a.weight)[0], layer.W_a.bias.detach().double().tolist()
        return lambda q, k, j: dot(v_a, [math.tanh(z + c) for z, c in zip(mv(W_a, q + k), b)])
    if name == "distance":
        W_a = _rows(layer.W_a)
        return lambda q, k, j: -sum((a - c) ** 2 for a, c in zip(q, mv(W_a, k)))
    raise KeyError(name)


def by_hand(score, queries, keys, values, lengths):
    """Output and weights with Python loops: softmax over the first ``lengths[b]`` keys, zeros after."""
    out, weights = [], []
    for b, (qs, ks, vs) in enumerate(zip(_rows(queries), _rows(keys), _rows(values))):
        n = lengths[b]
        out_b, w_b = [], []
        for q in qs:
            s = [score(q, k, j) for j, k in enumerate(ks[:n])]
            m = max(s) if s else 0.0
            e = [math.exp(x - m) for x in s]
            w = [x / sum(e) for x in e] + [0.0] * (len(ks) - n)
            w_b.append(w)
            out_b.append([sum(wj * v[c] for wj, v in zip(w, vs)) for c in range(len(vs[0]))])
        out.append(out_b)
        weights.append(w_b)
    return torch.tensor(out, dtype=torch.float64), torch.tensor(weights, dtype=torch.float64)


@pytest.mark.parametrize("name", FACTORIES)
def test_each_layer_equals_its_formula_by_hand(name):
    layer = build(name)
    q, k, v = inputs(name)
    lengths = [3, 0]  # the second sequence is all padding: zero weights, zero output
    output = layer(q, k, v, torch.tensor(lengths))
    expected_out, expected_w = by_hand(pair_score(name, layer), q, k, v, lengths)
    torch.testing.assert_close(output, expected_out)
    torch.testing.assert_close(layer.attention_weights, expected_w)
    assert output.shape == (2, 3, sizes(name)[2])


def test_tiny_dot_product_case_in_numbers():
    # One query (1, 0) and keys (1, 0), (0, 1), (-1, 0): scores (1, 0, -1)/sqrt(2).
    q = torch.tensor([[[1.0, 0.0]]])
    k = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]]])
    v = torch.tensor([[[10.0], [20.0], [30.0]]])
    e = [math.exp(s / math.sqrt(2)) for s in (1.0, 0.0, -1.0)]
    w = [x / sum(e) for x in e]
    layer = DotProductAttention(0.0)
    torch.testing.assert_close(layer(q, k, v), torch.tensor([[[10 * w[0] + 20 * w[1] + 30 * w[2]]]]))
    torch.testing.assert_close(layer.attention_weights, torch.tensor([[w]]))
    # Only the first two keys visible: weights e1/(e1+e2), e2/(e1+e2).
    layer(q, k, v, torch.tensor([2]))
    torch.testing.assert_close(layer.attention_weights,
                               torch.tensor([[[e[0] / (e[0] + e[1]), e[1] / (e[0] + e[1]), 0.0]]]))


def test_luong_dot_uses_scale_one():
    q, k, v = inputs("dot")
    layer = DotProductAttention(0.0, scale=1.0)
    expected = torch.softmax(q @ k.transpose(1, 2), dim=-1) @ v
    torch.testing.assert_close(layer(q, k, v), expected)


def test_cosine_beta_sharpens_and_can_be_learned():
    q, k, v = inputs("cosine")
    soft, sharp = CosineAttention(beta=1.0), CosineAttention(beta=50.0)
    soft(q, k, v)
    sharp(q, k, v)
    assert sharp.attention_weights.max(-1).values.mean() > soft.attention_weights.max(-1).values.mean()
    learned = CosineAttention(beta=2.0, learn_beta=True).double()
    learned(q, k, v).sum().backward()
    assert isinstance(learned.beta, torch.nn.Parameter) and learned.beta.grad is not None


def test_location_weights_ignore_key_content():
    layer = build("location")
    q, k, v = inputs("location")
    layer(q, k, v)
    first = layer.attention_weights
    layer(q, torch.randn_like(k), v)
    torch.testing.assert_close(layer.attention_weights, first)


# --- d2l: same parameter names, state dicts in both directions ----------------------------------

def _d2l_inputs():
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(2, 3, 6, generator=gen)
    k = torch.randn(2, 7, 4, generator=gen)
    v = torch.randn(2, 7, 5, generator=gen)
    return q, k, v


@pytest.mark.parametrize("lengths", [None, torch.tensor([2, 7]), torch.tensor([[1, 2, 3], [7, 6, 5]])])
def test_additive_state_dict_moves_from_ours_to_d2l(d2l, lengths):
    q, k, v = _d2l_inputs()
    ours = AdditiveAttention(8, 0.0).eval()
    expected = ours(q, k, v, lengths)
    fresh = d2l.AdditiveAttention(8, 0.0).eval()  # lazy, not yet materialised
    fresh.load_state_dict(ours.state_dict())
    torch.testing.assert_close(fresh(q, k, v, lengths), expected)
    torch.testing.assert_close(fresh.attention_weights, ours.attention_weights)
    used = d2l.AdditiveAttention(8, 0.0).eval()
    used(q, k, v, lengths)  # materialised with its own random weights
    used.load_state_dict(ours.state_dict())
    torch.testing.assert_close(used(q, k, v, lengths), expected)


@pytest.mark.parametrize("lengths", [None, torch.tensor([3, 5])])
def test_additive_state_dict_moves_from_d2l_to_ours(d2l, lengths):
    q, k, v = _d2l_inputs()
    theirs = d2l.AdditiveAttention(8, 0.0).eval()
    expected = theirs(q, k, v, lengths)
    fresh = AdditiveAttention(8, 0.0).eval()
    fresh.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(fresh(q, k, v, lengths), expected)
    used = AdditiveAttention(8, 0.0).eval()
    used(q, k, v, lengths)
    used.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(used(q, k, v, lengths), expected)
    torch.testing.assert_close(used.attention_weights, theirs.attention_weights)
    # d2l's keys; ours in the order the score uses (and the lazy layers draw) them, d2l's with W_k first
    assert sorted(used.state_dict()) == sorted(theirs.state_dict()) == ["W_k.weight", "W_q.weight", "w_v.weight"]
    assert list(used.state_dict()) == ["W_q.weight", "W_k.weight", "w_v.weight"]
    for name, p in used.named_parameters():
        assert p.shape == dict(theirs.named_parameters())[name].shape


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("lengths", [None, torch.tensor([2, 5]), torch.tensor([[1, 3, 5], [4, 4, 2]])])
def test_dot_product_equals_d2l(d2l, fused, lengths):
    gen = torch.Generator().manual_seed(4)
    q = torch.randn(2, 3, 8, generator=gen)
    k, v = torch.randn(2, 5, 8, generator=gen), torch.randn(2, 5, 3, generator=gen)
    theirs = d2l.DotProductAttention(0.0).eval()
    ours = DotProductAttention(0.0, fused=fused).eval()
    ours.load_state_dict(theirs.state_dict())  # both empty, but the call must work
    torch.testing.assert_close(ours(q, k, v, lengths), theirs(q, k, v, lengths))
    torch.testing.assert_close(ours.attention_weights, theirs.attention_weights)


def test_fully_masked_rows_differ_from_d2l_by_design(d2l):
    q, k, v = inputs("dot", dtype=torch.float32)
    lengths = torch.tensor([0, 5])
    ours = DotProductAttention(0.0)(q, k, v, lengths)
    theirs = d2l.DotProductAttention(0.0)(q, k, v, lengths)
    assert torch.equal(ours[0], torch.zeros_like(ours[0]))  # ours: zeros
    torch.testing.assert_close(theirs[0], v[0].mean(0).expand(3, -1))  # d2l: uniform over padding
    torch.testing.assert_close(ours[1], theirs[1])


# --- the fused path: equal to torch's kernel and to the explicit path ---------------------------

def _masks(batch=2, nq=3, nk=5):
    lengths = torch.tensor([2, 5])
    per_query = torch.tensor([[1, 2, 5], [3, 3, 4]])
    boolean = torch.rand(batch, nq, nk, generator=torch.Generator().manual_seed(5)) < 0.6
    boolean[..., 0] = True  # every row sees at least one key
    return {"lengths": lengths, "per_query": per_query, "boolean": boolean, "causal": torch.ones(nq, nk).tril().bool()}


@pytest.mark.parametrize("kind", ["lengths", "per_query", "boolean", "causal"])
def test_dot_product_equals_torch_sdpa_with_masks(kind):
    valid = _masks()[kind]
    q, k, v = inputs("dot", dtype=torch.float32)
    from attn_utils import make_mask

    mask = make_mask(torch.zeros(2, 3, 5), valid)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    for fused in (True, False):
        torch.testing.assert_close(DotProductAttention(0.0, fused=fused)(q, k, v, valid), expected)
    torch.testing.assert_close(fused_dot_product_attention(q, k, v, valid), expected)


def _fully_masked_cases():
    boolean = _masks()["boolean"].clone()
    boolean[0, 1] = False  # query 1 of sequence 0 sees nothing
    return [torch.tensor([0, 3]), torch.tensor([[0, 2, 5], [1, 0, 0]]), boolean]


@pytest.mark.parametrize("case", range(3))
def test_fused_and_explicit_agree_on_values_and_gradients_with_fully_masked_rows(case):
    valid = _fully_masked_cases()[case]
    results = []
    for fused in (True, False):
        q, k, v = inputs("dot", grad=True)
        layer = DotProductAttention(0.0, fused=fused)
        out = layer(q, k, v, valid)
        (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).reshape(out.shape)).sum().backward()
        results.append((out.detach(), layer.attention_weights.detach(), q.grad, k.grad, v.grad))
    for a, b in zip(*results):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, b)
    out, weights = results[0][:2]
    empty = weights.sum(-1) == 0  # rows with no visible key
    assert empty.any()
    assert torch.equal(out[empty], torch.zeros_like(out[empty]))


def test_fused_fully_masked_row_is_zero_whatever_torch_returns():
    q, k, v = inputs("dot", dtype=torch.float32)
    mask = torch.ones(2, 3, 5, dtype=torch.bool)
    mask[1, 2] = False
    ours = fused_dot_product_attention(q, k, v, mask)
    assert torch.isfinite(ours).all() and torch.equal(ours[1, 2], torch.zeros(3))
    plain = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(ours[0], plain[0])
    torch.testing.assert_close(ours[1, :2], plain[1, :2])


def test_fused_weights_are_computed_lazily_once_and_match_the_explicit_ones():
    q, k, v = inputs("dot")
    valid = torch.tensor([[1, 2, 5], [3, 3, 4]])
    fused, explicit = DotProductAttention(0.0), DotProductAttention(0.0, fused=False)
    fused(q, k, v, valid)
    explicit(q, k, v, valid)
    assert fused._weights is None  # nothing built until someone looks
    first = fused.attention_weights
    assert fused.attention_weights is first  # cached
    torch.testing.assert_close(first, explicit.attention_weights)
    assert not first.requires_grad


def test_fused_weights_refuse_inputs_changed_in_place():
    q, k, v = inputs("dot")
    layer = DotProductAttention(0.0)
    layer(q, k, v)
    q.add_(1.0)  # e.g. an optimizer step on a parameter used as the queries
    with pytest.raises(RuntimeError, match="modified in place"):
        _ = layer.attention_weights
    layer(q, k, v)
    before = layer.attention_weights  # read first, then change: fine
    k.mul_(2.0)
    assert layer.attention_weights is before


@pytest.mark.parametrize("name", FACTORIES)
def test_extra_leading_dimensions_work_like_a_loop(name):
    layer = build(name)
    gen = torch.Generator().manual_seed(8)
    dq, dk, dv = sizes(name)
    q, k, v = (torch.randn(2, 3, n, d, generator=gen, dtype=torch.float64) for n, d in ((4, dq), (5, dk), (5, dv)))
    lengths = torch.tensor([2, 5])  # one length per sequence, shared by its 3 heads
    out = layer(q, k, v, lengths)
    assert out.shape == (2, 3, 4, dv)
    for b in range(2):
        for h in range(3):
            alone = layer(q[b, h][None], k[b, h][None], v[b, h][None], lengths[b:b + 1])[0]
            torch.testing.assert_close(out[b, h], alone)


def test_dropout_applies_to_the_weights_in_training_only():
    for name in FACTORIES:
        layer = build(name)
        layer.dropout.p = 0.5
        q, k, v = inputs(name)
        valid = torch.tensor([4, 5])
        eval_out = layer(q, k, v, valid)
        torch.testing.assert_close(layer(q, k, v, valid), eval_out)  # eval: deterministic, no dropout
        layer.train()
        torch.manual_seed(7)
        out = layer(q, k, v, valid)
        weights = layer.attention_weights
        torch.manual_seed(7)
        expected = F.dropout(weights, 0.5, training=True) @ v
        torch.testing.assert_close(out, expected, msg=name)
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, dtype=torch.float64))  # kept before dropout


@settings(max_examples=30, deadline=None)
@given(batch=st.integers(1, 3), nq=st.integers(1, 6), nk=st.integers(1, 7), d=st.integers(1, 6),
       per_query=st.booleans(), seed=st.integers(0, 2**16))
def test_fused_equals_explicit_for_random_shapes_and_lengths(batch, nq, nk, d, per_query, seed):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, nq, d, generator=gen, dtype=torch.float64)
    k = torch.randn(batch, nk, d, generator=gen, dtype=torch.float64)
    v = torch.randn(batch, nk, 2, generator=gen, dtype=torch.float64)
    shape = (batch, nq) if per_query else (batch,)
    lengths = torch.randint(0, nk + 1, shape, generator=gen)
    fused = DotProductAttention(0.0)(q, k, v, lengths)
    explicit_layer = DotProductAttention(0.0, fused=False)
    explicit = explicit_layer(q, k, v, lengths)
    torch.testing.assert_close(fused, explicit)
    assert torch.isfinite(fused).all()
    if not per_query:  # by_hand takes one length per sequence
        by_loops, _ = by_hand(pair_score("dot", None), q, k, v, lengths.tolist())
        torch.testing.assert_close(fused, by_loops)


# --- gradients, precision, devices --------------------------------------------------------------

@pytest.mark.parametrize("name", FACTORIES)
def test_gradcheck_float64_inputs_and_parameters(name):
    layer = build(name)
    q, k, v = inputs(name, batch=2, nq=2, nk=4, grad=True)
    valid = torch.tensor([[2, 4], [0, 3]])
    params = {n: p.detach().clone().requires_grad_(True) for n, p in layer.named_parameters()}
    names = list(params)

    def fn(q, k, v, *values):
        return functional_call(layer, dict(zip(names, values)), (q, k, v, valid))

    assert torch.autograd.gradcheck(fn, (q, k, v, *params.values()))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", FACTORIES)
def test_low_precision_on_cpu(name, dtype):
    reference = build(name, dtype=torch.float32)
    low = copy.deepcopy(reference).to(dtype)
    q, k, v = inputs(name, dtype=torch.float32)
    valid = torch.tensor([3, 0])
    expected = reference(q, k, v, valid)
    out = low(q.to(dtype), k.to(dtype), v.to(dtype), valid)
    assert out.dtype == dtype and low.attention_weights.dtype == dtype
    assert torch.isfinite(out).all()
    tol = 2e-2 if dtype == torch.float16 else 6e-2
    torch.testing.assert_close(out.float(), expected, atol=tol, rtol=tol)
    torch.testing.assert_close(low.attention_weights.float(), reference.attention_weights, atol=tol, rtol=tol)


@pytest.mark.parametrize("name", FACTORIES)
def test_any_device_matches_cpu(name, any_device):
    layer = build(name, dtype=torch.float32)
    q, k, v = inputs(name, dtype=torch.float32)
    valid = torch.tensor([[1, 0, 5], [2, 3, 4]])
    expected = layer(q, k, v, valid)
    moved = copy.deepcopy(layer).to(any_device)
    out = moved(q.to(any_device), k.to(any_device), v.to(any_device), valid.to(any_device))
    assert out.device.type == any_device.type
    assert_close(out, expected)
    assert_close(moved.attention_weights, layer.attention_weights)


@pytest.mark.gpu
def test_fused_and_explicit_agree_on_the_gpu(gpu_device):
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(4, 64, 32, generator=gen).to(gpu_device) for _ in range(3))
    lengths = torch.tensor([0, 17, 64, 1], device=gpu_device)
    fused = DotProductAttention(0.0)(q, k, v, lengths)
    explicit = DotProductAttention(0.0, fused=False)(q, k, v, lengths)
    assert_close(fused, explicit)
    assert torch.equal(fused[0], torch.zeros_like(fused[0]))


# --- lazy parameters and state dicts of the new layers --------------------------------------------

@pytest.mark.parametrize("name", ["general", "concat", "location", "additive"])
def test_state_dict_loads_into_a_fresh_lazy_layer(name):
    trained = build(name, dtype=torch.float32)
    q, k, v = inputs(name, dtype=torch.float32)
    expected = trained(q, k, v)
    fresh = FACTORIES[name]().eval()
    fresh.load_state_dict(trained.state_dict())
    torch.testing.assert_close(fresh(q, k, v), expected)


@pytest.mark.parametrize("name", FACTORIES)
def test_a_used_layer_can_be_deep_copied(name):
    layer = build(name)
    q, k, v = inputs(name, grad=True)
    expected = layer(q, k, v)  # its weights now hold an autograd graph
    twin = copy.deepcopy(layer)
    assert twin.attention_weights is None
    torch.testing.assert_close(twin(q, k, v), expected)


def test_general_attention_parameter_is_w_a_of_the_formula():
    layer = build("general")
    q, k, v = inputs("general")
    assert layer.W_a.shape == (3, 4)  # (query_size, key_size)
    layer(q, k, v)
    expected = masked_softmax(q @ layer.W_a @ k.transpose(1, 2))
    torch.testing.assert_close(layer.attention_weights, expected)


# --- bad input ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", FACTORIES)
def test_keys_and_values_must_pair(name):
    layer = build(name)
    q, k, v = inputs(name)
    with pytest.raises(ValueError, match=r"keys and values must come in pairs: keys \(2, 5, \d\) hold 5 items, "
                                         r"values \(2, 4, \d\) hold 4"):
        layer(q, k, v[:, :4])


@pytest.mark.parametrize("name", FACTORIES)
def test_unbatched_and_mismatched_batches_are_named(name):
    layer = build(name)
    q, k, v = inputs(name)
    with pytest.raises(ValueError, match=r"queries must have shape \(batch, items, features\), got \(3, \d\)"):
        layer(q[0], k, v)
    with pytest.raises(ValueError, match=r"queries \(1, 3, \d\) and keys \(2, 5, \d\) must have the same leading"):
        layer(q[:1], k, v)


@pytest.mark.parametrize("fused", [True, False])
def test_dot_product_needs_equal_query_and_key_sizes(fused):
    with pytest.raises(ValueError, match=r"DotProductAttention needs queries and keys of the same size d; "
                                         r"got queries \(2, 3, 4\) \(d=4\) and keys \(2, 5, 6\) \(d=6\)"):
        DotProductAttention(0.0, fused=fused)(torch.randn(2, 3, 4), torch.randn(2, 5, 6), torch.randn(2, 5, 1))


@pytest.mark.parametrize("name", FACTORIES)
def test_valid_lens_that_do_not_fit_are_named(name):
    layer = build(name)
    q, k, v = inputs(name)
    with pytest.raises(ValueError,
                       match=r"valid_lens has shape \(3,\), which does not fit scores of shape \(2, 3, 5\)"):
        layer(q, k, v, torch.tensor([1, 2, 3]))


def test_location_attention_refuses_more_keys_than_it_was_built_for():
    layer = build("location")
    q, k, v = inputs("location", nk=MAX_KEYS + 1)
    with pytest.raises(ValueError, match=r"at most 6 keys \(max_keys\), got 7 keys"):
        layer(q, k, v)


def test_values_dtype_must_match():
    with pytest.raises(ValueError,
                       match=r"values \(torch.float64\) must have the dtype of queries and keys \(torch.float32\)"):
        DotProductAttention(0.0)(torch.randn(1, 2, 3), torch.randn(1, 4, 3), torch.randn(1, 4, 2, dtype=torch.float64))


def test_lazy_general_attention_checks_inputs_before_sizing_its_matrix():
    layer = GeneralAttention()
    with pytest.raises(ValueError, match=r"queries must have shape \(batch, items, features\), got \(3, 4\)"):
        layer(torch.randn(3, 4), torch.randn(1, 5, 2), torch.randn(1, 5, 1))
    assert layer.has_uninitialized_params()


# --- NaN and inf: one rule on the fused and explicit paths ----------------------------------------


def _both_paths(queries, keys, values, valid_lens=None, bias=None):
    fused = DotProductAttention(0.0).eval()(queries, keys, values, valid_lens, bias)
    explicit = DotProductAttention(0.0, fused=False).eval()(queries, keys, values, valid_lens, bias)
    torch.testing.assert_close(fused, explicit, equal_nan=True)
    return explicit


def _clean_inputs():
    torch.manual_seed(0)
    return torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6), torch.tensor([3, 5])


@pytest.mark.parametrize("masked", [False, True])
def test_nan_query_gives_nan_for_that_query_only_on_both_paths(masked):
    # Without a mask torch's fused CPU kernel gave that query a row of zeros.
    queries, keys, values, valid_lens = _clean_inputs()
    valid_lens = valid_lens if masked else None
    expected = _both_paths(queries, keys, values, valid_lens)
    queries[0, 1, 2] = float("nan")
    out = _both_paths(queries, keys, values, valid_lens)
    assert out[0, 1].isnan().all()  # never a silent row of zeros
    mask = torch.ones(2, 3, dtype=torch.bool)
    mask[0, 1] = False
    torch.testing.assert_close(out[mask], expected[mask])


@pytest.mark.parametrize("where", ["keys", "values"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_nan_or_inf_in_padded_keys_or_values_changes_nothing_on_both_paths(where, bad):
    queries, keys, values, valid_lens = _clean_inputs()
    expected = _both_paths(queries, keys, values, valid_lens)
    corrupt = (keys if where == "keys" else values).clone()
    corrupt[0, 3:] = bad  # the padding of sequence 0 (valid length 3)
    args = (queries, corrupt, values) if where == "keys" else (queries, keys, corrupt)
    torch.testing.assert_close(_both_paths(*args, valid_lens), expected)


@pytest.mark.parametrize("make", [lambda: DotProductAttention(0.0), lambda: DotProductAttention(0.0, fused=False),
                                  lambda: AdditiveAttention(8, 0.0)], ids=["fused", "explicit", "additive"])
@pytest.mark.parametrize("where", ["keys", "values"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nan_or_inf_in_padded_keys_or_values_changes_no_gradient(make, where, bad):
    # Backward multiplies a masked key's zero score gradient by the key: 0 * NaN would be NaN in every
    # query's gradient (and in W_k's), although the forward pass never uses that key.
    def gradients(corrupted):
        torch.manual_seed(1)
        layer = make().eval()
        queries, keys, values, valid_lens = (t.clone() for t in _clean_inputs())
        if corrupted:
            (keys if where == "keys" else values)[0, 3:] = bad  # the padding of sequence 0 (valid length 3)
        for t in (queries, keys, values):
            t.requires_grad_()
        (layer(queries, keys, values, valid_lens) * torch.arange(6.0)).sum().backward()
        return [queries.grad, keys.grad[:, :3], values.grad[:, :3]] + [p.grad for p in layer.parameters()]

    for clean, corrupted in zip(gradients(False), gradients(True)):
        torch.testing.assert_close(corrupted, clean)


@pytest.mark.parametrize("case", ["padded key", "padded value", "causally masked value", "visible value"])
def test_the_rule_holds_on_an_accelerator_under_strict_checks(case):
    """On an accelerator the NaN look is taken only under ``strict_checks()`` (no host sync otherwise,
    tests/test_host_syncs.py); with it, both paths give the CPU's answer there too."""
    queries, keys, values, valid_lens = _clean_inputs()
    if case == "padded key":
        keys[0, 3:] = float("nan")
    elif case == "padded value":
        values[0, 3:] = float("inf")
    elif case == "causally masked value":
        values[:, 4] = float("nan")
        valid_lens = torch.ones(3, 5, dtype=torch.bool).tril(2)
    else:
        values[1, 4, 2] = float("inf")
    on_cpu = _both_paths(queries, keys, values, valid_lens)
    with SimulatedAccelerator(), strict_checks():
        moved = [t.to(ACCELERATOR) for t in (queries, keys, values, valid_lens)]
        on_accelerator = _both_paths(*moved)
        assert on_accelerator.device.type == "cuda"
    torch.testing.assert_close(on_accelerator.cpu(), on_cpu, equal_nan=True)
    assert on_cpu.isnan().any() == (case in ("causally masked value", "visible value"))  # seen by some query
    assert on_cpu[0, :2].isfinite().all()  # ... but never by these


def test_nan_in_a_causally_masked_value_changes_nothing():
    queries, keys, values, _ = _clean_inputs()
    mask = torch.ones(3, 5, dtype=torch.bool).tril(2)  # query i sees keys 0..i+2
    expected = _both_paths(queries, keys, values, mask)
    values[:, 4] = float("nan")  # seen by the last query only
    out = _both_paths(queries, keys, values, mask)
    torch.testing.assert_close(out[:, :2], expected[:, :2])
    assert out[:, 2].isnan().all()


def test_nan_in_a_visible_value_gives_nan_in_that_feature_on_both_paths():
    queries, keys, values, valid_lens = _clean_inputs()
    expected = _both_paths(queries, keys, values, valid_lens)
    values[0, 1, 2] = float("nan")
    out = _both_paths(queries, keys, values, valid_lens)
    assert out[0, :, 2].isnan().all()
    keep = torch.ones_like(out, dtype=torch.bool)
    keep[0, :, 2] = False
    torch.testing.assert_close(out[keep], expected[keep])


@pytest.mark.parametrize("bad", [float("inf"), float("nan")])
def test_plus_inf_or_nan_score_gives_a_nan_row_on_both_paths(bad):
    queries, keys, values, valid_lens = _clean_inputs()
    bias = torch.zeros(2, 3, 5)
    bias[0, 0, 1] = bad  # visible
    bias[1, 2, 4] = bad  # visible too
    bias[0, 2, 4] = bad  # masked: sequence 0 sees 3 keys
    out = _both_paths(queries, keys, values, valid_lens, bias)
    assert out[0, 0].isnan().all() and out[1, 2].isnan().all()
    assert out[0, 1:].isfinite().all() and out[1, :2].isfinite().all()


def test_plus_inf_key_gives_nan_rows_on_both_paths():
    queries, keys, values, valid_lens = _clean_inputs()
    keys[1, 0] = float("inf")  # scores +inf or -inf (or NaN) for every query of sequence 1
    out = _both_paths(queries.abs(), keys, values, valid_lens)
    assert out[1].isnan().all() and out[0].isfinite().all()


def test_fully_masked_queries_still_give_zeros_with_nan_around():
    queries, keys, values, _ = _clean_inputs()
    queries[0, 0] = float("nan")
    values[0, 0] = float("nan")
    mask = torch.ones(2, 3, 5, dtype=torch.bool)
    mask[0, 0] = False
    out = _both_paths(queries, keys, values, mask)
    assert torch.equal(out[0, 0], torch.zeros(6))


# --- argument checks -------------------------------------------------------------------------------


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("valid_lens, message", [
    (torch.tensor([3, 6]), r"valid_lens must be at most the number of keys, 5, got \[3, 6\]"),
    (torch.tensor([3.0, float("inf")]), r"valid_lens must be at most the number of keys, 5, got \[3.0, inf\]"),
    ("3", "valid_lens must be None, integer lengths or a boolean mask, got str '3'"),
])
def test_bad_valid_lens_are_refused(fused, valid_lens, message):
    queries, keys, values, _ = _clean_inputs()
    with pytest.raises(ValueError, match=message):
        DotProductAttention(0.0, fused=fused)(queries, keys, values, valid_lens)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_integer_inputs_are_refused(name):
    queries, keys, values = (torch.ones(2, 3, 4, dtype=torch.long), torch.ones(2, 5, 4, dtype=torch.long),
                             torch.ones(2, 5, 6, dtype=torch.long))
    with pytest.raises(ValueError, match="queries must be a floating-point tensor, got dtype torch.int64"):
        FACTORIES[name]()(queries, keys, values)


@pytest.mark.parametrize("name", ["additive", "general", "concat", "location"])
def test_inputs_in_another_dtype_than_the_weights_are_refused(name):
    layer = FACTORIES[name]()
    queries, keys, values = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)
    layer(queries, keys, values)
    with pytest.raises(ValueError, match="has torch.float32 weights but got torch.float64 inputs"):
        layer(queries.double(), keys.double(), values.double())


@pytest.mark.parametrize("call, message", [
    (lambda: AdditiveAttention(0, 0.0), "num_hiddens must be a positive integer, got 0"),
    (lambda: ConcatAttention(-1), "num_hiddens must be a positive integer, got -1"),
    (lambda: LocationAttention(0), "max_keys must be a positive integer, got 0"),
])
def test_non_positive_sizes_are_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()


BUILT = r" was built \(at its first call\) for "


@pytest.mark.parametrize("layer, sizes, message", [
    (AdditiveAttention(8, 0.0), (7, 5), "AdditiveAttention" + BUILT + "queries of size 3, got 7"),
    (AdditiveAttention(8, 0.0), (3, 2), "AdditiveAttention" + BUILT + "keys of size 5, got 2"),
    (ConcatAttention(8), (3, 6), "ConcatAttention" + BUILT + "query and key sizes adding up to 8, got 9"),
    (LocationAttention(4), (2, 5), "LocationAttention" + BUILT + "queries of size 3, got 2"),
])
def test_lazy_layers_name_the_sizes_they_were_built_for(layer, sizes, message):
    layer(torch.randn(1, 2, 3), torch.randn(1, 4, 5), torch.randn(1, 4, 6))
    d_q, d_k = sizes
    with pytest.raises(ValueError, match=message + r" \(queries \(1, 2, " + str(d_q) + r"\), keys \(1, 4, " + str(d_k)
                       + r"\)\); use a new layer for other sizes"):
        layer(torch.randn(1, 2, d_q), torch.randn(1, 4, d_k), torch.randn(1, 4, 6))


def test_finite_inputs_whose_sum_overflows_still_give_the_exact_result():
    # The finiteness check sums each input; an overflow there only routes to the explicit path.
    queries, keys, values, valid_lens = _clean_inputs()
    values[:, :, :2] = 3e38
    out = _both_paths(queries, keys, values, valid_lens)
    assert out.isfinite().all()
    torch.testing.assert_close(out, masked_softmax(queries @ keys.mT / 2, valid_lens) @ values)  # d = 4


# --- the bias option of the additive and concat layers, and the distance layer ------------------

def test_bias_is_off_by_default_and_adds_one_vector_to_W_q():
    q, k, v = _d2l_inputs()
    plain, biased = AdditiveAttention(8, 0.0), AdditiveAttention(8, 0.0, use_bias=True)
    plain(q, k, v), biased(q, k, v)
    assert plain.W_q.bias is None and sorted(plain.state_dict()) == ["W_k.weight", "W_q.weight", "w_v.weight"]
    assert sorted(biased.state_dict()) == ["W_k.weight", "W_q.bias", "W_q.weight",
                                           "w_v.weight"]
    assert biased.W_q.bias.shape == (8,) and biased.W_k.bias is None and biased.w_v.bias is None
    concat = ConcatAttention(8, use_bias=True)
    concat(q, k, v)
    assert sorted(concat.state_dict()) == ["W_a.bias", "W_a.weight", "v_a.weight"]
    assert sorted(ConcatAttention(8).state_dict()) == ["W_a.weight", "v_a.weight"]


def test_concat_with_bias_equals_additive_with_bias():
    q, k, v = _d2l_inputs()  # query size 6, key size 4
    concat = ConcatAttention(8, use_bias=True).eval()
    out = concat(q, k, v, torch.tensor([3, 7]))
    W = concat.W_a.weight.detach()
    additive = AdditiveAttention(8, 0.0, use_bias=True).eval()
    additive.load_state_dict({"W_q.weight": W[:, :6], "W_q.bias": concat.W_a.bias.detach(),
                              "W_k.weight": W[:, 6:], "w_v.weight": concat.v_a.weight.detach()})
    torch.testing.assert_close(additive(q, k, v, torch.tensor([3, 7])), out)


@pytest.mark.parametrize("name, parity", [("additive", -1), ("concat", -1), ("general", 1), ("distance", 1)])
def test_scores_without_bias_are_odd_or_even(name, parity):
    # s(-q, -k) = -s(q, k) for additive and concat without bias; general and distance are even.
    layer = build(name)
    q, k, _ = inputs(name)
    torch.testing.assert_close(layer.score(-q, -k), parity * layer.score(q, k))


@pytest.mark.parametrize("name", ["additive_bias", "concat_bias"])
def test_a_bias_breaks_the_odd_symmetry(name):
    layer = build(name)
    q, k, _ = inputs(name)
    assert not torch.allclose(layer.score(-q, -k), -layer.score(q, k))


def test_distance_attention_takes_a_general_layers_matrix():
    q, k, v = _d2l_inputs()
    general = GeneralAttention()
    general(q, k, v)
    distance = DistanceAttention()
    distance.load_state_dict(general.state_dict())
    distance(q, k, v)
    W = general.W_a.detach()
    expected = -((q[:, :, None, :] - (k @ W.T)[:, None, :, :]) ** 2).sum(-1)  # (batch, Q, K)
    torch.testing.assert_close(distance.attention_weights, torch.softmax(expected, dim=-1))


# --- attend: the one weighted average, and the registry of scores -----------------------------------

def test_attend_by_hand():
    # one query, three keys: scores (0, log 2, 5) with the third key masked -> weights (1/3, 2/3, 0)
    scores = torch.tensor([[[0.0, math.log(2.0), 5.0]]], dtype=torch.float64)
    values = torch.tensor([[[3.0, 0.0], [0.0, 6.0], [100.0, 100.0]]], dtype=torch.float64)
    output, weights = attend(scores, values, torch.tensor([2]))
    torch.testing.assert_close(weights, torch.tensor([[[1 / 3, 2 / 3, 0.0]]], dtype=torch.float64))
    torch.testing.assert_close(output, torch.tensor([[[1.0, 4.0]]], dtype=torch.float64))  # (3 * 1/3, 6 * 2/3)
    # a bias is added before the softmax: + (log 2, 0, 0) gives equal weights (1/2, 1/2)
    bias = torch.tensor([math.log(2.0), 0.0, 0.0], dtype=torch.float64)
    output, weights = attend(scores, values, torch.tensor([2]), attn_bias=bias)
    torch.testing.assert_close(output, torch.tensor([[[1.5, 3.0]]], dtype=torch.float64))
    # no visible key: zero weights and a zero output, never NaN
    output, weights = attend(scores, values, torch.tensor([0]))
    assert torch.equal(weights, torch.zeros_like(weights)) and torch.equal(output, torch.zeros_like(output))


def test_attend_drops_out_the_weights_it_averages_with_but_returns_them_whole():
    scores, values = torch.zeros(1, 1, 2), torch.tensor([[[2.0], [4.0]]])
    output, weights = attend(scores, values, dropout=lambda w: w * torch.tensor([2.0, 0.0]))  # a dropout mask
    torch.testing.assert_close(weights, torch.tensor([[[0.5, 0.5]]]))  # before dropout, as d2l keeps them
    torch.testing.assert_close(output, torch.tensor([[[2.0]]]))  # 2 * 0.5 * 2 + 0 * 0.5 * 4


def test_attend_follows_the_nan_rule():
    scores = torch.zeros(1, 2, 3)
    values = torch.tensor([[[1.0, 2.0], [3.0, float("inf")], [float("nan"), float("nan")]]])
    output, _ = attend(scores, values, torch.tensor([[2, 1]]))  # query 0 sees keys 0, 1; query 1 key 0
    torch.testing.assert_close(output[0, 1], torch.tensor([1.0, 2.0]))  # masked NaN and inf change nothing
    assert output[0, 0, 0] == 2.0 and torch.isnan(output[0, 0, 1])  # a visible inf: NaN in that feature


def test_attend_refuses_values_that_do_not_pair_with_the_keys():
    with pytest.raises(ValueError, match=r"one value per key: scores \(1, 2, 3\) score 3 keys, values \(1, 4, 2\)"):
        attend(torch.zeros(1, 2, 3), torch.zeros(1, 4, 2))
    with pytest.raises(ValueError, match=r"values of shape \(\.\.\., keys, features\), got \(3,\)"):
        attend(torch.zeros(1, 2, 3), torch.zeros(3))


@pytest.mark.parametrize("name", ["additive", "additive_bias", "general", "concat", "concat_bias"])
def test_a_layer_built_from_its_sizes_equals_a_lazy_one_from_the_same_seed(name):
    """Built at once, the maps draw their initial weights in the order the lazy layer draws them at its first
    call (W_q, W_k, w_v; W_a, v_a), so the same seed gives the same layer."""
    bias = {"use_bias": True} if name.endswith("_bias") else {}
    kind = name.removesuffix("_bias")
    make = {"additive": lambda **o: AdditiveAttention(5, 0.0, **bias, **o),
            "general": lambda **o: GeneralAttention(**o), "concat": lambda **o: ConcatAttention(5, **bias, **o)}[kind]
    q, k, v = inputs(name)
    torch.manual_seed(0)
    lazy = make()
    expected = lazy(q.float(), k.float(), v.float())
    torch.manual_seed(0)
    sized = make(query_size=q.shape[-1], key_size=k.shape[-1])
    assert list(sized.state_dict()) == list(lazy.state_dict())
    for key, value in lazy.state_dict().items():
        assert torch.equal(sized.state_dict()[key], value), key
    assert torch.equal(sized(q.float(), k.float(), v.float()), expected)
    with pytest.raises(ValueError, match="give both query_size and key_size"):
        make(query_size=3)


def test_general_attention_scales_and_initialises_as_told():
    torch.manual_seed(0)
    layer = GeneralAttention(query_size=4, key_size=4, scale=0.5, init=lambda W: torch.nn.init.eye_(W))
    assert torch.equal(layer.W_a.detach(), torch.eye(4))
    q, k = torch.randn(2, 3, 4), torch.randn(2, 5, 4)
    torch.testing.assert_close(layer.score(q, k), 0.5 * q @ k.transpose(1, 2))


def test_the_score_registry_builds_every_layer_by_name():
    assert set(SCORES) == {"dot", "additive", "general", "concat", "distance", "neg_sq_dist", "cosine", "location",
                           "uniform"}
    options = {"additive": {"num_hiddens": 4}, "concat": {"num_hiddens": 4}, "location": {"max_keys": 5}}
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 2)
    for name, cls in SCORES.items():
        layer = score_layer(name, **options.get(name, {}))
        assert type(layer) is cls and isinstance(layer, ScoredAttention) and layer.dropout.p == 0.0
        assert layer(q, k, v, torch.tensor([5, 2])).shape == (2, 3, 2)
    assert score_layer("dot", scale=1.0).scale == 1.0
    with pytest.raises(ValueError, match=r"score must be one of \('dot', 'uniform'\), got 'general'"):
        score_layer("general", ("dot", "uniform"))
    with pytest.raises(ValueError, match="score must be one of"):
        score_layer("bilinear")


def test_uniform_attention_is_the_mean_of_the_visible_values():
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 6), torch.randn(2, 5, 2)
    output = UniformAttention()(q, k, v, torch.tensor([5, 2]))
    torch.testing.assert_close(output[0], v[0].mean(0).expand(3, 2))
    torch.testing.assert_close(output[1], v[1, :2].mean(0).expand(3, 2))
