"""Multi-head self-attention, forward + backward: ours against torch.nn.MultiheadAttention and d2l's.

For each size (batch, sequence length n, width d, heads h), with a padding mask (random valid
lengths), every implementation gets the same weights and inputs and is timed in the same run,
interleaved, so all see the same machine load. Printed: the median time of torch's module with
``need_weights=False`` (its fast path) and every implementation's time divided by it (below 1 =
faster than torch). Implementations:

* ``ours`` — ``MultiHeadAttention`` as the course uses it (fused ``scaled_dot_product_attention``);
* ``ours explicit`` — the same with ``fused=False`` (scores, masked softmax, weighted sum);
* ``torch weights`` — torch's module with ``need_weights=True`` (its default);
* ``d2l`` — d2l's ``MultiHeadAttention`` (when d2l is installed).

    python benchmarks/bench_multihead.py [--device cpu|cuda] [--threads N] [--repeats 20]
        [--out benchmarks/results/multihead_cuda.json]

``--out`` stores the times and ratios as JSON with the device's name.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))

from timing import interleaved_medians, write_record  # noqa: E402
from torch_reference import copy_into_torch_attention  # noqa: E402

from attn_utils import MultiHeadAttention, get_device  # noqa: E402
from attn_utils.measure import environment  # noqa: E402

SIZES = [(32, 32, 256, 4), (32, 64, 256, 8), (16, 128, 256, 8), (8, 256, 512, 8)]


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
    return impls


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
            names = list(impls)
            print(f"{'batch x n x d / heads':>22} {'torch (ms)':>11} " + " ".join(f"{k:>14}" for k in names[1:]))
        times = interleaved_medians([step(fn, x, lens, pad) for fn in impls.values()], device, repeats=repeats,
                                    warmup=3)
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
    parser.add_argument("--out", default=None, help="write the results as JSON to this file")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device) if args.device else get_device()
    print(f"multi-head self-attention, forward + backward, on {device} ({torch.get_num_threads()} CPU threads), "
          f"torch {torch.__version__}; ratios are time / torch's time (need_weights=False)")
    results = run(device, SIZES, args.repeats)
    if args.out:
        write_record(args.out, {"benchmark": "multihead", **environment(device), "repeats": args.repeats,
                                "results": results})


if __name__ == "__main__":
    main()
