"""Section 11.3's previous-token recipe and its benchmark (``bench_modern_attention.py --extrapolation``), and
section 11.1's scoring by window (``lm_windows.py``): the recipe against the loop written out, the accuracy
against a count by hand, and each benchmark run at a tiny setting."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

import attn_utils
from attn_utils import CausalLanguageModel, fit
from attn_utils.evaluate import previous_token_accuracy
from attn_utils.trainers import train_previous_token_lm

ROOT = Path(__file__).resolve().parents[1]


def tiny_model(scheme="alibi", heads=2):
    attn_utils.set_seed(3)
    return CausalLanguageModel(11, num_hiddens=8, ffn_num_hiddens=16, num_heads=heads, num_blks=1, max_len=24,
                               position_scheme=scheme)


def test_the_previous_token_recipe_is_the_loop_written_out():
    """The recipe trains step for step as the section's own loop did: random tokens from one generator seeded
    by the seed, the cross-entropy of every position but the first against the token before, ``fit``'s Adam."""
    ours = tiny_model()
    history = train_previous_token_lm(ours, max_steps=5, seed=7, vocab_size=11, length=12, batch_size=4, warmup=2)
    theirs = tiny_model()
    draws = torch.Generator().manual_seed(7)

    def step_loss(model, step):
        tokens = torch.randint(11, (4, 12), generator=draws)
        logits, _ = model(tokens)
        return F.cross_entropy(logits[:, 1:].reshape(-1, 11), tokens[:, :-1].reshape(-1))

    fit(theirs, step_loss, max_steps=5, lr=3e-3, warmup=2, progress=False)
    assert len(history.steps) == 5 and not ours.training
    for (key, a), b in zip(ours.state_dict().items(), theirs.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=key)


def test_previous_token_accuracy_counts_the_positions_by_hand():
    model = tiny_model("rotary")
    tokens = torch.randint(11, (3, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits, _ = model.eval()(tokens)
    hits = [int(logits[b, t].argmax()) == int(tokens[b, t - 1]) for b in range(3) for t in range(1, 9)]
    model.train()
    assert previous_token_accuracy(model, tokens) == pytest.approx(sum(hits) / len(hits))
    assert model.training  # the model's mode is given back


class Echo(torch.nn.Module):
    """Outputs, at every position, the token one position earlier: accuracy 1 (position 0 copies itself)."""

    def forward(self, tokens):
        previous = torch.cat([tokens[:, :1], tokens[:, :-1]], dim=1)
        return F.one_hot(previous, 5).float(), None


def test_previous_token_accuracy_of_a_perfect_model_is_one_and_bad_inputs_are_named():
    tokens = torch.tensor([[0, 1, 2, 3, 4], [4, 4, 0, 1, 1]])
    assert previous_token_accuracy(Echo(), tokens) == 1.0
    for bad in (torch.zeros(5, dtype=torch.long), torch.zeros(2, 1, dtype=torch.long), tokens.float()):
        with pytest.raises(ValueError, match="tokens must be"):
            previous_token_accuracy(Echo(), bad)
    with pytest.raises(ValueError, match="length must be"):
        train_previous_token_lm(tiny_model(), max_steps=1, seed=0, vocab_size=11, length=1)


def test_the_extrapolation_benchmark_runs_and_stores_its_numbers(tmp_path):
    out = tmp_path / "extrapolation.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "bench_modern_attention.py"), "--extrapolation", "--quick",
               "--device", "cpu", "--copy-blocks", "1", "2", "--copy-heads", "4", "8", "--schemes", "rotary", "alibi",
               "--out", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    record = json.loads(out.read_text())
    assert record["benchmark"] == "modern_attention_extrapolation" and record["seeds"] == [0]
    assert list(record["accuracy"]) == ["1", "2"]  # blocks -> heads -> scheme -> test length -> per seed
    for by_heads in record["accuracy"].values():
        assert list(by_heads) == ["4", "8"]
        for schemes in by_heads.values():
            assert list(schemes) == ["rotary", "alibi"]
            for by_length in schemes.values():
                assert list(by_length) == ["64", "128", "256", "512"]
                assert all(len(v) == 1 and 0 <= v[0] <= 1 for v in by_length.values())
    assert "--extrapolation" in record["command"]


def test_the_window_benchmark_runs_and_stores_its_numbers(tmp_path):
    out = tmp_path / "windows.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "lm_windows.py"), "--quick", "--device", "cpu",
               "--out", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    record = json.loads(out.read_text())
    assert record["benchmark"] == "lm_windows" and [r["seed"] for r in record["runs"]] == [0]
    assert set(record["runs"][0]["test_bits_per_character"]) == {str(w) for w in record["windows"]}
    assert 0 < record["ngram_test_bits_per_character"] < 20
    assert "difference" in result.stdout
