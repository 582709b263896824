"""Section 11.1's GPT scored with shorter windows than it was trained on (exercise ch11-perplexity-and-length).

The section scores held-out text in windows of 128 tokens overlapping by half (``evaluate.text_nats``), so
that every test token is predicted from at least 64 tokens before it. This script trains the section's
GPT-style model (``lm_choices.train_causal``: rotary positions, the section's sizes, recipe and budget;
the same model, bit for bit, as the section's for each seed) and scores the test chapters again in
windows of 8, 16, 32, 64 and 128 tokens (``text_nats(model, test, window)``, stride window / 2: every
token predicted from at least window / 2 tokens), in bits per character, against the section's
baseline, the modified Kneser-Ney 5-gram model on subwords (the same counts as the section's).

Printed per window: the GPT's bits per character, mean (range) over the seeds, and its difference from
the 5-gram model's, seed by seed. ``--out`` stores every number.

    python benchmarks/lm_windows.py [--seeds 0 1 2] [--lm-steps 900] [--windows 8 16 32 64 128]
        [--threads 1] [--out benchmarks/results/lm_windows_cpu.json]

About 12 minutes on two CPU cores at the section's budget (``--quick``: seconds, to check it runs).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from lm_choices import FIRST_TOKEN, VOCAB_SIZE, train_causal  # noqa: E402
from timing import write_record  # noqa: E402

from attn_utils import environment, get_device  # noqa: E402
from attn_utils.data.subwords import bits_per_character, load_subword_text  # noqa: E402
from attn_utils.evaluate import text_nats  # noqa: E402
from attn_utils.metrics import spread  # noqa: E402
from attn_utils.ngram import KneserNeyLM  # noqa: E402

NGRAM_ORDER = 5  # the section's baseline, the best order on its validation chapters


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--lm-steps", type=int, default=900)
    parser.add_argument("--windows", type=int, nargs="+", default=[8, 16, 32, 64, 128])
    parser.add_argument("--chapters", type=int, default=None, help="score only the first test chapters")
    parser.add_argument("--quick", action="store_true", help="a few steps, one seed, to check that it runs")
    parser.add_argument("--device", default=None)
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (the same numbers with 1 or 2)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.quick:
        args.seeds, args.lm_steps, args.chapters, args.windows = [0], 3, 1, [8, 16]
    device = torch.device(args.device) if args.device else get_device()
    data = load_subword_text(VOCAB_SIZE)
    test = data.test[:args.chapters]
    characters = sum(len(text) for text in data.texts["test"][:args.chapters])
    ngram = KneserNeyLM(NGRAM_ORDER, range(FIRST_TOKEN, data.vocab_size), modified=True)
    ngram.fit([t[1:].tolist() for t in data.train])  # without the leading <bos>, as in the section
    ngram_nats = -sum(lp for t in test for lp in ngram.sequence_logprobs(t[1:].tolist()))
    ngram_bits = bits_per_character(ngram_nats, characters)
    print(f"section 11.1's GPT on {device}, seeds {args.seeds}, {args.lm_steps} steps each; Kneser-Ney "
          f"{NGRAM_ORDER}-gram: {ngram_bits:.3f} test bits per character", flush=True)
    runs = []
    for seed in args.seeds:
        model, history = train_causal(data, "rotary", seed, args.lm_steps, device)
        bits = {w: bits_per_character(text_nats(model, [t.to(device) for t in test], w)[0], characters)
                for w in args.windows}
        runs.append({"seed": seed, "test_bits_per_character": {str(w): b for w, b in bits.items()},
                     "seconds": history.train_seconds})
        print(f"  seed {seed} ({history.train_seconds:.0f} s): "
              + ", ".join(f"{b:.4f} at {w}" for w, b in bits.items()), flush=True)
    print(f"\ntest bits per character by window (each token predicted from at least window / 2 tokens), "
          f"mean (range) over {len(args.seeds)} seeds; GPT minus {NGRAM_ORDER}-gram")
    for w in args.windows:
        bits = [r["test_bits_per_character"][str(w)] for r in runs]
        print(f"  window {w:>4}: GPT {spread(bits):.3f}   difference {spread([b - ngram_bits for b in bits]):+.3f}")
    if args.out:
        write_record(args.out, {"benchmark": "lm_windows", **environment(device), "seeds": args.seeds,
                                "lm_steps": args.lm_steps, "windows": args.windows,
                                "ngram_order": NGRAM_ORDER, "ngram_test_bits_per_character": ngram_bits,
                                "command": " ".join(["python benchmarks/lm_windows.py"] + sys.argv[1:]),
                                "runs": runs})


if __name__ == "__main__":
    main()
