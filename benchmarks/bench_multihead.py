"""Multi-head self-attention, forward + backward: ours against torch.nn.MultiheadAttention and d2l's.

For each size (batch, sequence length n, width d, heads h), with a padding mask (random valid
lengths), every implementation gets the same weights and inputs and is timed in the same run,
interleaved, so all see the same machine load. Printed: the median time of torch's module with
``need_weights=False`` (its fast path) and every implementation's time divided by it (below 1 =
faster than torch). Implementations:

* ``ours`` — ``MultiHeadAttention`` as the course uses it (fused ``scaled_dot_product_attention``);
* ``ours explicit`` — the same with ``fused=False`` (scores, masked softmax, weighted sum);
* ``torch weights`` — torch's module with ``need_weights=True`` (its default);
* ``d2l`` — d2l's ``MultiHeadAttention`` (when d2l is installed);
* ``minimal`` — the leanest module one could write (``minimal_attention``): one packed input
  product, views, SDPA with a boolean mask, one output product, and no checks;
* ``floor`` — not a module: the time of the six matrix products that every implementation here
  runs per step (``same_products``) plus SDPA's forward and backward on ready-made
  ``(batch, heads, n, d/heads)`` inputs (``sdpa_alone``), timed apart and added. An implementation
  that runs these products and this kernel cannot take less: ``floor`` is the lowest ratio that
  torch's module, ours or ``minimal`` could reach on the machine at hand.

    python benchmarks/bench_multihead.py [--device cpu|cuda] [--threads N] [--repeats 20] [--quick]
        [--out benchmarks/results/multihead_cuda.json]

``--out`` stores the times and ratios as JSON with the device's name.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))

from timing import interleaved_medians, write_record  # noqa: E402
from torch_reference import copy_into_torch_attention  # noqa: E402

from attn_utils import MultiHeadAttention, get_device  # noqa: E402
from attn_utils.measure import environment  # noqa: E402

SIZES = [(32, 32, 256, 4), (32, 64, 256, 8), (16, 128, 256, 8), (8, 256, 512, 8)]
QUICK_SIZES = [(2, 8, 16, 2)]


def load_d2l():
    try:
        from d2l_reference import load_d2l as load
        return load()
    except Exception:  # d2l is a test-time extra; the benchmark runs without it
        return None


def implementations(d, heads, device, d2l):
    torch.manual_seed(0)
    ours = MultiHeadAttention(d, heads, 0.0).to(device)
    explicit = MultiHeadAttention(d, heads, 0.0, fused=False).to(device)
    explicit.load_state_dict(ours.state_dict())
    ref = nn.MultiheadAttention(d, heads, bias=False, batch_first=True).to(device)
    copy_into_torch_attention(ours, ref)
    impls = {
        "torch": lambda x, lens, pad: ref(x, x, x, key_padding_mask=pad, need_weights=False)[0],
        "ours": lambda x, lens, pad: ours(x, x, x, lens),
        "ours explicit": lambda x, lens, pad: explicit(x, x, x, lens),
        "torch weights": lambda x, lens, pad: ref(x, x, x, key_padding_mask=pad)[0],
    }
    if d2l is not None:
        theirs = d2l.MultiHeadAttention(d, heads, 0.0).to(device)
        theirs(*(torch.zeros(1, 2, d, device=device),) * 3, None)  # materialise the lazy layers
        theirs.load_state_dict(ours.state_dict())
        impls["d2l"] = lambda x, lens, pad: theirs(x, x, x, lens)
    packed = nn.Parameter(ref.in_proj_weight.detach().clone())  # (3d, d): queries', keys', values' rows
    out = nn.Parameter(ref.out_proj.weight.detach().clone())  # (d, d)
    impls["minimal"] = lambda x, lens, pad: minimal_attention(x, ~pad, packed, out, heads)
    return impls


def minimal_attention(x, keep, packed_weight, out_weight, heads):
    """Multi-head self-attention with nothing but the arithmetic and the layout: ``x`` (batch, n, d),
    ``keep`` (batch, n), True where a key may be attended to."""
    batch, n, d = x.shape
    qkv = F.linear(x, packed_weight).view(batch, n, 3, heads, d // heads)
    q, k, v = qkv.permute(2, 0, 3, 1, 4)  # 3 x (batch, heads, n, d/heads), views
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :])  # (batch, heads, n, d/heads)
    return F.linear(o.transpose(1, 2).reshape(batch, n, d), out_weight)  # (batch, n, d)


def same_products(batch, n, d, device):
    """The six matrix products of one forward and backward step, on random matrices of their shapes
    (T = batch * n tokens): input projection ``(T, d) @ (d, 3d)`` and output projection ``(T, d) @ (d, d)``
    forward; then the output projection's weight and input gradients and the input projection's."""
    tokens = batch * n
    x, a, grad_out = (torch.randn(tokens, d, device=device) for _ in range(3))
    w_in, grad_in = torch.randn(3 * d, d, device=device), torch.randn(tokens, 3 * d, device=device)
    w_out = torch.randn(d, d, device=device)

    def products():
        torch.mm(x, w_in.t()), torch.mm(a, w_out.t())  # forward
        torch.mm(grad_out.t(), a), torch.mm(grad_out, w_out)  # backward of the output projection
        torch.mm(grad_in.t(), x), torch.mm(grad_in, w_in)  # backward of the input projection
    return products


def sdpa_alone(batch, n, d, heads, keep):
    """SDPA's forward and backward on contiguous ``(batch, heads, n, d/heads)`` inputs with the mask."""
    q, k, v = (torch.randn(batch, heads, n, d // heads, device=keep.device, requires_grad=True) for _ in range(3))
    grad = torch.randn(batch, heads, n, d // heads, device=keep.device)
    mask = keep[:, None, None, :]  # (batch, 1, 1, n)
    return lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask).backward(grad)


def step(fn, x, lens, pad):
    """One forward and backward pass of ``fn``, ready to time."""
    return lambda: fn(x, lens, pad).sum().backward()


def run(device, sizes, repeats):
    d2l = load_d2l()
    names, results = None, []
    for batch, n, d, heads in sizes:
        gen = torch.Generator().manual_seed(1)
        x = torch.randn(batch, n, d, generator=gen).to(device).requires_grad_()
        lens = torch.randint(n // 2, n + 1, (batch,), generator=gen).to(device)
        pad = torch.arange(n, device=device) >= lens[:, None]  # torch: True = padding
        impls = implementations(d, heads, device, d2l)
        outputs = {name: fn(x, lens, pad) for name, fn in impls.items()}
        for name, out in outputs.items():  # the same numbers, or the timing means nothing
            torch.testing.assert_close(out, outputs["torch"], atol=1e-4, rtol=1e-4, msg=f"{name} differs from torch")
        if names is None:
            names = list(impls) + ["floor"]
            print(f"{'batch x n x d / heads':>22} {'torch (ms)':>11} " + " ".join(f"{k:>14}" for k in names[1:]))
        parts = [same_products(batch, n, d, device), sdpa_alone(batch, n, d, heads, ~pad)]
        times = interleaved_medians([step(fn, x, lens, pad) for fn in impls.values()] + parts, device,
                                    repeats=repeats, warmup=3)
        times = times[:len(impls)] + [sum(times[len(impls):])]  # the floor: products + kernel
        ratios = " ".join(f"{t / times[0]:14.2f}" for t in times[1:])
        print(f"{f'{batch} x {n} x {d} / {heads}':>22} {times[0] * 1e3:11.2f} {ratios}")
        results.append({"batch": batch, "n": n, "d": d, "heads": heads, "torch_ms": times[0] * 1e3,
                        "ratio": {name: t / times[0] for name, t in zip(names[1:], times[1:])}})
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="cpu, cuda or mps (default: the best available)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="one tiny size and 2 repeats: checks that it runs")
    parser.add_argument("--out", default=None, help="write the results as JSON to this file")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device) if args.device else get_device()
    print(f"multi-head self-attention, forward + backward, on {device} ({torch.get_num_threads()} CPU threads), "
          f"torch {torch.__version__}; ratios are time / torch's time (need_weights=False)")
    repeats = 2 if args.quick else args.repeats
    results = run(device, QUICK_SIZES if args.quick else SIZES, repeats)
    if args.out:
        write_record(args.out, {"benchmark": "multihead", **environment(device), "repeats": repeats,
                                "results": results})


if __name__ == "__main__":
    main()
