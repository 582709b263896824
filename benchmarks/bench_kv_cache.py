"""Generation with and without the key-value cache, against the number of generated tokens.

An untrained ``CausalLanguageModel`` (so nothing stops at ``<eos>``) generates greedily from a
one-token prompt, once feeding one token at a time to its key-value cache and once re-running the
whole sequence at every step; both are checked to write the same tokens (``attn_utils.time_generation``).
Printed per length: total seconds, milliseconds per generated token, the speed-up (uncached time /
cached time) and the cache's memory. ``--out`` stores the results as JSON with the device's name,
the torch version and the date, for the chapter to show.

    python benchmarks/bench_kv_cache.py [--device cpu|cuda] [--out benchmarks/results/kv_cache_cuda.json]
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

import torch
from timing import write_record

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attn_utils import CausalLanguageModel, get_device, time_generation  # noqa: E402

LENGTHS = [32, 64, 128, 256, 512]


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "mps":
        return "Apple MPS"
    return f"CPU ({torch.get_num_threads()} threads)"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="cpu, cuda or mps (default: the best available)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--lengths", type=int, nargs="+", default=LENGTHS)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--vocab", type=int, default=4800, help="vocabulary size (chapter 11.1's is about 4,800)")
    parser.add_argument("--hiddens", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--out", default=None, help="write the results as JSON to this file")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device) if args.device else get_device()
    torch.manual_seed(0)
    model = CausalLanguageModel(args.vocab, args.hiddens, 4 * args.hiddens, args.heads, args.blocks,
                                max_len=max(args.lengths) + 8).to(device)
    print(f"key-value cache, greedy generation on {device_name(device)}, torch {torch.__version__}; model: "
          f"{args.blocks} blocks, d {args.hiddens}, {args.heads} heads, vocabulary {args.vocab}, batch {args.batch}")
    print(f"{'tokens':>6} {'cached (s)':>11} {'uncached (s)':>13} {'ms/token cached':>16} {'uncached':>9} "
          f"{'speed-up':>9} {'cache (KiB)':>12}")
    results = time_generation(model, args.lengths, batch=args.batch, repeats=args.repeats)
    for r in results:
        print(f"{r['length']:6d} {r['cached_s']:11.3f} {r['uncached_s']:13.3f} {r['cached_ms_per_token']:16.2f} "
              f"{r['uncached_ms_per_token']:9.2f} {r['speedup']:8.1f}x {r['cache_bytes'] / 1024:12.0f}")
    if args.out:
        record = {"benchmark": "kv_cache", "device_type": device.type, "device_name": device_name(device),
                  "torch_version": torch.__version__, "date": datetime.date.today().isoformat(),
                  "config": {k: getattr(args, k) for k in ("vocab", "hiddens", "heads", "blocks", "batch", "repeats")},
                  "results": results}
        write_record(args.out, record)


if __name__ == "__main__":
    main()
