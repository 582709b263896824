"""The Triton FlashAttention-2 kernels (``attn_utils.triton_attention``) against attention written out in
float64, torch's SDPA and ``tiled_attention``: outputs, log-sum-exps and the gradients of Q, K and V.

Without CUDA the kernels run through Triton's interpreter (``tests/conftest.py`` sets ``TRITON_INTERPRET=1``
before anything imports Triton), one program at a time, so the shapes here are tiny (n <= 40, blocks of
16: several blocks, ragged edges). The ``cuda`` tests repeat the checks at real sizes on a GPU.
"""

from __future__ import annotations

import importlib.util
import math
import os
import platform
import subprocess
import sys

import pytest
import torch
from torch.nn import functional as F

from attn_utils import causal_mask, tiled_attention
from attn_utils.tolerance import assert_close, full_float32
from attn_utils.triton_attention import (
    kernel_blocks,
    triton_attention,
    triton_available,
    triton_unavailable_reason,
)

if importlib.util.find_spec("triton") is None and not (sys.platform == "linux" and platform.machine() == "x86_64"):
    pytest.skip("triton has wheels for Linux x86-64 only, and is not installed here", allow_module_level=True)

cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                          reason="needs a real CUDA GPU (Triton kernels do not run on the simulated accelerator)")
# Triton interprets kernels in a process that asked before importing it, and then only: where there is
# CUDA, conftest does not ask, and the cuda tests below check the same cases at GPU sizes instead.
interpreter = pytest.mark.skipif(torch.cuda.is_available(),
                                 reason="CPU tensors through Triton's interpreter: the cuda tests run on this machine")
BLOCK = {"block_size_q": 16, "block_size_k": 16}


def inputs(batch, heads_q, heads_kv, n_q, n_k, d, dtype=torch.float32, device="cpu", seed=0):
    """Queries (batch, heads_q, n_q, d), keys and values (batch, heads_kv, n_k, d), requiring gradients."""
    gen = torch.Generator().manual_seed(seed)
    shapes = [(batch, heads_q, n_q, d), (batch, heads_kv, n_k, d), (batch, heads_kv, n_k, d)]
    return [torch.randn(s, generator=gen).to(device=device, dtype=dtype).requires_grad_() for s in shapes]


def visible(n_q, n_k, valid_lens=None, causal=False, device="cpu"):
    """Boolean (batch or 1, 1, n_q, n_k): which keys each query sees."""
    keep = torch.ones(1, 1, n_q, n_k, dtype=torch.bool, device=device)
    if valid_lens is not None:
        lens = torch.as_tensor(valid_lens, device=device)
        lens = lens.reshape(-1, 1, 1) if lens.dim() == 1 else lens.reshape(lens.shape[0], -1, n_q)
        keep = keep & (torch.arange(n_k, device=device) < lens.unsqueeze(-1))
    if causal:
        keep = keep & causal_mask(n_q, n_k, device=device)
    return keep


def reference(q, k, v, valid_lens=None, causal=False, scale=None):
    """softmax(scale Q K^T) V and its log-sum-exp, written out in float64: each query head h reads key
    head h // group; a query that sees no key gets output 0 and log-sum-exp -inf. 3-D inputs are one head."""
    if q.dim() == 3:
        out, lse = reference(q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1), valid_lens, causal, scale)
        return out.squeeze(1), lse.squeeze(1)
    q, k, v = q.double(), k.double(), v.double()
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    keep = visible(q.shape[-2], k.shape[-2], valid_lens, causal, q.device)
    scores = (q @ k.transpose(-2, -1) * scale).masked_fill(~keep, float("-inf"))
    m = scores.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)  # a row with no key: no shift
    w = torch.exp(scores - m)  # masked: exp(-inf) = 0
    l = w.sum(dim=-1, keepdim=True)
    out = (w @ v) / torch.where(l > 0, l, torch.ones_like(l))
    lse = torch.where(l > 0, m + torch.log(torch.where(l > 0, l, torch.ones_like(l))), float("-inf"))
    return out, lse.squeeze(-1)


def grads(out, tensors, seed=1):
    """dQ, dK, dV of <out, G> for a fixed random G (the same for every implementation)."""
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed)).to(out.device, out.dtype)
    return torch.autograd.grad(out, tensors, g)


def check_against_reference(q, k, v, valid_lens=None, causal=False, scale=None, **blocks):
    """Output, log-sum-exp and gradients of triton_attention equal the float64 reference's; returns them."""
    out, lse = triton_attention(q, k, v, valid_lens, causal=causal, scale=scale, **blocks)
    assert out.dtype == q.dtype and lse.dtype == torch.float32
    assert out.shape == q.shape and lse.shape == q.shape[:-1]
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    expected, expected_lse = reference(q64, k64, v64, valid_lens, causal, scale)
    got_grads = grads(out, (q, k, v))
    expected_grads = grads(expected, (q64, k64, v64))
    assert_close(out, expected, msg="output")
    assert_close(lse, expected_lse.float(), msg="log-sum-exp")
    for name, got, want in zip(("dq", "dk", "dv"), got_grads, expected_grads):
        assert got.shape == want.shape and got.dtype == q.dtype
        assert not got.isnan().any(), name
        assert_close(got, want, msg=name)
    return out, lse, got_grads


# ----------------------------------------------------------------------------------------------
# Against the float64 reference, under the interpreter (or on the GPU where there is one)
# ----------------------------------------------------------------------------------------------

# (batch, heads_q, heads_kv, n_q, n_k, d, valid_lens, causal)
CASES = {
    "plain": (2, 2, 2, 40, 40, 32, None, False),
    "ragged lengths (0, mid-block, full)": (3, 2, 2, 33, 40, 16, [0, 21, 40], False),
    "lengths per query": (2, 1, 1, 19, 35, 16, [[0, 3, 17, 35] + [9] * 15, list(range(19))], False),
    "causal, n_q = n_k": (2, 2, 2, 37, 37, 16, None, True),
    "causal, n_q < n_k": (1, 2, 2, 20, 37, 16, None, True),
    "causal, n_q > n_k (rows that see no key)": (1, 2, 2, 37, 20, 16, None, True),
    "causal and lengths": (2, 2, 2, 30, 30, 16, [7, 30], True),
    "grouped query, 4 heads on 2": (1, 4, 2, 24, 33, 16, [33], True),
    "grouped query, 4 heads on 1": (2, 4, 1, 24, 20, 16, [20, 5], False),
    "d = 20, not a power of two": (1, 2, 2, 21, 18, 20, None, False),
    "one query (a decode step)": (2, 2, 2, 1, 35, 16, [35, 12], True),
}


@interpreter
@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_float32_matches_the_float64_reference(case):
    batch, heads_q, heads_kv, n_q, n_k, d, lens, causal = CASES[case]
    q, k, v = inputs(batch, heads_q, heads_kv, n_q, n_k, d)
    check_against_reference(q, k, v, None if lens is None else torch.tensor(lens), causal, **BLOCK)


@interpreter
@pytest.mark.parametrize("case", ["plain", "causal, n_q > n_k (rows that see no key)", "grouped query, 4 heads on 2"])
def test_float16_matches_the_float64_reference(case):
    batch, heads_q, heads_kv, n_q, n_k, d, lens, causal = CASES[case]
    q, k, v = inputs(batch, heads_q, heads_kv, n_q, n_k, d, dtype=torch.float16)
    check_against_reference(q, k, v, None if lens is None else torch.tensor(lens), causal, **BLOCK)


@interpreter
def test_queries_that_see_no_key_get_zeros_and_minus_infinity():
    q, k, v = inputs(2, 2, 2, 37, 20, 16)
    lens = torch.tensor([0, 20])  # the first sequence sees no key at all; in both, causal hides 17 queries
    out, lse, (dq, dk, dv) = check_against_reference(q, k, v, lens, causal=True, **BLOCK)
    for t in (out[0], out[1, :, :17], dq[0], dq[1, :, :17], dk[0], dv[0]):
        assert torch.equal(t, torch.zeros_like(t))
    assert torch.isneginf(lse[0]).all() and torch.isneginf(lse[1, :, :17]).all()
    assert torch.isfinite(lse[1, :, 17:]).all()


@interpreter
def test_keys_past_the_valid_length_get_no_gradient():
    q, k, v = inputs(2, 2, 2, 18, 40, 16)
    lens = torch.tensor([13, 40])
    _, _, (dq, dk, dv) = check_against_reference(q, k, v, lens, **BLOCK)
    assert torch.equal(dk[0, :, 13:], torch.zeros_like(dk[0, :, 13:]))
    assert torch.equal(dv[0, :, 13:], torch.zeros_like(dv[0, :, 13:]))
    assert dk[0, :, :13].abs().sum() > 0 and dv[1, :, 13:].abs().sum() > 0


@interpreter
def test_three_dimensional_inputs_are_one_head():
    q, k, v = (t.detach()[:, 0].requires_grad_() for t in inputs(2, 1, 1, 25, 31, 16))
    out, lse, _ = check_against_reference(q, k, v, torch.tensor([31, 4]), causal=True, **BLOCK)
    assert out.shape == (2, 25, 16) and lse.shape == (2, 25)


@interpreter
def test_strided_inputs_and_a_scale():
    """Queries laid out (batch, n, heads, d) and transposed, as after a projection: no copy is needed."""
    q, k, v = (t.detach().transpose(1, 2).contiguous().transpose(1, 2).requires_grad_()
               for t in inputs(2, 2, 2, 23, 29, 16))
    assert not q.is_contiguous()
    check_against_reference(q, k, v, torch.tensor([29, 11]), causal=True, scale=0.3, **BLOCK)


@interpreter
def test_the_gradient_of_a_sum_whose_output_gradient_is_one_broadcast_number():
    q, k, v = inputs(1, 2, 2, 20, 20, 16)
    triton_attention(q, k, v, causal=True, **BLOCK)[0].sum().backward()  # dO arrives with stride 0
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    reference(q64, k64, v64, causal=True)[0].sum().backward()
    for got, want in ((q.grad, q64.grad), (k.grad, k64.grad), (v.grad, v64.grad)):
        assert_close(got, want)


@interpreter
@pytest.mark.parametrize("block_q, block_k", [(16, 32), (32, 16)])
def test_unequal_blocks_and_a_causal_offset_inside_a_block(block_q, block_k):
    q, k, v = inputs(2, 2, 2, 30, 44, 16)  # query i sees keys up to i + 14
    check_against_reference(q, k, v, torch.tensor([44, 37]), causal=True, block_size_q=block_q, block_size_k=block_k)


@interpreter
@pytest.mark.parametrize("n_q, n_k", [(0, 5), (5, 0), (0, 0)])
def test_empty_sequences(n_q, n_k):
    q, k, v = inputs(2, 2, 2, n_q, n_k, 16)
    out, lse = triton_attention(q, k, v, causal=True)
    assert out.shape == q.shape and torch.equal(out, torch.zeros_like(out)) and torch.isneginf(lse).all()
    for t, g in zip((q, k, v), torch.autograd.grad(out.sum(), (q, k, v))):
        assert g.shape == t.shape and torch.equal(g, torch.zeros_like(g))


@interpreter
def test_default_block_sizes():
    q, k, v = inputs(1, 2, 2, 40, 37, 16)
    check_against_reference(q, k, v, torch.tensor([30]), causal=True)


# ----------------------------------------------------------------------------------------------
# Against torch's SDPA and the course's tiled attention
# ----------------------------------------------------------------------------------------------

@interpreter
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("heads_kv", [4, 2, 1])
def test_matches_scaled_dot_product_attention(causal, heads_kv):
    q, k, v = inputs(2, 4, heads_kv, 26, 34, 16)
    lens = torch.tensor([34, 19])  # every query sees a key (SDPA gives NaN for a row that sees none)
    out, _ = triton_attention(q, k, v, lens, causal=causal, **BLOCK)
    mask = visible(26, 34, lens, causal)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=heads_kv < 4)
    assert_close(out, expected)
    for got, want in zip(grads(out, (q, k, v)), grads(expected, (q, k, v))):
        assert_close(got, want)


@interpreter
@pytest.mark.parametrize("causal", [False, True])
def test_matches_tiled_attention(causal):
    q, k, v = inputs(2, 2, 2, 36, 28, 16)
    lens = torch.tensor([[5] * 36, list(range(36))]).clamp(max=28)  # per-query lengths, 0 included
    out, lse = triton_attention(q, k, v, lens, causal=causal, **BLOCK)
    expected, expected_lse = tiled_attention(q, k, v, lens, causal=causal, block_size_q=16, block_size_k=16,
                                             recompute=True)
    assert_close(out, expected)
    assert_close(lse, expected_lse)
    for got, want in zip(grads(out, (q, k, v)), grads(expected, (q, k, v))):
        assert_close(got, want)


def test_block_sizes_default_per_device():
    cpu = kernel_blocks(torch.device("cpu"), torch.float32, 64)
    assert cpu["forward"][:2] == (32, 32)
    assert kernel_blocks(torch.device("cuda"), torch.float16, 128, block_size_q=64)["dq"][0] == 64
    assert set(kernel_blocks(torch.device("cuda"), torch.float16, 40)) == {"forward", "dkdv", "dq"}


def test_triton_is_available_here():
    assert triton_available(), triton_unavailable_reason()
    assert triton_unavailable_reason() is None


# ----------------------------------------------------------------------------------------------
# Bad inputs: each says what was expected
# ----------------------------------------------------------------------------------------------

def _bad_inputs():
    q, k, v = (t.detach() for t in inputs(2, 4, 2, 8, 8, 16))
    return {
        "2-D queries": ((q[0, 0], k, v), {}, "must have shape"),
        "3-D and 4-D mixed": ((q[:, 0], k, v), {}, "all be 3-D"),
        "dtypes differ": ((q.half(), k, v), {}, "one dtype"),
        "float64": ((q.double(), k.double(), v.double()), {}, "float64"),
        "bfloat16 on the CPU": ((q.bfloat16(), k.bfloat16(), v.bfloat16()), {}, "bfloat16 is not supported on the CPU"),
        "heads not a multiple": ((q[:, :3], k, v), {}, "multiple of the key/value heads"),
        "d differs": ((q[..., :8], k, v), {}, "same size d"),
        "keys and values differ": ((q, k, v[..., :8]), {}, "same shape"),
        "batch differs": ((q[:1], k, v), {}, "same batch size"),
        "d too large": ((torch.zeros(1, 1, 4, 256),) * 3, {}, "head sizes d from 1 to 128"),
        "a boolean mask": ((q, k, v, torch.ones(8, 8, dtype=torch.bool)), {}, "tiled_attention"),
        "lengths of another shape": ((q, k, v, torch.tensor([1, 2, 3])), {}, "valid_lens has shape"),
        "lengths past the keys": ((q, k, v, torch.tensor([9, 2])), {}, "at most the number of keys"),
        "negative lengths": ((q, k, v, torch.tensor([-1, 2])), {}, ">= 0"),
        "causal not a bool": ((q, k, v), {"causal": 1}, "causal must be True or False"),
        "block not a power of two": ((q, k, v), {"block_size_q": 24}, "power of two >= 16"),
        "block too small": ((q, k, v), {"block_size_k": 8}, "power of two >= 16"),
        "devices differ": ((q, k.to("meta"), v), {}, "one device"),
        "not CPU nor CUDA": ((q.to("meta"), k.to("meta"), v.to("meta")), {}, "runs on a CUDA GPU"),
    }


BAD = _bad_inputs()


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_inputs_raise_a_clear_error(case):
    args, kwargs, message = BAD[case]
    with pytest.raises(ValueError, match=message):
        triton_attention(*args, **kwargs)


@interpreter
def test_cpu_tensors_without_the_interpreter_say_how_to_turn_it_on():
    code = ("import torch\nfrom attn_utils.triton_attention import triton_attention, triton_unavailable_reason\n"
            "print(triton_unavailable_reason())\n"
            "q = torch.zeros(1, 1, 4, 16)\ntriton_attention(q, q, q)\n")
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert "set TRITON_INTERPRET=1" in result.stdout, result.stdout + result.stderr
    assert "RuntimeError" in result.stderr and "set TRITON_INTERPRET=1 in the environment" in result.stderr


# ----------------------------------------------------------------------------------------------
# On a CUDA GPU, at real sizes
# ----------------------------------------------------------------------------------------------

# (dtype, d, causal): each dtype and head size once, causal and not
GPU_CASES = [(torch.float16, 64, False), (torch.float16, 128, True), (torch.bfloat16, 64, True),
             (torch.bfloat16, 128, False), (torch.float32, 64, True), (torch.float32, 128, False)]


def _case_id(dtype, d, causal):
    return f"{str(dtype).removeprefix('torch.')}-d{d}-{'causal' if causal else 'full'}"


@cuda
@pytest.mark.gpu
@pytest.mark.parametrize("dtype, d, causal", GPU_CASES, ids=[_case_id(*c) for c in GPU_CASES])
def test_cuda_matches_the_float64_reference(dtype, d, causal):
    """n = 300 (not a multiple of any block), grouped-query heads, ragged lengths; float32 must be true
    float32 (the kernels' products are IEEE), so it is held to float32's tolerance, not TF32's."""
    q, k, v = inputs(2, 4, 2, 300, 300, d, dtype=dtype, device="cuda")
    lens = torch.tensor([300, 123], device="cuda")
    with full_float32():
        check_against_reference(q, k, v, lens, causal)


@cuda
@pytest.mark.gpu
def test_cuda_rows_that_see_no_key():
    q, k, v = inputs(2, 4, 4, 300, 200, 64, dtype=torch.float16, device="cuda")
    lens = torch.tensor([200, 0], device="cuda")  # the second sequence sees no key at all
    out, lse, (dq, dk, dv) = check_against_reference(q, k, v, lens, causal=True)
    for t in (out[:, :, :100], out[1], dq[:, :, :100], dq[1], dk[1], dv[1]):
        assert torch.equal(t, torch.zeros_like(t))
    assert torch.isneginf(lse[:, :, :100]).all() and torch.isneginf(lse[1]).all()


@cuda
@pytest.mark.gpu
def test_cuda_lengths_per_query_and_a_head_size_of_80():
    q, k, v = inputs(2, 2, 2, 200, 260, 80, dtype=torch.float16, device="cuda")
    lens = torch.randint(0, 261, (2, 200), generator=torch.Generator().manual_seed(0)).cuda()
    check_against_reference(q, k, v, lens)


@cuda
@pytest.mark.gpu
def test_cuda_one_query_and_one_key_value_head():
    """A decode step (n_q = 1 sees every key) with multi-query attention, 3-D-free: 8 query heads on 1."""
    q, k, v = inputs(3, 8, 1, 1, 1000, 64, dtype=torch.bfloat16, device="cuda")
    check_against_reference(q, k, v, torch.tensor([1000, 999, 1], device="cuda"), causal=True)


@cuda
@pytest.mark.gpu
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_cuda_matches_sdpa_at_1024(d, causal):
    """The benchmark's case (float16, default blocks) against SDPA, gradients included."""
    q, k, v = inputs(2, 8, 8, 1024, 1024, d, dtype=torch.float16, device="cuda")
    out, _ = triton_attention(q, k, v, causal=causal)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert_close(out, expected)
    for name, got, want in zip(("dq", "dk", "dv"), grads(out, (q, k, v)), grads(expected, (q, k, v))):
        assert_close(got, want, msg=name)


# --- the switch: DotProductAttention and MultiHeadAttention on the Triton kernel ----------------------------------

@pytest.mark.parametrize("device", [pytest.param("cpu", marks=interpreter), pytest.param("cuda", marks=cuda)])
def test_multi_head_attention_on_the_triton_kernel_equals_it_on_sdpa(device):
    from attn_utils import MultiHeadAttention

    torch.manual_seed(0)
    sdpa = MultiHeadAttention(32, 4, 0.0, num_kv_heads=2).to(device).eval()
    triton = MultiHeadAttention(32, 4, 0.0, num_kv_heads=2, kernel="triton").to(device).eval()
    triton.load_state_dict(sdpa.state_dict())
    X = torch.randn(2, 19, 32, generator=torch.Generator().manual_seed(1)).to(device).requires_grad_()
    lens = torch.tensor([19, 7], device=device)
    expected, got = sdpa(X, X, X, lens), triton(X, X, X, lens)
    assert_close(got, expected)
    assert_close(torch.autograd.grad(got.sum(), X)[0], torch.autograd.grad(expected.sum(), X)[0])
    assert_close(triton.attention_weights, sdpa.attention_weights)  # computed the same way, when read


def test_the_triton_kernel_switch_refuses_what_it_cannot_compute():
    from attn_utils import DotProductAttention

    q = torch.randn(1, 2, 5, 8)
    layer = DotProductAttention(0.0, kernel="triton").eval()
    with pytest.raises(ValueError, match="valid lengths only"):
        layer(q, q, q, causal_mask(5, 5))
    with pytest.raises(ValueError, match="valid lengths only"):
        layer(q, q, q, None, torch.zeros(5, 5))
    with pytest.raises(ValueError, match="kernel must be one of"):
        DotProductAttention(0.0, kernel="flash")


@pytest.mark.parametrize("device", [pytest.param("cpu", marks=interpreter), pytest.param("cuda", marks=cuda)])
def test_causal_multi_head_attention_and_a_language_model_on_the_triton_kernel(device):
    """causal=True reaches the kernel's own causal loop (bottom-right, with lengths, and n_q < n_k through the
    cache); set_attention_kernel switches a whole CausalLanguageModel, whose logits and cached decoding match."""
    from attn_utils import CausalLanguageModel, MultiHeadAttention
    from attn_utils.attention import set_attention_kernel

    torch.manual_seed(0)
    sdpa = MultiHeadAttention(32, 4, 0.0).to(device).eval()
    triton = MultiHeadAttention(32, 4, 0.0, kernel="triton").to(device).eval()
    triton.load_state_dict(sdpa.state_dict())
    X = torch.randn(2, 19, 32, generator=torch.Generator().manual_seed(1)).to(device)
    lens = torch.tensor([19, 7], device=device)
    assert_close(triton(X, X, X, lens, causal=True), sdpa(X, X, X, lens, causal=True))
    assert_close(triton(X[:, -3:], X, X, causal=True), sdpa(X[:, -3:], X, X, causal_mask(3, 19, device)))

    torch.manual_seed(0)
    lm = CausalLanguageModel(50, 32, 64, 4, 2, position_scheme="rotary", num_kv_heads=2).to(device).eval()
    tokens = torch.randint(0, 50, (2, 21), generator=torch.Generator().manual_seed(2)).to(device)
    expected = lm(tokens)[0]
    set_attention_kernel(lm, "triton")
    assert all(m.kernel == "triton" for m in lm.modules() if hasattr(m, "kernel"))
    assert_close(lm(tokens)[0], expected)
    first, cache = lm(tokens[:, :17])
    rest, _ = lm(tokens[:, 17:], cache)  # 4 queries after 17 cached positions: bottom-right causal
    assert_close(torch.cat([first, rest], 1), expected)
    with pytest.raises(ValueError, match="kernel must be one of"):
        set_attention_kernel(lm, "flash")
