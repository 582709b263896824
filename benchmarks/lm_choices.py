"""What section 11.1's model choices buy: its two language models retrained with one choice changed, 3 seeds.

Section 11.1 trains a GPT-style model and a BERT-style model on *Moby-Dick* in byte-level BPE subwords
(2,048 tokens), both with rotary positions, the masked one with a mask rate of 0.4. This script
retrains them with the section's own recipes (``trainers.train_causal_text_lm`` and
``train_masked_text_lm``), sizes and budget, changing one thing at a time:

* the causal model with rotary positions (the section's) and with GPT-2's learned positions:
  test bits per character over all the test chapters (``evaluate.text_nats``, windows of 128);
* the masked model with rotary positions and mask rate 0.4 (the section's), with BERT's learned
  positions, and with BERT's mask rate 0.15: accuracy and bits per gap at the section's 2,000 test
  gaps (``evaluate.draw_gaps`` with seed 5, ``fill_gaps``).

Each variant trains once per seed; a seed fixes the windows and masks drawn (the same for every
variant) and the initial weights. Printed per variant: the mean over the seeds with the range, and the
difference from the section's choice seed by seed (mean and range). ``--out`` stores every number.

    python benchmarks/lm_choices.py [--seeds 0 1 2] [--lm-steps 900] [--mlm-steps 700]
        [--out benchmarks/results/lm_choices_cpu.json]

About 40 minutes on two CPU cores at the section's budget (``--quick``: seconds, to check it runs).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import write_record  # noqa: E402

from attn_utils import CausalLanguageModel, MaskedLanguageModel, environment, get_device, set_seed  # noqa: E402
from attn_utils.data.subwords import bits_per_character, load_subword_text  # noqa: E402
from attn_utils.evaluate import draw_gaps, fill_gaps, text_nats  # noqa: E402
from attn_utils.stored_results import format_variants  # noqa: E402
from attn_utils.trainers import train_causal_text_lm, train_masked_text_lm  # noqa: E402

SIZES = dict(num_hiddens=128, ffn_num_hiddens=512, num_heads=4, num_blks=2, dropout=0.0)  # section 11.1's
VOCAB_SIZE, CONTEXT, GAP_SEED = 2048, 128, 5
CAUSAL_VARIANTS = {"rotary positions (section 11.1)": "rotary", "learned positions (GPT-2)": "learned"}
MASKED_VARIANTS = {"rotary, mask rate 0.4 (section 11.1)": ("rotary", 0.4),
                   "learned positions (BERT), mask rate 0.4": ("learned", 0.4),
                   "rotary, mask rate 0.15 (BERT)": ("rotary", 0.15)}
FIRST_TOKEN = 3  # ids below it are <pad>, <bos> and <mask>


def train_causal(data, scheme: str, seed: int, steps: int, device):
    """Section 11.1's GPT-style model with ``position_scheme=scheme``, trained by its recipe for ``steps``
    steps from ``seed``: ``(model, history)``."""
    set_seed(seed)
    model = CausalLanguageModel(data.vocab_size, position_scheme=scheme, **SIZES).to(device)
    history = train_causal_text_lm(model, torch.cat(data.train), context=CONTEXT, max_steps=steps, seed=seed,
                                   pad=data.pad)
    return model, history


def causal_runs(data, seeds, steps, test, characters, device) -> dict:
    """{variant: [{"seed", "test_bits_per_character", "seconds"}, ...]} for the causal model."""
    runs = {}
    for name, scheme in CAUSAL_VARIANTS.items():
        runs[name] = []
        for seed in seeds:
            model, history = train_causal(data, scheme, seed, steps, device)
            nats, _ = text_nats(model, [t.to(device) for t in test], CONTEXT)
            runs[name].append({"seed": seed, "test_bits_per_character": bits_per_character(nats, characters),
                               "seconds": history.train_seconds})
            print(f"  {name}, seed {seed}: {runs[name][-1]['test_bits_per_character']:.4f} bits per character, "
                  f"{history.train_seconds:.0f} s", flush=True)
    return runs


def masked_runs(data, seeds, steps, test, gaps, device) -> dict:
    """{variant: [{"seed", "gap_accuracy", "bits_per_gap", "seconds"}, ...]} for the masked model."""
    stream = torch.cat(data.train)
    answers = torch.tensor([int(test[c][p]) for c, p in gaps])
    runs = {}
    for name, (scheme, rate) in MASKED_VARIANTS.items():
        runs[name] = []
        for seed in seeds:
            set_seed(seed)
            model = MaskedLanguageModel(data.vocab_size, position_scheme=scheme, **SIZES).to(device)
            history = train_masked_text_lm(model, stream, context=CONTEXT, max_steps=steps, seed=seed,
                                           mask_id=data.mask, vocab_size=data.vocab_size, first_token=FIRST_TOKEN,
                                           keep=[data.bos], mask_rate=rate)
            guesses, logprobs = fill_gaps(model, test, gaps, CONTEXT, data.mask, [data.pad, data.bos, data.mask])
            runs[name].append({"seed": seed, "gap_accuracy": (guesses == answers).float().mean().item(),
                               "bits_per_gap": -logprobs.mean().item() / math.log(2),
                               "seconds": history.train_seconds})
            print(f"  {name}, seed {seed}: accuracy {runs[name][-1]['gap_accuracy']:.3f}, "
                  f"{runs[name][-1]['bits_per_gap']:.2f} bits per gap, {history.train_seconds:.0f} s", flush=True)
    return runs


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--lm-steps", type=int, default=900)
    parser.add_argument("--mlm-steps", type=int, default=700)
    parser.add_argument("--gaps", type=int, default=2000)
    parser.add_argument("--chapters", type=int, default=None, help="score only the first test chapters")
    parser.add_argument("--quick", action="store_true", help="a few steps, one seed, to check that it runs")
    parser.add_argument("--device", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.lm_steps, args.mlm_steps, args.gaps, args.chapters = [0], 3, 3, 20, 1
    device = torch.device(args.device) if args.device else get_device()
    data = load_subword_text(VOCAB_SIZE)
    test = data.test[:args.chapters]
    characters = sum(len(text) for text in data.texts["test"][:args.chapters])
    gaps = draw_gaps(test, args.gaps, GAP_SEED)
    print(f"section 11.1's models on {device}, seeds {args.seeds}: causal {args.lm_steps} steps, masked "
          f"{args.mlm_steps} steps")
    causal = causal_runs(data, args.seeds, args.lm_steps, test, characters, device)
    masked = masked_runs(data, args.seeds, args.mlm_steps, test, gaps, device)
    print("\ncausal model, test bits per character (lower is better), mean (range) over the seeds")
    print(format_variants(causal, "test_bits_per_character", 3))
    print(f"masked model, {len(gaps):,} test gaps: accuracy (higher is better)")
    print(format_variants(masked, "gap_accuracy", 3))
    print("masked model: bits per gap (lower is better)")
    print(format_variants(masked, "bits_per_gap", 2))
    if args.out:
        write_record(args.out, {"benchmark": "lm_choices", **environment(device), "seeds": args.seeds,
                                "lm_steps": args.lm_steps, "mlm_steps": args.mlm_steps, "gaps": len(gaps),
                                "command": " ".join(["python benchmarks/lm_choices.py"] + sys.argv[1:]),
                                "causal": causal, "masked": masked})


if __name__ == "__main__":
    main()
