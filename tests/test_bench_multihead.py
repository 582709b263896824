"""``benchmarks/bench_multihead.py``: its reference rows compute what they claim to."""

from __future__ import annotations

import collections
import math

import torch
from benchmark_modules import load_benchmark
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch_reference import copy_into_torch_attention

from attn_utils import MultiHeadAttention

bench = load_benchmark("bench_multihead")
BATCH, N, D, HEADS = 3, 8, 16, 2


class Recorded(TorchDispatchMode):
    """Counts the ``key(func, args)`` of every aten call run inside it for which the key is not None."""

    def __init__(self, key):
        super().__init__()
        self.key, self.counts = key, collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        key = self.key(func, args)
        if key is not None:
            self.counts[key] += 1
        return func(*args, **(kwargs or {}))


def products_of(step) -> collections.Counter:
    """The operand shapes of every matrix product (``aten.mm``) of ``step()``."""
    def shapes(func, args):
        return tuple(tuple(a.shape) for a in args[:2]) if func is torch.ops.aten.mm.default else None
    with Recorded(shapes) as recorded:
        step()
    return recorded.counts


def kernels_of(step) -> collections.Counter:
    """The names of the SDPA kernels (forward and backward) of ``step()``."""
    with Recorded(lambda func, args: func.__name__ if "scaled_dot_product" in func.__name__ else None) as recorded:
        step()
    return recorded.counts


def ours_and_torchs():
    """Our layer and torch's, with the same weights."""
    ours = MultiHeadAttention(D, HEADS, 0.0)
    ref = nn.MultiheadAttention(D, HEADS, bias=False, batch_first=True)
    copy_into_torch_attention(ours, ref)
    return ours, ref


def inputs():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(BATCH, N, D, generator=gen, requires_grad=True)
    lens = torch.tensor([8, 5, 1])
    return x, lens, torch.arange(N) >= lens[:, None]  # torch's mask: True = padding


def test_the_floor_runs_exactly_the_products_of_one_step_of_ours_and_of_torch():
    x, lens, pad = inputs()
    ours, ref = ours_and_torchs()
    floor = products_of(bench.same_products(BATCH, N, D, torch.device("cpu")))
    tokens = BATCH * N
    assert floor == collections.Counter({((tokens, D), (D, 3 * D)): 1, ((tokens, D), (D, D)): 2,
                                         ((D, tokens), (tokens, D)): 1, ((3 * D, tokens), (tokens, D)): 1,
                                         ((tokens, 3 * D), (3 * D, D)): 1})
    assert products_of(lambda: ours(x, x, x, lens).sum().backward()) == floor
    assert products_of(lambda: ref(x, x, x, key_padding_mask=pad, need_weights=False)[0].sum().backward()) == floor


def test_minimal_attention_is_torchs_module_and_ours_with_their_gradients():
    x, lens, pad = inputs()
    torch.manual_seed(1)
    ours, ref = ours_and_torchs()
    packed = nn.Parameter(ref.in_proj_weight.detach().clone())
    out = nn.Parameter(ref.out_proj.weight.detach().clone())
    minimal = bench.minimal_attention(x, ~pad, packed, out, HEADS)
    expected = ref(x, x, x, key_padding_mask=pad, need_weights=False)[0]
    torch.testing.assert_close(minimal, expected)
    torch.testing.assert_close(minimal, ours(x, x, x, lens))
    grads = torch.autograd.grad(minimal.square().sum(), (x, packed, out))
    expected_grads = torch.autograd.grad(expected.square().sum(), (x, ref.in_proj_weight, ref.out_proj.weight))
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want)


def test_the_floor_runs_the_attention_kernels_of_one_step_of_ours():
    x, lens, pad = inputs()
    ours = MultiHeadAttention(D, HEADS, 0.0)
    alone = kernels_of(bench.sdpa_alone(BATCH, N, D, HEADS, ~pad))
    assert alone == kernels_of(lambda: ours(x, x, x, lens).sum().backward())
    assert alone  # SDPA ran (its backward is a kernel of its own where the fused CPU kernel runs)


def test_a_quick_run_times_every_row_and_the_floor():
    results = bench.run(torch.device("cpu"), bench.QUICK_SIZES, repeats=1)
    assert len(results) == len(bench.QUICK_SIZES)
    ratios = results[0]["ratio"]
    assert {"ours", "ours explicit", "torch weights", "minimal", "floor"} <= set(ratios)
    assert all(math.isfinite(r) and r > 0 for r in ratios.values())
    assert results[0]["torch_ms"] > 0
