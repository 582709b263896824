"""Train chapter 4–6's translators with one budget and store the comparison that chapter 6 shows.

Every model of ``attn_utils.TRANSLATORS`` (no attention, Bahdanau, Luong dot / general / concat /
local-m / local-p) is trained on the Tatoeba English–French data (the bundled corpus when it is
unavailable) with the same step budget, batch, learning rate and seed, and on the bundled grammar
corpus, whose gold alignments give the alignment error rate. Times are seconds of training on this
machine; relative to the no-attention model they mean the same elsewhere.

    .venv/bin/python benchmarks/compare_translators.py                 # about 25 min on 2 CPU cores
    .venv/bin/python benchmarks/compare_translators.py --steps 50 --out quick.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from pathlib import Path

import torch

import attn_utils

RESULTS = Path(__file__).resolve().parent / "results" / "translators_cpu.json"


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}"
    return (f"CPU ({os.cpu_count()} cores, {torch.get_num_threads()} threads, {platform.machine()}), "
            f"torch {torch.__version__}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=800, help="training steps per model on Tatoeba (default 800)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--grammar-steps", type=int, default=300)
    parser.add_argument("--device", default=None, help="cpu, cuda or mps (default: attn_utils.get_device())")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    device = attn_utils.get_device(args.device)

    tatoeba = attn_utils.load_translation_data(num_train=40_000)
    settings = {"tatoeba": dict(embed_size=256, num_hiddens=256, num_layers=2, window=2, lr=5e-3,
                                batch_size=args.batch_size, max_steps=args.steps),
                "grammar": dict(embed_size=32, num_hiddens=64, num_layers=1, window=2, lr=1e-2, batch_size=64,
                                max_steps=args.grammar_steps, warmup=20)}
    _, tatoeba_rows = attn_utils.compare_translators(tatoeba, device=device, progress=False, **settings["tatoeba"])
    print(f"{tatoeba.source}, {args.steps} steps of {args.batch_size} pairs per model:")
    print(attn_utils.format_table(tatoeba_rows))

    grammar = attn_utils.load_translation_data("grammar")
    _, grammar_rows = attn_utils.compare_translators(grammar, device=device, progress=False, **settings["grammar"])
    print(f"grammar corpus, {args.grammar_steps} steps per model:")
    print(attn_utils.format_table(grammar_rows))

    record = {
        "command": "python benchmarks/compare_translators.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "device": describe_device(device),
        "date": datetime.date.today().isoformat(),
        "corpus": tatoeba.summary(),
        "settings": settings,
        "tatoeba": tatoeba_rows,
        "grammar": grammar_rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
