"""benchmarks/induction_runs.py: section 11.4's runs followed through training.

Its runs must be the section's: one seed's two-layer run gives, at a tiny budget, the same model as the
section's recipe ``train_copying_lm`` with the section's sizes, and every stored number is read back from
that model (test copy accuracy, the ablations, the halfway steps)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from benchmark_modules import load_benchmark

from attn_utils import CausalLanguageModel, set_seed
from attn_utils.evaluate import copy_accuracy, copy_scores
from attn_utils.induction import ablate_heads, repeated_segments
from attn_utils.trainers import train_copying_lm

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "induction_runs.py"


def test_a_run_is_the_sections_recipe(one_thread):
    benchmark = load_benchmark("induction_runs")
    test = repeated_segments(40, 32, 128, 4, 12, generator=torch.Generator().manual_seed(12345))
    probe = test[:10]
    ours, history = benchmark.train(2, "rotary", seed=1, steps=6, eval_every=3, probe=probe)
    set_seed(1)
    theirs = CausalLanguageModel(128, num_hiddens=64, ffn_num_hiddens=256, num_heads=2, num_blks=2, max_len=32,
                                 position_scheme="rotary")
    train_copying_lm(theirs, max_steps=6, seed=1, vocab_size=128, length=32, min_segment=4, max_segment=12)
    for (key, a), b in zip(ours.state_dict().items(), theirs.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=key)
    assert history.eval_steps == [3, 6]
    assert history.evals["copy accuracy"][-1] == pytest.approx(copy_scores(theirs, probe)["copy accuracy"])
    # the halfway steps are evaluation steps
    assert set(benchmark.phase_steps(history).values()) <= {3, 6}


def test_the_benchmark_runs_and_stores_numbers_read_from_its_models(tmp_path, one_thread):
    out = tmp_path / "induction.json"
    command = [sys.executable, str(SCRIPT), "--quick", "--parts", "section", "lengths", "sinusoidal",
               "--out", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    record = json.loads(out.read_text())
    assert record["seeds"] == [0] and record["steps"] == 20 and record["eval_every"] == 10
    for group in ("one layer, rotary", "two layers, rotary", "two layers, sinusoidal"):
        (run,) = record[group]
        assert run["eval_steps"] == [10, 20]
        assert 0 <= run["copy_accuracy_test"] <= 1
        assert len(run["evals"]["copy accuracy"]) == 2
    two = record["two layers, rotary"][0]
    assert set(two["ablations_test"]) == set(load_benchmark("induction_runs").ABLATIONS)
    assert set(two["halfway_steps"].values()) <= {10, 20}
    assert list(record["segment lengths"]) == ["2-3", "4-12", "13-16"]
    # the stored test accuracy and one ablation are those of the section's model, retrained here
    benchmark = load_benchmark("induction_runs")
    test = repeated_segments(2000, 32, 128, 4, 12, generator=torch.Generator().manual_seed(12345))
    model, _ = benchmark.train(2, "rotary", seed=0, steps=20, eval_every=10, probe=test[:500])
    assert two["copy_accuracy_test"] == copy_accuracy(model, test)
    with ablate_heads(model, [(1, 0)]):
        assert two["ablations_test"]["layer 2, head 1"] == copy_accuracy(model, test)
