"""Section 11.4's runs, followed through training, and the measurements its exercises ask for.

Section 11.4 trains small causal Transformers (width 64, 2 heads a layer) on the copying task
(``induction.repeated_segments``: 32 tokens from 128 symbols, a segment of 4 to 12 tokens occurring
twice) with its recipe ``trainers.train_copying_lm``, 2,000 steps, seeds 0, 1, 2, one CPU thread, as
the section does. Every ``--eval-every`` steps ``evaluate.copy_scores`` records, on the first 500 of the
section's 2,000 test sequences, the copy accuracy, the copy loss (cross-entropy at the positions only the
context predicts) and every head's previous-token, induction and duplicate scores. Three groups of runs:

* ``section``: rotary positions, one layer and two (the section's own runs: same seeds, data, code path,
  so the section prints the same numbers). For each two-layer run, the step at which the copy loss, the
  best second-layer induction score and the best first-layer previous-token score each covered half
  their way from the first evaluation to the last (``metrics.halfway_step``);
* ``lengths`` (exercise ``ch11-induction-segment-lengths``): the two-layer rotary models on segments
  of 2-3, 4-12 and 13-16 tokens (2,000 sequences each, drawn with seed 5), in all and at the first
  position of each copy apart from the later ones;
* ``sinusoidal`` (exercise ``ch11-induction-sinusoidal``): two layers with sinusoidal positions added
  to the embeddings, everything else the same, with the same tracking, the final head scores and the
  ablations of the section (one head, or both heads of a layer, switched off).

``--out`` stores every number, the curves included.

    python benchmarks/induction_runs.py [--seeds 0 1 2] [--steps 2000] [--eval-every 25]
        [--parts section lengths sinusoidal] [--out benchmarks/results/induction_runs_cpu.json]

About 5 minutes a group of three 2,000-step runs on one idle core (``--quick``: seconds, to check that it runs).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import write_record  # noqa: E402

from attn_utils import CausalLanguageModel, environment, set_seed  # noqa: E402
from attn_utils.evaluate import copy_accuracy, copy_scores, head_curves, model_logits  # noqa: E402
from attn_utils.induction import ablate_heads, repeated_segments  # noqa: E402
from attn_utils.metrics import halfway_step, spread  # noqa: E402
from attn_utils.modes import evaluation_mode  # noqa: E402
from attn_utils.trainers import train_copying_lm  # noqa: E402

VOCAB, LENGTH, SEGMENT = 128, 32, (4, 12)  # the section's task
TEST_SEED, TEST_SIZE, PROBE_SIZE = 12345, 2000, 500
LENGTH_SEED, LENGTH_RANGES = 5, [(2, 3), SEGMENT, (13, 16)]
ABLATIONS = {"layer 1, head 1": [(0, 0)], "layer 1, head 2": [(0, 1)], "layer 1, both heads": [(0, 0), (0, 1)],
             "layer 2, head 1": [(1, 0)], "layer 2, head 2": [(1, 1)], "layer 2, both heads": [(1, 0), (1, 1)]}


def train(num_blks: int, scheme: str, seed: int, steps: int, eval_every: int, probe):
    """The section's ``train_copier``: the model, its ``History`` and the seconds the evaluations took."""
    set_seed(seed)
    model = CausalLanguageModel(VOCAB, num_hiddens=64, ffn_num_hiddens=256, num_heads=2, num_blks=num_blks,
                                max_len=LENGTH, position_scheme=scheme)
    history = train_copying_lm(model, max_steps=steps, seed=seed, vocab_size=VOCAB, length=LENGTH,
                               min_segment=SEGMENT[0], max_segment=SEGMENT[1],
                               evaluate=lambda m: copy_scores(m, probe), eval_every=eval_every)
    return model, history


def phase_steps(history) -> dict:
    """The halfway steps of the copy loss, the best second-layer induction score and the best first-layer
    previous-token score (best: the largest over the layer's heads at each evaluation)."""
    steps, loss = history.curve("copy loss")
    induction = head_curves(history, "induction")[1][:, -1].max(dim=-1).values.tolist()
    previous = head_curves(history, "previous")[1][:, 0].max(dim=-1).values.tolist()
    return {"copy loss": halfway_step(steps, loss), "induction (layer 2, best head)": halfway_step(steps, induction),
            "previous (layer 1, best head)": halfway_step(steps, previous)}


@torch.no_grad()
def accuracy_by_place(model, batch) -> dict:
    """The copy accuracy at the first position of each copy (where one token has matched so far) and at
    the later ones, with their numbers of predictable positions."""
    with evaluation_mode(model):
        logits = model_logits(model, batch.tokens[:, :-1])
    hits = logits.argmax(dim=-1) == batch.tokens[:, 1:]
    predictable = batch.predictable[:, :-1]
    first = torch.zeros_like(predictable)
    first[torch.arange(len(batch)), batch.second] = True
    first &= predictable
    later = predictable & ~first
    return {"first": hits[first].float().mean().item(), "later": hits[later].float().mean().item(),
            "first positions": int(first.sum()), "later positions": int(later.sum())}


def run_group(name, num_blks, scheme, args, probe, test) -> tuple[list, list]:
    models, records = [], []
    for seed in args.seeds:
        start = time.perf_counter()
        model, history = train(num_blks, scheme, seed, args.steps, args.eval_every, probe)
        record = {"seed": seed, "train_seconds": history.train_seconds,
                  "seconds_with_evaluations": time.perf_counter() - start,
                  "copy_accuracy_test": copy_accuracy(model, test), "eval_steps": history.eval_steps,
                  "evals": history.evals}
        if num_blks == 2:
            record["halfway_steps"] = phase_steps(history)
            record["ablations_test"] = {}
            for label, heads in ABLATIONS.items():
                with ablate_heads(model, heads):
                    record["ablations_test"][label] = copy_accuracy(model, test)
        final = {key: round(values[-1], 3) for key, values in history.evals.items()}
        print(f"  {name}, seed {seed}: test copy accuracy {record['copy_accuracy_test']:.3f}, "
              f"{history.train_seconds:.0f} s training, {record['seconds_with_evaluations']:.0f} s in all; "
              f"last evaluation {final}", flush=True)
        if num_blks == 2:
            print(f"    halfway steps {record['halfway_steps']}; ablated {record['ablations_test']}", flush=True)
        models.append(model)
        records.append(record)
    accuracy = spread([r["copy_accuracy_test"] for r in records])
    print(f"{name}: test copy accuracy {accuracy:.3f}", flush=True)
    return models, records


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--eval-every", type=int, default=25)
    parser.add_argument("--parts", nargs="+", default=["section", "lengths", "sinusoidal"],
                        choices=["section", "lengths", "sinusoidal"])
    parser.add_argument("--quick", action="store_true", help="a few steps, one seed, to check that it runs")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.steps, args.eval_every = [0], 20, 10
    torch.set_num_threads(1)  # as the section: small models, and numbers that do not depend on the machine
    test = repeated_segments(TEST_SIZE, LENGTH, VOCAB, *SEGMENT, generator=torch.Generator().manual_seed(TEST_SEED))
    probe = test[:PROBE_SIZE]
    print(f"section 11.4's runs, seeds {args.seeds}, {args.steps} steps, evaluated every {args.eval_every}")
    record = {"benchmark": "induction_runs", **environment(torch.device("cpu")), "seeds": args.seeds,
              "steps": args.steps, "eval_every": args.eval_every, "probe_size": PROBE_SIZE,
              "command": " ".join(["python benchmarks/induction_runs.py"] + sys.argv[1:])}
    if "section" in args.parts or "lengths" in args.parts:
        if "section" in args.parts:
            _, record["one layer, rotary"] = run_group("one layer, rotary", 1, "rotary", args, probe, test)
        models, record["two layers, rotary"] = run_group("two layers, rotary", 2, "rotary", args, probe, test)
        if "lengths" in args.parts:
            record["segment lengths"] = {}
            for low, high in LENGTH_RANGES:
                batch = repeated_segments(TEST_SIZE, LENGTH, VOCAB, low, high,
                                          generator=torch.Generator().manual_seed(LENGTH_SEED))
                accuracies = [copy_accuracy(m, batch) for m in models]
                by_place = [accuracy_by_place(m, batch) for m in models]
                record["segment lengths"][f"{low}-{high}"] = accuracies
                record["segment lengths, by place in the copy"] = record.get(
                    "segment lengths, by place in the copy", {})
                record["segment lengths, by place in the copy"][f"{low}-{high}"] = by_place
                print(f"segments of {low}-{high} tokens: copy accuracy {spread(accuracies):.3f}, per seed "
                      f"{[round(a, 3) for a in accuracies]}; at the copy's first position "
                      f"{spread([b['first'] for b in by_place]):.3f}, at the others "
                      f"{spread([b['later'] for b in by_place]):.3f} ({by_place[0]['first positions']:,} and "
                      f"{by_place[0]['later positions']:,} positions)", flush=True)
    if "sinusoidal" in args.parts:
        _, record["two layers, sinusoidal"] = run_group("two layers, sinusoidal", 2, "sinusoidal", args, probe,
                                                        test)
    if args.out:
        write_record(args.out, record)


if __name__ == "__main__":
    main()
