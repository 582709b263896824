"""benchmarks/relation_budget.py: section 7.2's poolings trained past their plateau and at several rates.

Its runs must be the section's own training: the same corpus (the section prints 252 tokens in its
vocabulary and a training batch of shape (400, 29)) and, run for run, the same model as
``train_seeds`` in the section.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import torch
from benchmark_modules import load_benchmark

from attn_utils import AttentionBiLSTM
from attn_utils.data.relations import LABELS
from attn_utils.trainers import train_seeds

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "relation_budget.py"


def test_its_data_is_the_sections():
    data = load_benchmark("relation_budget").section_data()
    assert data["vocab_size"] == 252  # as section 7.2 prints
    assert tuple(data["train"].tokens.shape) == (400, 29)
    assert [len(data[name].labels) for name in ("val", "test", "3 distractors", "long")] == [500, 1000, 1000, 1000]


def test_a_run_is_the_sections_training_run():
    benchmark = load_benchmark("relation_budget")
    previous = torch.get_num_threads()
    try:
        result = benchmark.run(("attention", 5e-3, 1, 6, 3, 1))
        data = benchmark.section_data()
        build = functools.partial(AttentionBiLSTM, data["vocab_size"], 48, 48, len(LABELS), dropout=0.3,
                                  pooling="attention")
        train, val = data["train"], data["val"]
        section = train_seeds(build, (train.tokens, train.lengths), train.labels, seeds=[1], max_steps=6,
                              batch_size=64, lr=5e-3, eval_every=3, progress=False,
                              val=((val.tokens, val.lengths), val.labels))
    finally:
        torch.set_num_threads(previous)
    history = section.histories[0]
    assert result["steps"] == history.eval_steps == [3, 6]
    assert result["val_accuracy"] == history.evals["val_accuracy"]
    # the mean training cross-entropy of the steps since the last score
    assert result["train_loss"] == [sum(history.loss[:3]) / 3, sum(history.loss[3:6]) / 3]


def test_it_runs_and_stores_its_numbers(tmp_path):
    out = tmp_path / "budget.json"
    result = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(out)], capture_output=True,
                            text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    record = json.loads(out.read_text())
    assert record["command"].startswith("python benchmarks/relation_budget.py --quick")
    assert [(r["pooling"], r["lr"], r["seed"]) for r in record["runs"]] == [
        ("attention", 5e-3, 0), ("mean", 5e-3, 0), ("last", 5e-3, 0)]
    for run in record["runs"]:
        assert run["steps"] == [2, 4] and len(run["val_accuracy"]) == len(run["train_loss"]) == 2
        assert all(0 <= value <= 1 for value in [*run["val_accuracy"], *run["final"].values()])
    assert "validation accuracy by step" in result.stdout
