"""Section 7.2's budget and learning rate, checked: its three poolings trained well past their plateau.

Section 7.2 trains Zhou et al.'s attention-BiLSTM and two poolings without attention (the mean of H and
the LSTM's last states) on the generated relation corpus, with one budget and one learning rate for all
three. This script checks both choices. For every pooling and every learning rate of ``--lrs`` it trains
each seed of ``--seeds`` for ``--steps`` steps with the section's recipe (its corpus, vocabulary and
sizes, ``trainers.train_classifier`` with batches of 64, dropout 0.3 and Adam at a constant rate, the
seed set first as ``train_seeds`` does), scores the validation sentences every ``--eval-every`` steps
(with the mean training cross-entropy of the steps since the last score), and at the end the test
sentences and the section's two harder sets (three distracting clauses; four extra openers and closers).
The rate is constant, so a model's state at step k is the state a k-step run ends in: each curve shows
where its model stops improving, and the runs at the section's rate repeat the section's own numbers at
its budget. Printed: validation accuracy at a few steps and the final scores, mean (range) over the
seeds. ``--out`` stores every number after each run.

    python benchmarks/relation_budget.py [--steps 3000] [--lrs 0.002 0.005 0.01] [--seeds 0 1 2]
        [--poolings attention mean last] [--workers 2] [--out benchmarks/results/relation_budget_cpu.json]

One run of 3,000 steps takes about 100 s on one idle CPU core (``--quick``: seconds, to check it runs).
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import write_record  # noqa: E402

from attn_utils import AttentionBiLSTM, environment, make_relation_corpus, set_seed, spread  # noqa: E402
from attn_utils.data.relations import LABELS, relation_tensors, relation_vocab  # noqa: E402
from attn_utils.evaluate import accuracy  # noqa: E402
from attn_utils.trainers import train_classifier  # noqa: E402

POOLINGS = ("attention", "mean", "last")
EMBED_SIZE = HIDDEN_SIZE = 48  # section 7.2's sizes
RARE_PROB, PROBE_SIZE = 0.5, 1000


def section_data() -> dict:
    """Section 7.2's tensors: ``train``, ``val``, ``test``, ``3 distractors`` and ``long``, and the vocabulary
    size, built exactly as the section builds them."""
    corpus = make_relation_corpus(num_train=400, num_val=500, num_test=1000, seed=0, rare_prob=RARE_PROB)
    vocab = relation_vocab(corpus.train)
    three = make_relation_corpus(0, 0, PROBE_SIZE, seed=1, distractor_prob=1.0, distractors=3,
                                 rare_prob=RARE_PROB).test
    longer = make_relation_corpus(0, 0, PROBE_SIZE, seed=2, filler=4, rare_prob=RARE_PROB).test
    splits = {"train": corpus.train, "val": corpus.val, "test": corpus.test, "3 distractors": three,
              "long": longer}
    return {"vocab_size": len(vocab), **{name: relation_tensors(part, vocab) for name, part in splits.items()}}


def run(task) -> dict:
    """Train one pooling from one seed at one rate: the validation curve and the final scores."""
    pooling, lr, seed, steps, eval_every, threads = task
    torch.set_num_threads(threads)
    data = section_data()
    train = data["train"]
    set_seed(seed)
    model = AttentionBiLSTM(data["vocab_size"], EMBED_SIZE, HIDDEN_SIZE, len(LABELS), dropout=0.3, pooling=pooling)
    history = train_classifier(model, (train.tokens, train.lengths), train.labels, max_steps=steps, batch_size=64,
                               lr=lr, eval_every=eval_every, seed=seed, progress=False,
                               val=((data["val"].tokens, data["val"].lengths), data["val"].labels))
    losses = [sum(history.loss[max(0, step - eval_every):step]) / min(step, eval_every)
              for step in history.eval_steps]
    final = {name: accuracy(model, (data[name].tokens, data[name].lengths), data[name].labels)
             for name in ("test", "3 distractors", "long")}
    return {"pooling": pooling, "lr": lr, "seed": seed, "steps": history.eval_steps,
            "val_accuracy": history.evals["val_accuracy"], "train_loss": losses, "final": final,
            "seconds": history.train_seconds}


def report(runs: list[dict], checkpoints) -> str:
    """Validation accuracy at ``checkpoints`` and the final scores, mean (range) over the seeds."""
    lines = [f"{'pooling':<10}{'lr':>7}  " + "".join(f"{f'val @ {k}':>22}" for k in checkpoints)
             + "".join(f"{name:>22}" for name in ("test", "3 distractors", "long"))]
    for pooling in POOLINGS:
        for lr in sorted({r["lr"] for r in runs}):
            group = [r for r in runs if r["pooling"] == pooling and r["lr"] == lr]
            if not group:
                continue
            at = [f"{spread([r['val_accuracy'][r['steps'].index(k)] for r in group]):.3f}" for k in checkpoints]
            final = [f"{spread([r['final'][name] for r in group]):.3f}" for name in ("test", "3 distractors", "long")]
            lines.append(f"{pooling:<10}{lr:>7g}  " + "".join(f"{a:>22}" for a in at + final))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--eval-every", type=int, default=50)
    parser.add_argument("--lrs", type=float, nargs="+", default=[2e-3, 5e-3, 1e-2])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--poolings", nargs="+", choices=POOLINGS, default=list(POOLINGS))
    parser.add_argument("--workers", type=int, default=1, help="runs side by side, each on --threads threads")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="a few steps, one seed, to check that it runs")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.quick:
        args.steps, args.eval_every, args.lrs, args.seeds = 4, 2, [5e-3], [0]
    tasks = [(pooling, lr, seed, args.steps, args.eval_every, args.threads)  # rate by rate, in --lrs's order
             for lr in args.lrs for pooling in args.poolings for seed in args.seeds]
    print(f"section 7.2's poolings {args.poolings}, rates {args.lrs}, seeds {args.seeds}: {args.steps} steps each, "
          f"validation every {args.eval_every}")
    record = {"benchmark": "relation_budget", **environment("cpu"), "steps": args.steps,
              "eval_every": args.eval_every, "lrs": args.lrs, "seeds": args.seeds,
              "command": " ".join(["python benchmarks/relation_budget.py"] + sys.argv[1:]), "runs": []}
    with ProcessPoolExecutor(args.workers) as pool:
        for result in pool.map(run, tasks):
            record["runs"].append(result)
            print(f"  {result['pooling']}, lr {result['lr']:g}, seed {result['seed']}: validation "
                  f"{result['val_accuracy'][-1]:.3f}, test {result['final']['test']:.3f}, "
                  f"{result['seconds']:.0f} s", flush=True)
            if args.out:
                write_record(args.out, record)
    checkpoints = sorted({k for k in (300, 1000, 2000, args.steps) if k <= args.steps
                          and k in record["runs"][0]["steps"]})
    print(f"\nvalidation accuracy by step, final test scores; mean (range) over the seeds\n"
          f"{report(record['runs'], checkpoints)}")


if __name__ == "__main__":
    main()
