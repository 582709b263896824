"""Section 11.1's training recipes and gap draws (``trainers.train_causal_text_lm``, ``train_masked_text_lm``,
``evaluate.draw_gaps``, ``fill_gaps``) against the loops written out by hand, and the benchmark that uses them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

import attn_utils
from attn_utils import IGNORE_INDEX, CausalLanguageModel, MaskedLanguageModel, mask_tokens, train_language_model
from attn_utils.data.windows import random_windows
from attn_utils.evaluate import draw_gaps, fill_gaps, hidden_token_scores
from attn_utils.trainers import train_causal_text_lm, train_masked_text_lm

ROOT = Path(__file__).resolve().parents[1]
V, BOS, MASK, FIRST = 60, 1, 2, 3


@pytest.fixture(scope="module")
def stream():
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(FIRST, V, (2000,), generator=generator)
    tokens[::250] = BOS
    return tokens


def same_weights(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_causal_recipe_is_the_loop_written_out(stream):
    def by_hand(seed):
        attn_utils.set_seed(seed)
        model = CausalLanguageModel(V, 16, 32, 2, 1, position_scheme="rotary")
        draws = torch.Generator().manual_seed(seed)

        def step_loss(model, step):
            batch = random_windows(stream, 4, 12, draws)  # (4, 13)
            logits, _ = model(batch[:, :-1])
            return F.cross_entropy(logits.reshape(-1, V), batch[:, 1:].reshape(-1))

        history = train_language_model(model, step_loss, max_steps=4, lr=3e-3, warmup=2, optimizer="adamw",
                                       weight_decay=0.1, progress=False)
        return model, history

    attn_utils.set_seed(3)
    model = CausalLanguageModel(V, 16, 32, 2, 1, position_scheme="rotary")
    history = train_causal_text_lm(model, stream, context=12, max_steps=4, seed=3, pad=0, batch_size=4, warmup=2)
    reference, reference_history = by_hand(3)
    assert history.loss == reference_history.loss
    assert same_weights(model, reference)
    assert not model.training


def test_masked_recipe_is_the_loop_written_out(stream):
    def by_hand(seed, rate):
        attn_utils.set_seed(seed)
        model = MaskedLanguageModel(V, 16, 32, 2, 1, position_scheme="rotary")
        draws = torch.Generator().manual_seed(seed)

        def step_loss(model, step):
            windows = random_windows(stream, 4, 11, draws)  # (4, 12)
            inputs, labels = mask_tokens(windows, windows != BOS, MASK, V, random_low=FIRST, mask_prob=rate,
                                         generator=draws)
            logits = model(inputs)  # (4, 12, V): every position, then only the chosen ones count
            return F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), ignore_index=IGNORE_INDEX)

        return train_language_model(model, step_loss, max_steps=4, lr=5e-3, warmup=2, optimizer="adamw",
                                    weight_decay=0.1, progress=False)

    attn_utils.set_seed(4)
    model = MaskedLanguageModel(V, 16, 32, 2, 1, position_scheme="rotary")
    history = train_masked_text_lm(model, stream, context=12, max_steps=4, seed=4, mask_id=MASK, vocab_size=V,
                                   first_token=FIRST, keep=[BOS], mask_rate=0.4, batch_size=4, warmup=2)
    torch.testing.assert_close(torch.tensor(history.loss), torch.tensor(by_hand(4, 0.4).loss), rtol=1e-5, atol=1e-6)
    other_rate = train_masked_text_lm(MaskedLanguageModel(V, 16, 32, 2, 1), stream, context=12, max_steps=2, seed=4,
                                      mask_id=MASK, vocab_size=V, first_token=FIRST, keep=[BOS], mask_rate=0.15,
                                      batch_size=4, warmup=2)
    assert other_rate.loss[0] != history.loss[0]  # the rate reaches the masks


def test_draw_gaps_are_uniform_over_the_tokens_and_never_bos():
    short, long = torch.tensor([BOS, 5]), torch.cat([torch.tensor([BOS]), torch.arange(FIRST, FIRST + 99)])
    gaps = draw_gaps([short, long], 4000, seed=1)
    assert gaps == draw_gaps([short, long], 4000, seed=1)
    assert gaps != draw_gaps([short, long], 4000, seed=2)
    assert all(p == 1 for c, p in gaps if c == 0)  # the short text has one token after <bos>
    in_long = [p for c, p in gaps if c == 1]
    assert min(in_long) == 1 and max(in_long) == 99
    share_short = 1 - len(in_long) / len(gaps)  # 1 token in 100: expected 0.01, standard error 0.0016
    assert abs(share_short - 0.01) < 0.006
    counts = torch.bincount(torch.tensor(in_long), minlength=100)[1:]
    assert counts.min() > 10 and counts.max() < 75  # expected 39.6 per position


@pytest.mark.parametrize("bad, message", [
    (dict(count=0), "count"),
    (dict(sequences=[torch.tensor([BOS])]), "at least one token"),
    (dict(sequences=[]), "at least one token"),
])
def test_draw_gaps_refuses_what_it_cannot_draw(bad, message):
    arguments = dict(sequences=[torch.tensor([BOS, 4, 5])], count=3, seed=0) | bad
    with pytest.raises(ValueError, match=message):
        draw_gaps(**arguments)


def test_fill_gaps_is_hidden_token_scores_per_text(stream):
    attn_utils.set_seed(0)
    model = MaskedLanguageModel(V, 16, 32, 2, 1).eval()
    texts = [stream[:300], stream[250:700], stream[1000:1100]]
    gaps = draw_gaps(texts, 40, seed=5)
    guesses, logprobs = fill_gaps(model, texts, gaps, 16, MASK, [0, BOS, MASK])
    for i, (c, p) in enumerate(gaps):
        guess, logprob = hidden_token_scores(model, texts[c], 16, MASK, [0, BOS, MASK], positions=[p])
        assert guesses[i] == guess[0]
        torch.testing.assert_close(logprobs[i], logprob[0], rtol=1e-5, atol=1e-6)


def test_the_choices_benchmark_runs_and_stores_its_numbers(tmp_path):
    out = tmp_path / "choices.json"
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "lm_choices.py"), "--quick", "--device", "cpu",
                             "--out", str(out)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    record = json.loads(out.read_text())
    assert set(record["causal"]) == {"rotary positions (section 11.1)", "learned positions (GPT-2)"}
    assert len(record["masked"]) == 3
    for runs in [*record["causal"].values(), *record["masked"].values()]:
        assert [r["seed"] for r in runs] == [0]
    for runs in record["causal"].values():
        assert 0 < runs[0]["test_bits_per_character"] < 20
    assert "difference" in result.stdout
