"""Chapter 4's exercises measured: reversed sources, the context in the initial state only, and length normalisation.

Chapter 4's model (the "no attention" book recipe, ``attn_utils.BOOK_RECIPES``, trained by ``train_recipe``
on the chapter's data: 40,000 pairs of d2l's Tatoeba file and its length-stratified test set) is trained from
each seed of ``--seeds`` three ways, each from the same initial weights and on the same batches:

* ``reference``: the chapter's model itself, run for run the stored comparison's run of the same seed
  (``benchmarks/compare_translators.py``: the same recipe, data, seed and budget; bit for bit with the same
  number of threads, ``--threads 1`` as stored). The script checks this against
  ``results/translators_cpu.json`` and stores what it finds (``stored_comparison``, and ``stored`` in each
  reference run: the stored BLEU and the share of identical test translations);
* ``reversed source``: every English sentence reversed, Sutskever et al.'s (2014) trick. The corpus is
  reversed before anything is built from it, so every split, array and batch has it, with ``<eos>`` after the
  reversed words and the padding after it as before; the targets are unchanged. The test set, its buckets and
  the batches of every step are the same pairs as the reference's (the same splits, vocabularies and lengths);
* ``initial state only``: the decoder gets the encoder's summary only as its initial state (Sutskever et al.),
  not also concatenated to its input at every step (Cho et al. 2014, d2l's and the chapter's decoder). The
  model is the chapter's, with the same parameters and initial weights; its decoder reads a zero vector where
  the chapter's reads the summary, so those input weights neither act nor learn.

The reference is also decoded with beam search (``BEAM_SIZE`` beams, the chapter's) at each length-normalisation
exponent of ``ALPHAS`` (``attn_utils.decoding.beam_search``: the finished beam with the highest
``log P / L**alpha`` wins). Each run (``runs``, a variant and a seed) stores test BLEU with one reference and
with all references, each with a bootstrap 95 % interval, BLEU with its interval in each English length bucket,
the test translations and the output length relative to the references; ``paired`` holds each variant against
the reference by paired bootstrap resampling over the whole test set and in each bucket
(``attn_utils.stored_results.compare_stored``, over the seeds both hold, and seed by seed where there are
several). The file has the stored comparison's layout (``runs`` by model name, ``test_set``, ``corpus``), so
``attn_utils.stored_results`` reads it: ``summarize_runs``, ``summarize_by_length``, ``compare_stored``.

Runs go to worker processes (``--workers``, each with ``--threads`` threads) and the file is rewritten after
each; ``--resume`` keeps the runs a file already holds (made with the same data and budget). Pass a relative
``--out``: the command is stored as given. At the book budget, three 3,000-step trainings per seed, two side by
side with ``--workers 2 --threads 1``, take an expected 40 minutes on 2 idle CPU cores.

    ATTN_UTILS_DATA=<folder of d2l's full fra.txt> .venv/bin/python benchmarks/seq2seq_exercises.py \\
        --workers 2 --threads 1 --out benchmarks/results/seq2seq_exercises_cpu.json
    ATTN_UTILS_DATA=... .venv/bin/python benchmarks/seq2seq_exercises.py --quick --out quick.json   # seconds
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import multiprocessing
import shlex
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare_translators import BOOTSTRAP_SAMPLES, TRAIN_PAIRS, commit, data_record, machine
from compare_translators import RESULTS as COMPARISON

from attn_utils.compare import BOOK_BATCH, BOOK_RECIPES, BOOK_STEPS, book_settings, recipe_design, train_recipe
from attn_utils.data import load_translation_data
from attn_utils.data.loader import TranslationData
from attn_utils.device import get_device, model_device, set_seed
from attn_utils.evaluate import bleu_report
from attn_utils.registry import build_translator
from attn_utils.seq2seq import EncoderDecoder, Seq2SeqDecoder
from attn_utils.stored_results import (
    check_translator_results,
    compare_stored,
    format_by_length,
    format_summary,
    summarize_by_length,
    summarize_runs,
)
from attn_utils.trainers import train_seq2seq

RESULTS = Path(__file__).resolve().parent / "results" / "seq2seq_exercises_cpu.json"
MODEL = "no attention"  # chapter 4's book recipe
REFERENCE, REVERSED, INITIAL_STATE = "reference", "reversed source", "initial state only"
TRAININGS = (REFERENCE, REVERSED, INITIAL_STATE)  # one training run each, per seed
BEAM_SIZE = 4  # the chapter's beam
ALPHAS = (0.0, 0.7, 1.5)  # length-normalisation exponents of the reference's beam search
#: --quick: a few steps on a small sample of the same file, one seed, few bootstrap samples
QUICK = {"steps": 4, "num_train": 1000, "num_val": 40, "num_test": 80, "bootstrap_samples": 20}


def beam_name(alpha: float) -> str:
    return f"beam {BEAM_SIZE}, alpha {alpha:g}"


VARIANTS = {
    REFERENCE: "chapter 4's model (the 'no attention' book recipe), greedy decoding: the stored comparison's run "
               "of the same seed",
    REVERSED: "the same model trained and tested with every English sentence reversed (Sutskever et al. 2014); "
              "<eos> stays last, the targets are unchanged",
    INITIAL_STATE: "the same model whose decoder gets the encoder's summary only as its initial state, not also "
                   "as an input at every step (it reads zeros there)",
    **{beam_name(alpha): f"the reference decoded with beam search, {BEAM_SIZE} beams, the finished beam of the "
                         f"highest log P / L**{alpha:g} chosen" for alpha in ALPHAS},
}


# ---------------------------------------------------------------------------------------------
# The variants
# ---------------------------------------------------------------------------------------------


def reverse_sources(data: TranslationData) -> TranslationData:
    """``data`` with every source sentence reversed: the same splits, vocabularies and ``num_steps``, so every
    split's pairs, arrays and batches hold the same pairs in the same order, each English sentence written
    backwards (``<eos>`` is appended after the reversed words, the padding after it). Gold alignments, where
    the corpus has them, follow their source words. A sentence given to ``translate`` by hand must be reversed
    by its caller."""
    corpus = data.corpus
    alignments = None if corpus.alignments is None else [
        [(len(src) - 1 - i, j) for i, j in links] for src, links in zip(corpus.src, corpus.alignments)]
    reversed_corpus = dataclasses.replace(corpus, src=[list(reversed(s)) for s in corpus.src], alignments=alignments)
    return TranslationData(data.source, reversed_corpus, data.split, data.src_vocab, data.tgt_vocab, data.num_steps)


class InitialStateDecoder(Seq2SeqDecoder):
    """Chapter 4's decoder with the encoder's summary only in its initial state (Sutskever et al. 2014).

    The chapter's decoder (Cho et al. 2014, d2l's) starts from the encoder's final states and also reads the
    summary, the last layer's final state, concatenated to the target embedding at every step. This one
    starts from the same states, but its state's context entry is zeros: the GRU reads the embedding and zeros,
    so the weights of that part of its input neither act nor get a gradient, and everything the decoder knows
    of the source after its first step is carried by its own hidden state. Same parameters, same initial
    weights, as the chapter's."""

    def init_state(self, enc_all_outputs, *args):
        context, hidden = super().init_state(enc_all_outputs, *args)
        return torch.zeros_like(context), hidden


def with_initial_state_decoder(model: EncoderDecoder) -> EncoderDecoder:
    """``model`` (chapter 4's, with a ``Seq2SeqDecoder``) with its decoder replaced by an ``InitialStateDecoder``
    holding the same weights; the global random state is left as it was."""
    old = model.decoder
    if type(old) is not Seq2SeqDecoder:
        raise ValueError(f"expected a model with chapter 4's Seq2SeqDecoder, got {type(old).__name__}")
    with torch.random.fork_rng(devices=[]):  # the new layers' own initialisation draws numbers: undone
        new = InitialStateDecoder(old.embedding.num_embeddings, old.embedding.embedding_dim, old.rnn.hidden_size,
                                  old.rnn.num_layers, old.rnn.dropout)
    new.load_state_dict(old.state_dict())
    model.decoder = new.to(model_device(model))
    return model


def train_variant(training: str, data: TranslationData, seed: int, steps: int, device, **kwargs):
    """Train one of ``TRAININGS`` from seed ``seed`` for ``steps`` steps: ``(model, history, data)``, ``data``
    being what the model reads (reversed for ``REVERSED``). Every variant starts from the initial weights of
    ``train_recipe(MODEL, data, seed=seed)`` and is trained on the same batches with the same recipe;
    ``kwargs`` go to ``train_seq2seq``."""
    kwargs = {"progress": False, **kwargs}
    if training == REVERSED:
        data = reverse_sources(data)
    elif training == INITIAL_STATE:
        design = recipe_design(MODEL)
        set_seed(seed)  # as build_and_train does, then the recipe's model and training
        model = with_initial_state_decoder(build_translator(design.pop("translator"), data, device=device, **design))
        settings = {k: v for k, v in book_settings(MODEL, steps).items() if k not in recipe_design(MODEL)}
        return model, train_seq2seq(model, data, seed=seed, **{"eval_points": 0, **settings, **kwargs}), data
    elif training != REFERENCE:
        raise ValueError(f"training must be one of {TRAININGS}, got {training!r}")
    return (*train_recipe(MODEL, data, max_steps=steps, seed=seed, device=device, **kwargs), data)


def score(model, data: TranslationData, seed: int, num_samples: int, **decoding) -> dict:
    """``bleu_report`` on the test set with its buckets and translations (``decoding``: ``beam_size``,
    ``alpha``), as the stored comparison scores its runs, with the seconds it took and the translations'
    length relative to their references (tokens)."""
    start = time.perf_counter()
    report = bleu_report(model, data, "test", num_samples=num_samples, seed=seed, buckets=data.split.buckets,
                         keep_hypotheses=True, **decoding)
    references = [len(t) for t in data.test.tgt]
    report["length_ratio"] = sum(len(h.split()) for h in report["hypotheses"]) / sum(references)
    report["decode_seconds"] = time.perf_counter() - start
    report["decoding"] = {"beam_size": decoding.get("beam_size", 1), "alpha": decoding.get("alpha", 0.0)}
    return report


# ---------------------------------------------------------------------------------------------
# Jobs, the record and the comparisons
# ---------------------------------------------------------------------------------------------


def load_data(quick: bool) -> TranslationData:
    """The stored comparison's (and chapter 4's) data: ``TRAIN_PAIRS`` training pairs of the Tatoeba file and
    its stratified held-out sets; with ``quick`` a small sample of the same file."""
    if quick:
        return load_translation_data("tatoeba", num_train=QUICK["num_train"], num_val=QUICK["num_val"],
                                     num_test=QUICK["num_test"], verbose=False)
    return load_translation_data("tatoeba", num_train=TRAIN_PAIRS, verbose=False)


def run_job(job: dict, data: TranslationData | None = None) -> list[dict]:
    """One training run (``job``: its ``training``, ``seed``, ``steps``, ``threads``, ``device``, ``quick`` and
    ``num_samples``) on ``data`` (None: ``load_data``, in a worker) and its runs: the variant with greedy
    decoding, and for the reference each beam too."""
    torch.set_num_threads(job["threads"])
    device = get_device(job["device"])
    training, seed = job["training"], job["seed"]
    data = load_data(job["quick"]) if data is None else data
    model, history, data = train_variant(training, data, seed, job["steps"], device)
    common = {"seed": seed, "training": training, "parameters": sum(p.numel() for p in model.parameters()),
              "steps": len(history.steps), "train_seconds": history.train_seconds, "aer": None,
              "curve": {"steps": [], "seconds": [], "val_bleu": []}}
    runs = [{"model": training, **common, **score(model, data, seed, job["num_samples"])}]
    if training == REFERENCE:
        runs += [{"model": beam_name(alpha), **common,
                  **score(model, data, seed, job["num_samples"], beam_size=BEAM_SIZE, alpha=alpha)}
                 for alpha in ALPHAS]
    return runs


def stored_comparison(record: dict, path: Path = COMPARISON) -> dict:
    """What the stored comparison's file holds of the reference: whether it was made with the same recipe, data
    and budget, with how many threads, and its runs of ``MODEL`` by seed (BLEU and test translations)."""
    shown = Path("benchmarks") / "results" / path.name
    if not path.is_file():
        return {"file": str(shown), "found": False}
    stored = json.loads(path.read_text(encoding="utf-8"))
    recipe = stored.get("recipes", {}).get(MODEL)
    return {"file": str(shown), "found": True, "commit": stored.get("commit"),
            "same_recipe": recipe == record["recipes"][REFERENCE],
            "same_corpus": stored.get("corpus", {}).get("summary") == record["corpus"]["summary"],
            "same_test_set": stored.get("test_set", {}).get("references") == record["test_set"]["references"],
            "same_steps": stored.get("budget", {}).get("steps") == record["budget"]["steps"],
            "threads_per_run": stored.get("machine", {}).get("threads_per_run"),
            "seeds": sorted(r["seed"] for r in stored.get("runs", []) if r["model"] == MODEL),
            "_runs": {r["seed"]: r for r in stored.get("runs", []) if r["model"] == MODEL}}


def against_stored(run: dict, comparison: dict) -> dict | None:
    """The stored comparison's run of ``run``'s seed beside ``run`` (a reference run): its BLEU and the share of
    test translations that are identical, or None where it has no such run or another set-up."""
    same = all(comparison.get(k) for k in ("found", "same_recipe", "same_corpus", "same_test_set", "same_steps"))
    stored = comparison.get("_runs", {}).get(run["seed"]) if same else None
    if stored is None:
        return None
    hypotheses = stored.get("hypotheses")
    identical = None if hypotheses is None else sum(
        a == b for a, b in zip(hypotheses, run["hypotheses"])) / len(run["hypotheses"])
    return {"bleu": stored["bleu"], "identical_translations": identical}


def paired_comparisons(record: dict, num_samples: int) -> list[dict]:
    """Each variant against the reference (``compare_stored``: paired bootstrap over the test set and in each
    bucket, BLEU of the variant minus the reference's): over the seeds both hold, and seed by seed where there
    are several."""
    seeds = {name: {r["seed"] for r in record["runs"] if r["model"] == name} for name in VARIANTS}
    rows = []
    for name in VARIANTS:
        common = sorted(seeds[name] & seeds[REFERENCE])
        if name == REFERENCE or not common:
            continue
        for group in [common] + ([[s] for s in common] if len(common) > 1 else []):
            runs = [r for r in record["runs"] if r["seed"] in group]
            rows.append({"model": name, "against": REFERENCE, "seeds": group,
                         "rows": compare_stored({**record, "runs": runs}, name, REFERENCE, num_samples=num_samples)})
    return rows


def format_paired(paired: list[dict]) -> str:
    """The paired comparisons as lines: the difference in BLEU over the test set and in each bucket, with its 95 %
    interval, and how often the variant won in the resamples."""
    lines = []
    for entry in paired:
        seeds = ", ".join(map(str, entry["seeds"]))
        lines.append(f"{entry['model']} minus {entry['against']} (seeds {seeds}):")
        lines += [f"  {row['bucket']:>6} ({row['pairs']:>4} pairs) {row['difference']:+6.2f} "
                  f"({row['low']:+.2f} to {row['high']:+.2f}), better in {row['a_wins']:.0%} of resamples"
                  for row in entry["rows"]]
    return "\n".join(lines)


def header(args, argv: list[str], data: TranslationData, num_samples: int) -> dict:
    """The record without runs: how it was made (the command as given), on what, with which data and budget."""
    record = {
        "commands": [shlex.join(["python", "benchmarks/seq2seq_exercises.py", *argv])],
        "commit": commit(), "machine": machine(args.threads, args.workers), "torch": torch.__version__,
        "device": args.device, "date": datetime.date.today().isoformat(),
        **data_record(data, QUICK["num_train"] if args.quick else TRAIN_PAIRS),
        "budget": {"steps": args.steps, "batch_size": BOOK_BATCH, "bootstrap_samples": num_samples,
                   "beam_size": BEAM_SIZE, "alphas": list(ALPHAS), "quick": args.quick},
        "variants": VARIANTS,
        # every variant is the one recipe (what differs is said in "variants"); stored_results needs one per name
        "recipes": dict.fromkeys(VARIANTS, json.loads(json.dumps(BOOK_RECIPES[MODEL]._asdict()))),
        "sweep": [], "grammar_runs": [], "runs": [], "paired": [],
    }
    record["stored_comparison"] = stored_comparison(record)
    return record


def resume(record: dict, out: Path) -> set:
    """Take the runs of the file at ``out`` into ``record`` (after checking that it was made with the same data
    and budget) and return the (training, seed) pairs it holds complete."""
    old = json.loads(out.read_text(encoding="utf-8"))
    for key in ("corpus", "budget", "recipes"):
        if old.get(key) != record[key]:
            raise SystemExit(f"{out} was made with another {key} ({old.get(key)!r:.200}); --resume continues only "
                             "a file made with the same data and budget")
    record["runs"] = old["runs"]
    record["commands"] = old.get("commands", []) + record["commands"]
    earlier = old.get("earlier_commits", []) + [old["commit"]]
    record["earlier_commits"] = [c for c in dict.fromkeys(earlier) if c != record["commit"]]
    held = {(r["model"], r["seed"]) for r in record["runs"]}
    return {(training, seed) for training, seed in {(r["training"], r["seed"]) for r in record["runs"]}
            if (training, seed) in held and (training != REFERENCE
                                             or all((beam_name(a), seed) in held for a in ALPHAS))}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0], help="seeds of every variant (default 0)")
    parser.add_argument("--steps", type=int, default=BOOK_STEPS, help=f"training steps (default {BOOK_STEPS})")
    parser.add_argument("--workers", type=int, default=1, help="training runs at a time (default 1)")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(),
                        help="torch threads per run (the stored comparison used 1)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or mps (default cpu)")
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK['steps']} steps on a small sample, seed 0: checks that it runs (needs --out)")
    parser.add_argument("--out", type=Path, default=None,
                        help="the JSON file, relative to the working directory (default: "
                             "benchmarks/results/seq2seq_exercises_cpu.json; stored as given)")
    parser.add_argument("--resume", action="store_true", help="keep the runs already in --out")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    if args.quick:
        if args.out is None:
            parser.error("--quick needs --out (the default file holds the book-budget runs)")
        args.seeds, args.steps = [0], QUICK["steps"]
    out = RESULTS if args.out is None else args.out
    num_samples = QUICK["bootstrap_samples"] if args.quick else BOOTSTRAP_SAMPLES

    data = load_data(args.quick)
    record = header(args, argv, data, num_samples)
    comparison = record["stored_comparison"]
    print(f"{data.summary()}\nstored comparison {comparison['file']}: "
          + ", ".join(f"{k} {v}" for k, v in comparison.items() if k not in ("file", "_runs")), flush=True)
    done = resume(record, out) if args.resume and out.exists() else set()
    jobs = [{"training": training, "seed": seed, "steps": args.steps, "threads": args.threads,
             "device": args.device, "quick": args.quick, "num_samples": num_samples}
            for seed in args.seeds for training in TRAININGS if (training, seed) not in done]
    print(f"{len(jobs)} training runs on {args.workers} worker(s) of {args.threads} thread(s)", flush=True)

    def save() -> None:
        record["runs"].sort(key=lambda r: (r["seed"], list(VARIANTS).index(r["model"])))
        record["paired"] = paired_comparisons(record, num_samples)
        kept = {**record, "stored_comparison": {k: v for k, v in comparison.items() if k != "_runs"}}
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(kept, indent=1) + "\n", encoding="utf-8")

    def store(runs: list[dict]) -> None:
        for run in runs:
            if run["model"] == REFERENCE:
                run["stored"] = against_stored(run, comparison)
            record["runs"].append(run)
            shown = {k: (float(f"{v:.4g}") if isinstance(v, float) else v) for k, v in run.items()
                     if k in ("model", "seed", "bleu", "bleu_low", "bleu_high", "length_ratio", "train_seconds",
                              "stored")}
            print(shown, flush=True)
        save()

    if args.workers == 1:
        for job in jobs:
            store(run_job(job, data))
    else:
        with multiprocessing.get_context("spawn").Pool(args.workers, maxtasksperchild=1) as pool:
            for runs in pool.imap_unordered(run_job, jobs):
                store(runs)
    if not record["runs"]:
        return 0
    if not jobs:  # a --resume with nothing left to run: the file as this version writes it
        save()
    check_translator_results(record, str(out))
    print(format_summary(summarize_runs(record)))
    print(format_by_length(summarize_by_length(record)))
    print(format_paired(record["paired"]))
    print(f"written to {args.out or out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
