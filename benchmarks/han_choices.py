"""What section 7.3's comparison rests on: its four document classifiers over ten seeds and four learning
rates, and the HAN against HN-AVE with a longer budget and more training reviews.

Section 7.3 trains four classifiers on its generated reviews (1,200 training reviews, half of the opinion
words rare): the hierarchical attention network (HAN), the same with mean pooling (HN-AVE), and one
bidirectional GRU over all the words with attention or mean pooling. A run ends either near 1.0 (it found
the rule that makes the label) or far below it, so three seeds say little. This script trains them with
the section's own code path (``attn_utils.train_seeds``, one seed at a time, each seed fixing the initial
weights and the batches), sizes (32 throughout) and budget (400 steps of 64 reviews, Adam at a constant
rate, the validation reviews scored every 10 steps):

* ``sweep``: every model at each rate of ``--lrs`` with the seeds of ``--sweep-seeds``. Each model's rate
  is the one with the best mean final *validation* accuracy over those seeds (the test set plays no part
  in it); the model then also runs with the other seeds of ``--seeds`` at that rate;
* ``explanation``: the HAN and HN-AVE with ``--seeds``, both at ``--explanation-lr`` (5e-3, a rate at
  which HN-AVE found the rule in every run of the sweep and the HAN did not; 0: each at its chosen rate),
  trained for ``--long-steps`` instead of 400 steps, on the section's 1,200
  training reviews and on ``--many-reviews``. The rate is constant and the batches depend only on the
  seed, so the first 400 steps of a run on 1,200 reviews are the section's run at that rate; the stored
  validation curve gives every run's accuracy at step 400.

Each run stores its final validation accuracy, test accuracy, accuracy on 1,000 longer reviews (12 to 16
sentences), training seconds, its validation curve and the first step at which it reached 0.9, and, for
the HAN, how often its sentence attention weighs the verdict most (the hit rate). A run *fails* when its
test accuracy is below ``FAILURE_LEVEL`` (0.9): the rule classifies every review, and the runs that find
it end far above 0.9, the others far below. ``--out`` stores every number and is written after every run;
``--resume`` continues such a file, skipping the runs it holds (``--models`` splits the work between
processes, whose files a last ``--resume`` run over their union collects).

    python benchmarks/han_choices.py [--sweep-seeds 0 1 2 3 4] [--seeds 0 1 ... 9] [--lrs 0.002 0.005 0.01 0.02]
        [--explanation-lr 0.005] [--out benchmarks/results/han_choices_cpu.json] [--resume]

Single-threaded on CPU, as the section runs: the numbers of the chosen rates are the section's to the
last digit. About 1.5 hours on one idle core (``--quick``: seconds, to check that it runs).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import write_record  # noqa: E402

from attn_utils import accuracy, environment, evidence_hit_rate, han, predict, spread, steps_to_reach  # noqa: E402
from attn_utils.data import reviews  # noqa: E402
from attn_utils.trainers import train_seeds  # noqa: E402

SECTION = dict(num_train=1200, num_val=500, num_test=1000, seed=0, rare_prob=0.5)  # section 7.3's reviews
STEPS, BATCH_SIZE, EVAL_EVERY = 400, 64, 10  # section 7.3's budget
SIZES = dict(embed=32, hidden=32, attention=32)  # section 7.3's sizes
MODELS = ("HAN", "HN-AVE", "flat, attention", "flat, mean")
HIERARCHICAL = ("HAN", "HN-AVE")
FAILURE_LEVEL = 0.9  # a run below this test accuracy has not found the rule (which gives 1.0)


def builders(V: int, C: int, embed: int, hidden: int, attention: int) -> dict:
    """Section 7.3's four classifiers (its cell that trains them), for a vocabulary of V words and C classes."""
    return {
        "HAN": lambda: han.HierarchicalAttentionNetwork(V, embed, hidden, hidden, attention, C),
        "HN-AVE": lambda: han.HierarchicalAttentionNetwork(V, embed, hidden, hidden, attention, C, pooling="mean"),
        "flat, attention": lambda: han.FlatDocumentClassifier(V, embed, hidden, attention, C, pooling="attention"),
        "flat, mean": lambda: han.FlatDocumentClassifier(V, embed, hidden, attention, C, pooling="mean"),
    }


def corpus(num_train: int, quick: bool = False):
    """The section's reviews with ``num_train`` training reviews, and the longer reviews (inputs, labels)."""
    options = dict(SECTION, num_train=num_train)
    if quick:
        options.update(num_val=40, num_test=40)
    data = reviews.make_review_data(**options)
    longer = reviews.make_reviews(40 if quick else 1000, seed=1, min_sentences=12, max_sentences=16,
                                  rare_prob=SECTION["rare_prob"])
    inputs = reviews.documents_to_tensors(longer, data.vocab, max_words=reviews.MAX_WORDS)
    return data, (inputs, torch.tensor([r.label for r in longer]))


def one_run(name: str, build, data, longer, seed: int, lr: float, steps: int) -> dict:
    """Train ``build()`` with ``seed`` as section 7.3 does and score it."""
    run = train_seeds(build, data.train.inputs, data.train.labels, seeds=[seed], device="cpu", progress=False,
                      max_steps=steps, batch_size=BATCH_SIZE, lr=lr, val=(data.val.inputs, data.val.labels),
                      eval_every=EVAL_EVERY)
    model, history = run.models[0], run.histories[0]
    record = {"seed": seed, "lr": lr, "steps": steps,
              "val_accuracy": history.evals["val_accuracy"][-1],
              "test_accuracy": accuracy(model, data.test.inputs, data.test.labels),
              "longer_accuracy": accuracy(model, *longer),
              "train_seconds": history.train_seconds,
              "step_val_0.9": steps_to_reach(history, 0.9),
              "val_curve": dict(zip(("steps", "val_accuracy"), history.curve("val_accuracy")))}
    if name == "HAN":
        _, weights = predict(model, data.test.inputs)
        record["hit_rate"] = evidence_hit_rate(weights, data.test.evidence)
    return record


def choose_lr(sweep_runs: dict, seeds) -> float:
    """The rate with the best mean final validation accuracy over ``seeds`` (ties: the first in the sweep)."""
    def mean_validation(lr):
        return spread([r["val_accuracy"] for r in sweep_runs[lr] if r["seed"] in seeds]).mean

    return max(sweep_runs, key=mean_validation)


def summary(runs: list) -> str:
    """Test accuracy (mean, range), failures and validation accuracy of a list of runs."""
    test = [r["test_accuracy"] for r in runs]
    failed = sum(a < FAILURE_LEVEL for a in test)
    return (f"test {spread(test):.3f}, failed {failed}/{len(runs)}, "
            f"validation {spread([r['val_accuracy'] for r in runs]):.3f}")


class Store:
    """The record, written after every run; with ``resume``, the runs of an earlier file are reused."""

    def __init__(self, out, resume: bool, header: dict):
        self.out = out
        self.record = dict(header, sweep={}, chosen_lr={}, explanation={})
        if resume and out and Path(out).is_file():
            old = json.loads(Path(out).read_text(encoding="utf-8"))
            self.record["sweep"], self.record["explanation"] = old.get("sweep", {}), old.get("explanation", {})
            self.record["commands"] = list(dict.fromkeys(old.get("commands", []) + header["commands"]))

    def runs(self, *keys) -> list:
        node = self.record
        for key in keys:
            node = node.setdefault(key, {})
        return node.setdefault("runs", [])

    def save(self):
        if self.out:
            write_record(self.out, self.record)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweep-seeds", type=int, nargs="+", default=list(range(5)),
                        help="the seeds that every learning rate is tried with")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(10)),
                        help="the seeds of each model at its chosen rate, and of the explanation")
    parser.add_argument("--lrs", type=float, nargs="+", default=[2e-3, 5e-3, 1e-2, 2e-2])
    parser.add_argument("--explanation-lr", type=float, default=5e-3,
                        help="the explanation's rate for both models (0: each model's chosen rate)")
    parser.add_argument("--long-steps", type=int, default=1200)
    parser.add_argument("--many-reviews", type=int, default=4800)
    parser.add_argument("--parts", nargs="+", default=["sweep", "explanation"], choices=["sweep", "explanation"])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS,
                        help="the models to run (the explanation runs the HAN and HN-AVE among them)")
    parser.add_argument("--conditions", nargs="+", default=["long", "many"], choices=["long", "many"],
                        help="the explanation's conditions: the longer budget on the section's reviews, on more")
    parser.add_argument("--quick", action="store_true", help="a few steps, two seeds, to check that it runs")
    parser.add_argument("--out", default=None)
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()
    steps = STEPS
    if args.quick:
        args.sweep_seeds, args.seeds, args.lrs, args.long_steps, args.many_reviews, steps = [0], [0, 1], [5e-3, 1e-2], \
            20, 120, 10
    torch.set_num_threads(1)  # as the section runs: one thread, so every number is the section's
    header = {"benchmark": "han_choices", **environment("cpu"),
              "commands": [shlex.join(["python", "benchmarks/han_choices.py", *sys.argv[1:]])],
              "corpus": SECTION, "steps": steps, "batch_size": BATCH_SIZE, "eval_every": EVAL_EVERY,
              "sizes": SIZES, "sweep_seeds": args.sweep_seeds, "seeds": args.seeds, "lrs": args.lrs,
              "explanation_lr": args.explanation_lr, "failure_level": FAILURE_LEVEL}
    store = Store(args.out, args.resume, header)

    def runs_for(name, build, data, longer, lr, run_steps, seeds, keys):
        runs = store.runs(*keys)
        for seed in seeds:
            if any(r["seed"] == seed for r in runs):
                continue
            r = one_run(name, build, data, longer, seed, lr, run_steps)
            runs.append(r)
            runs.sort(key=lambda r: r["seed"])
            print(f"  {' / '.join(map(str, keys[1:]))}, seed {seed}: validation {r['val_accuracy']:.3f}, "
                  f"test {r['test_accuracy']:.3f}, {r['train_seconds']:.1f} s", flush=True)
            store.save()
        return [r for r in runs if r["seed"] in seeds]

    data, longer = corpus(SECTION["num_train"], args.quick)
    V, C = len(data.vocab), len(reviews.REVIEW_CLASSES)
    section_builders = builders(V, C, **SIZES)
    models = [name for name in MODELS if name in args.models]
    print(f"section 7.3's classifiers on CPU (1 thread), {steps} steps: every rate with seeds {args.sweep_seeds}, "
          f"the chosen one with seeds {args.seeds}")
    if "sweep" in args.parts:
        for name in models:
            sweep = {lr: runs_for(name, section_builders[name], data, longer, lr, steps, args.sweep_seeds,
                                  ("sweep", name, f"{lr:g}")) for lr in args.lrs}
            lr = choose_lr(sweep, args.sweep_seeds)
            store.record["chosen_lr"][name] = lr
            runs_for(name, section_builders[name], data, longer, lr, steps, args.seeds, ("sweep", name, f"{lr:g}"))
        store.save()
        print(f"\nlearning-rate sweep: test accuracy mean (range), runs below {FAILURE_LEVEL} (failed), final "
              "validation accuracy")
        for name in models:
            for lr in args.lrs:
                runs = store.runs("sweep", name, f"{lr:g}")
                chosen = lr == store.record["chosen_lr"][name]
                print(f"  {name:<16} lr {lr:<6g} {summary([r for r in runs if r['seed'] in args.sweep_seeds])}"
                      + (f"\n  {'':<16} {'':<9} {summary([r for r in runs if r['seed'] in args.seeds])}  <- chosen"
                         if chosen else ""))

    if "explanation" in args.parts:
        every = {"long": (f"{args.long_steps:,} steps", SECTION["num_train"]),
                 "many": (f"{args.many_reviews:,} reviews, {args.long_steps:,} steps", args.many_reviews)}
        conditions = dict(every[short] for short in every if short in args.conditions)
        rates = f"learning rate {args.explanation_lr:g}" if args.explanation_lr else "their chosen rates"
        print(f"\nthe hierarchical models at {rates}, {args.long_steps} steps (their first {steps} are the "
              "section's)")
        for condition, num_train in conditions.items():
            cdata, clonger = (data, longer) if num_train == SECTION["num_train"] else corpus(num_train, args.quick)
            cbuilders = builders(len(cdata.vocab), C, **SIZES)
            entry = store.record["explanation"].setdefault(condition, {})
            entry.update(num_train=num_train, steps=args.long_steps, lr=args.explanation_lr)
            for name in (name for name in models if name in HIERARCHICAL):
                lr = args.explanation_lr or store.record["chosen_lr"].get(name)
                if lr is None:  # --parts explanation: the rate from the stored sweep
                    lr = choose_lr({float(k): v["runs"] for k, v in store.record["sweep"][name].items()},
                                   args.sweep_seeds)
                    store.record["chosen_lr"][name] = lr
                runs = runs_for(name, cbuilders[name], cdata, clonger, lr, args.long_steps, args.seeds,
                                ("explanation", condition, name))
                at = [r["val_curve"]["val_accuracy"][r["val_curve"]["steps"].index(steps)] for r in runs]
                print(f"  {condition:<28} {name:<7} lr {lr:<6g} {summary(runs)}; validation at step {steps} "
                      f"{spread(at):.3f}", flush=True)
        store.save()


if __name__ == "__main__":
    main()
