"""Decoding with shared key/value heads and with a sliding window, against the context length.

Four decoders of the same shape and weights where they share them (``CausalLanguageModel``, rotary
positions): 8 key/value heads (multi-head attention, the reference), 2 (grouped-query), 1
(multi-query), and 8 with a sliding window of 256 positions and its rolling cache. For each context
length n each gets a cache of n positions (of the window's last 256 for the windowed one) and
decodes 16 tokens after it, one at a time; the runs are interleaved and the median of ``--repeats``
is kept. Printed per length: milliseconds per token, each as a ratio to the reference's time in the
same repeat set, and the cache's size (measured from its tensors, checked against ``kv_cache_bytes``).
Then one forward pass over n tokens (reading a prompt) with and without the window: the window is a
mask, so it saves nothing there.

    python benchmarks/bench_modern_attention.py [--device cpu|cuda] [--contexts 256 1024 ...]
        [--out benchmarks/results/modern_attention_cpu.json]

With ``--extrapolation`` it trains instead of timing: section 11.3's length-extrapolation test, the
previous-token task (``trainers.train_previous_token_lm``: 64 sequences of 64 random tokens of 64 types
per step, the target the token one position earlier) with the section's model (width 32), for each position
scheme, each number of blocks (``--copy-blocks``) and heads (``--copy-heads``) and each seed, the section's
seeds and budget; every model is scored (``evaluate.previous_token_accuracy``) on the section's 500 test sequences
of 64, 128, 256 and 512 tokens. Printed and stored: the accuracy per seed, and mean (range) over the seeds.

    python benchmarks/bench_modern_attention.py --extrapolation [--copy-blocks 1 2] [--copy-heads 4 8]
        [--schemes alibi ...] [--seeds 0 1 2] [--threads 1] [--save-models FOLDER]
        [--out benchmarks/results/modern_attention_extrapolation.json]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from timing import write_record

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attn_utils import (  # noqa: E402
    CausalLanguageModel,
    environment,
    get_device,
    interleaved_medians,
    kv_cache_bytes,
    set_seed,
)
from attn_utils.evaluate import previous_token_accuracy  # noqa: E402
from attn_utils.metrics import spread  # noqa: E402
from attn_utils.sampling import decode_steps, filled_cache  # noqa: E402
from attn_utils.trainers import train_previous_token_lm  # noqa: E402

STEPS = 16
SCHEMES = ("learned", "sinusoidal", "rotary", "alibi")
COPY_VOCAB, TRAIN_LENGTH, TEST_LENGTHS = 64, 64, (64, 128, 256, 512)  # section 11.3's task


def previous_token_model(scheme: str, blocks: int, heads: int, seed: int, steps: int, device):
    """Section 11.3's model for the previous-token task (width 32), trained from ``seed``: ``(model, history)``."""
    set_seed(seed)
    model = CausalLanguageModel(COPY_VOCAB, num_hiddens=32, ffn_num_hiddens=128, num_heads=heads, num_blks=blocks,
                                max_len=max(TEST_LENGTHS), position_scheme=scheme).to(device)
    history = train_previous_token_lm(model, max_steps=steps, seed=seed, vocab_size=COPY_VOCAB, length=TRAIN_LENGTH)
    return model, history


def extrapolation(args, device) -> dict:
    """{blocks: {heads: {scheme: {test length: [accuracy per seed]}}}}, printed as it goes."""
    test_sets = {n: torch.randint(COPY_VOCAB, (args.test_sequences, n), generator=torch.Generator().manual_seed(n))
                 for n in TEST_LENGTHS}  # the section's test sequences
    accuracy = {}
    for blocks in args.copy_blocks:
        accuracy[blocks] = {}
        for heads in args.copy_heads:
            accuracy[blocks][heads] = {}
            for scheme in args.schemes:
                cell = accuracy[blocks][heads][scheme] = {n: [] for n in TEST_LENGTHS}
                for seed in args.seeds:
                    model, history = previous_token_model(scheme, blocks, heads, seed, args.copy_steps, device)
                    for n, tokens in test_sets.items():
                        cell[n].append(previous_token_accuracy(model, tokens))
                    print(f"  {blocks} blocks, {heads} heads, {scheme}, seed {seed} ({history.train_seconds:.0f} s): "
                          + ", ".join(f"{cell[n][-1]:.4f} at {n}" for n in TEST_LENGTHS), flush=True)
                    if args.save_models and seed == args.seeds[0]:  # the first seed's, to draw its attention
                        folder = Path(args.save_models)
                        folder.mkdir(parents=True, exist_ok=True)
                        torch.save(model.state_dict(), folder / f"{scheme}_{blocks}blocks_{heads}heads.pt")
    print(f"\nprevious-token accuracy, trained on {TRAIN_LENGTH} tokens: mean (lowest-highest) over seeds {args.seeds}")
    for blocks, by_heads in accuracy.items():
        for heads, schemes in by_heads.items():
            print(f"{f'{blocks} blocks, {heads} heads':<20}" + "".join(f"{f'n = {n}':>22}" for n in TEST_LENGTHS))
            for scheme, by_length in schemes.items():
                print(f"  {scheme:<18}" + "".join(f"{format(spread(v), '.3f'):>22}" for v in by_length.values()))
    return accuracy


def decoders(vocab: int, hiddens: int, heads: int, blocks: int, window: int, device) -> dict:
    built = {}
    for name, options in [("8 kv heads (MHA)", dict(num_kv_heads=heads)), ("2 kv heads (GQA)", dict(num_kv_heads=2)),
                          ("1 kv head (MQA)", dict(num_kv_heads=1)), (f"window {window}", dict(window=window))]:
        torch.manual_seed(0)
        built[name] = CausalLanguageModel(vocab, hiddens, 4 * hiddens, heads, blocks, position_scheme="rotary",
                                          **options).to(device).eval()
    return built


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--contexts", type=int, nargs="+", default=[256, 1024, 4096, 8192])
    parser.add_argument("--prefill", type=int, nargs="+", default=[512, 1024, 2048])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--vocab", type=int, default=1808)
    parser.add_argument("--hiddens", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument("--window", type=int, default=256)
    parser.add_argument("--extrapolation", action="store_true", help="train the previous-token models instead")
    parser.add_argument("--copy-blocks", type=int, nargs="+", default=[2])
    parser.add_argument("--copy-heads", type=int, nargs="+", default=[4])
    parser.add_argument("--schemes", nargs="+", default=list(SCHEMES), choices=SCHEMES)
    parser.add_argument("--save-models", default=None, help="a folder for the first seed's models")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--copy-steps", type=int, default=1000)
    parser.add_argument("--test-sequences", type=int, default=500)
    parser.add_argument("--quick", action="store_true", help="with --extrapolation: a few steps, to check it runs")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device) if args.device else get_device()
    if args.extrapolation:
        if args.quick:
            args.copy_steps, args.seeds, args.test_sequences = 3, [0], 4
        print(f"section 11.3's previous-token task on {device}: {args.copy_steps} steps per model")
        accuracy = extrapolation(args, device)
        if args.out:
            write_record(args.out, {"benchmark": "modern_attention_extrapolation", **environment(device),
                                    "seeds": args.seeds, "copy_steps": args.copy_steps,
                                    "test_sequences": args.test_sequences, "accuracy": accuracy,
                                    "command": "python benchmarks/bench_modern_attention.py " + " ".join(sys.argv[1:])})
        return
    models = decoders(args.vocab, args.hiddens, args.heads, args.blocks, args.window, device)
    names = list(models)
    head_dim = args.hiddens // args.heads
    print(f"decoding {STEPS} tokens after a cache of n positions; {args.blocks} blocks, width {args.hiddens}, "
          f"{args.heads} query heads; {environment(device)}")
    print(f"{'n':>6} " + " ".join(f"{name + ' ms/token (ratio)':>30}" for name in names))
    decoding = []
    for n in args.contexts:
        caches = {name: filled_cache(model, n) for name, model in models.items()}
        for name, cache in caches.items():
            measured = cache.nbytes
            expected = kv_cache_bytes(args.blocks, models[name].num_kv_heads, cache.keys.shape[3], head_dim)
            if measured != expected:
                raise RuntimeError(f"{name}: the cache holds {measured} bytes, the formula says {expected}")
        runs = [lambda name=name, caches=caches: decode_steps(models[name], caches[name], STEPS) for name in names]
        times = interleaved_medians(runs, device, repeats=args.repeats, warmup=1)
        row = {"n": n}
        for name, seconds in zip(names, times):
            row[name] = {"ms_per_token": 1e3 * seconds / STEPS, "ratio_to_mha": seconds / times[0],
                         "cache_mib": caches[name].nbytes / 2**20}
        decoding.append(row)
        print(f"{n:>6} " + " ".join(f"{row[name]['ms_per_token']:>20.2f} ({row[name]['ratio_to_mha']:.2f})"
                                    for name in names))
    print(f"\none forward pass over n tokens (a prompt), ms: {names[0]} against {names[-1]}")
    prefill = []
    full, windowed = models[names[0]], models[names[-1]]
    windowed.load_state_dict(full.state_dict())
    for n in args.prefill:
        prompt = torch.randint(args.vocab, (1, n), device=device)
        with torch.no_grad():
            t_full, t_window = interleaved_medians([lambda p=prompt: full(p), lambda p=prompt: windowed(p)], device,
                                                   repeats=args.repeats, warmup=1)
        prefill.append({"n": n, "full_ms": 1e3 * t_full, "window_ms": 1e3 * t_window, "ratio": t_window / t_full})
        print(f"{n:>6} full {1e3 * t_full:9.1f}   window {1e3 * t_window:9.1f}   ratio {t_window / t_full:.2f}")
    if args.out:
        record = {"benchmark": "modern_attention", **environment(device), "steps": STEPS,
                  "config": {k: getattr(args, k) for k in ("vocab", "hiddens", "heads", "blocks", "window", "repeats")},
                  "decoding": decoding, "prefill": prefill,
                  "command": "python benchmarks/bench_modern_attention.py " + " ".join(sys.argv[1:])}
        write_record(args.out, record)


if __name__ == "__main__":
    main()
