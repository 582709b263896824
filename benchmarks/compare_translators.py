"""Train the translators of chapters 4–6 and 10 on Tatoeba at the book budget, over seeds, and store the comparison.

Every run of ``attn_utils.compare.BOOK_RECIPES`` (no attention, Bahdanau, Luong dot / general / concat /
local-m / local-p and four variants of Luong general, the Transformer) is trained with its book recipe (the
same steps and batch for all, each model's own learning rate and warm-up) for each seed, and scored on the
held-out test set: greedy BLEU with one reference and with all references, each with a bootstrap 95 %
interval, and validation BLEU at evenly spaced points of training (the learning curve, against steps and
seconds). The test set is stratified by English length (``load_translation_data``'s buckets: 1-8, 9-12,
13-16 and 17+ tokens on d2l's full file, 300 test pairs each); every run stores BLEU with its interval in
each bucket, and the runs of the four main models their test translations, so that chapters compare models
bucket by bucket with paired bootstrap resampling (``stored_results.compare_stored``). The attention models
are also trained small on the bundled grammar corpus, whose gold alignments give the alignment error rate of
their attention. ``--sweep`` first trains each model for ``--sweep-steps`` with every learning rate of
``--sweep-lrs`` and records validation BLEU.

Training pairs: a seeded sample of 40,000 of the pairs left after the held-out sets. On d2l's full file all
165,000 of them give vocabularies of 9,900 English and 17,500 French tokens instead of 5,300 and 8,100, and
the output layer that size makes each step 1.7 times as long (Bahdanau, one thread): the book's 3,000 steps
would no longer fit a chapter's 25 minutes.

Runs go to worker processes (``--workers``, each with ``--threads`` threads) and the file is rewritten after
each run; ``--resume`` keeps the runs a file already holds. Chapters 6 and 10 read the file
(``attn_utils.stored_results``).

    ATTN_UTILS_DATA=<folder of d2l's full fra.txt> \
        .venv/bin/python benchmarks/compare_translators.py --sweep --workers 2 --threads 1   # hours on 2 CPU cores
    .venv/bin/python benchmarks/compare_translators.py --steps 20 --models Bahdanau --seeds 0 --out quick.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

import torch

import attn_utils
from attn_utils.compare import (
    BOOK_BATCH,
    BOOK_RECIPES,
    BOOK_STEPS,
    GRAMMAR_SETTINGS,
    book_settings,
    grammar_settings,
    train_and_score,
)
from attn_utils.stored_results import check_translator_results, format_summary, summarize_runs

RESULTS = Path(__file__).resolve().parent / "results" / "translators_cpu.json"
SECTIONS = ("sweep", "runs", "grammar_runs")  # the record's lists of runs, each job fills one
#: the models trained with every seed of --seeds, whose test translations are stored ("Bahdanau uniform": the
#: control of chapter 5, Bahdanau's model with uniform weights)
MAIN_MODELS = ("no attention", "Bahdanau", "Bahdanau uniform", "Luong general", "Transformer")
TRAIN_PAIRS = 40_000
EVAL_POINTS = 10
BOOTSTRAP_SAMPLES = 1000


def machine(threads: int, workers: int) -> dict:
    return {"processor": platform.processor() or platform.machine(), "cores": os.cpu_count(),
            "threads_per_run": threads, "runs_at_a_time": workers, "system": platform.system(),
            "python": platform.python_version()}


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                              cwd=Path(__file__).resolve().parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _tatoeba():
    return attn_utils.load_translation_data("tatoeba", num_train=TRAIN_PAIRS, verbose=False)


def run_job(job: dict) -> dict:
    """One training run in a worker: ``job`` names the section of the record it fills (``sweep``, ``runs`` on
    Tatoeba, ``grammar_runs``), the model, the seed and the budget."""
    torch.set_num_threads(job["threads"])
    device = attn_utils.get_device(job["device"])
    name, seed = job["model"], job["seed"]
    if job["section"] == "grammar_runs":
        data = attn_utils.load_translation_data("grammar", verbose=False)
        # the recipe's design (depth, window, scaled scores...) at the grammar sizes
        _, row = train_and_score(name, data, seed=seed, device=device, progress=False, **grammar_settings(name))
        return {"section": "grammar_runs", "model": name, "seed": seed, "bleu": row["bleu"], "aer": row["aer"]}
    data = _tatoeba()
    settings = book_settings(name, job["steps"])
    if job["section"] == "sweep":
        settings.update(lr=job["lr"])
        _, row = train_and_score(name, data, seed=seed, device=device, progress=False, eval_points=0, split="val",
                                 **settings)
        return {"section": "sweep", "model": name, "seed": seed, "lr": job["lr"], "warmup": settings["warmup"],
                "steps": row["steps"], "val_bleu": row["bleu"], "train_seconds": row["train_seconds"]}
    _, row = train_and_score(name, data, seed=seed, device=device, progress=False, eval_points=EVAL_POINTS,
                             num_samples=BOOTSTRAP_SAMPLES, keep_hypotheses=name in MAIN_MODELS, **settings)
    row["section"] = "runs"
    return row


def data_record(data, train_pairs: int) -> dict:
    """The ``corpus`` and ``test_set`` entries of a stored record: what the runs read and were scored on."""
    return {
        "corpus": {"summary": data.summary(), "pairs_in_file": len(data.corpus),
                   "longest_english_tokens": max(len(s) for s in data.corpus.src), "train_pairs": train_pairs,
                   "buckets": [list(b) for b in data.split.buckets]},
        "test_set": {"references": [" ".join(t) for t in data.test.tgt], "lengths": [len(s) for s in data.test.src]},
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(BOOK_RECIPES), choices=list(BOOK_RECIPES))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2],
                        help="seeds of the MAIN_MODELS (default 0 1 2)")
    parser.add_argument("--other-seeds", nargs="+", type=int, default=[0],
                        help="seeds of the other Luong variants (default 0)")
    parser.add_argument("--steps", type=int, default=BOOK_STEPS, help=f"training steps (default {BOOK_STEPS})")
    parser.add_argument("--sweep", action="store_true", help="first run the learning-rate sweep")
    parser.add_argument("--sweep-only", action="store_true", help="run the sweep and nothing else")
    parser.add_argument("--sweep-lrs", nargs="+", type=float, default=[1e-3, 2e-3, 5e-3, 1e-2, 2e-2])
    parser.add_argument("--sweep-steps", type=int, default=600)
    parser.add_argument("--workers", type=int, default=1, help="runs at a time (default 1)")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch threads per run")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or mps (default cpu)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--resume", action="store_true", help="keep the runs already in --out")
    args = parser.parse_args(argv)

    data = _tatoeba()
    record = {
        "commands": ["python benchmarks/compare_translators.py "
                     + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))],
        "commit": commit(), "machine": machine(args.threads, args.workers), "torch": torch.__version__,
        "device": args.device, "date": datetime.date.today().isoformat(),
        **data_record(data, TRAIN_PAIRS),
        "budget": {"steps": args.steps, "batch_size": BOOK_BATCH,
                   "eval_points": EVAL_POINTS, "bootstrap_samples": BOOTSTRAP_SAMPLES},
        "recipes": {name: BOOK_RECIPES[name]._asdict() for name in args.models},
        "grammar_settings": GRAMMAR_SETTINGS, "sweep": [], "runs": [], "grammar_runs": [],
    }
    done = set()
    if args.resume and args.out.exists():
        old = json.loads(args.out.read_text(encoding="utf-8"))
        record.update({section: old[section] for section in SECTIONS if section in old})
        record["commands"] = old.get("commands", []) + record["commands"]
        record["recipes"] = {**old.get("recipes", {}), **record["recipes"]}  # the file keeps every model it holds
        if "notes" in old:
            record["notes"] = old["notes"]
        earlier = old.get("earlier_commits", []) + [old["commit"]]  # the runs kept were made at these commits
        record["earlier_commits"] = [c for c in dict.fromkeys(earlier) if c != record["commit"]]
        done = {(section, r["model"], r["seed"], r.get("lr")) for section in SECTIONS for r in record[section]}

    jobs = []
    common = {"threads": args.threads, "device": args.device, "steps": args.steps}
    if args.sweep or args.sweep_only:
        jobs += [{**common, "section": "sweep", "model": name, "seed": 0, "lr": lr, "steps": args.sweep_steps}
                 for name in args.models for lr in args.sweep_lrs]
    models = [] if args.sweep_only else args.models
    jobs += [{**common, "section": "grammar_runs", "model": name, "seed": seed, "lr": None}  # minutes in all: first
             for seed in args.seeds for name in models
             if attn_utils.TRANSLATORS[BOOK_RECIPES[name].translator].kind not in ("seq2seq", "transformer")]
    # seed by seed, so that an interrupted run (see --resume) leaves every model with as many seeds
    for seed in sorted(set(args.seeds) | set(args.other_seeds)):
        jobs += [{**common, "section": "runs", "model": name, "seed": seed, "lr": None} for name in models
                 if seed in (args.seeds if name in MAIN_MODELS else args.other_seeds)]
    jobs = [job for job in jobs if (job["section"], job["model"], job["seed"], job["lr"]) not in done]
    print(f"{len(jobs)} runs on {args.workers} worker(s) of {args.threads} thread(s); {data.summary()}", flush=True)

    def store(result: dict) -> None:
        section = result.pop("section")
        record[section].append(result)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        shown = {k: (float(f"{v:.4g}") if isinstance(v, float) else v) for k, v in result.items()
                 if k not in ("curve", "hypotheses", "by_length")}
        print(section, shown, flush=True)

    if args.workers == 1:
        for job in jobs:
            store(run_job(job))
    else:
        with multiprocessing.get_context("spawn").Pool(args.workers, maxtasksperchild=1) as pool:
            for result in pool.imap_unordered(run_job, jobs):
                store(result)
    if record["runs"]:
        check_translator_results(record, str(args.out))
        print(format_summary(summarize_runs(record)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
