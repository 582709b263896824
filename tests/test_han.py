"""Hierarchical attention networks (attn_utils.han); the generated reviews are tested in test_data_reviews.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from benchmark_modules import load_benchmark

from attn_utils.data.reviews import make_review_data
from attn_utils.evaluate import accuracy
from attn_utils.han import FlatDocumentClassifier, HierarchicalAttentionNetwork, display_weights, pool_words
from attn_utils.tolerance import assert_close
from attn_utils.trainers import train_classifier, train_seeds

ROOT = Path(__file__).resolve().parents[1]

# ----------------------------------------------------------------------------------------------
# The models
# ----------------------------------------------------------------------------------------------


def _batch(seed=0):
    """3 documents of 4, 2 and 3 sentences, padded to 5 sentences of 6 words; ids from 2..19."""
    g = torch.Generator().manual_seed(seed)
    sentence_lens = torch.tensor([[6, 2, 4, 1, 0], [3, 5, 0, 0, 0], [1, 6, 2, 0, 0]])
    doc_lens = torch.tensor([4, 2, 3])
    ids = torch.randint(2, 20, (3, 5, 6), generator=g)
    ids = ids.masked_fill(torch.arange(6) >= sentence_lens.unsqueeze(-1), 0)
    return ids, sentence_lens, doc_lens


def _han(pooling="attention", dtype=torch.float64, seed=0):
    torch.manual_seed(seed)
    return HierarchicalAttentionNetwork(20, 5, 4, 3, 6, 3, pooling=pooling).to(dtype)


def _pool_by_hand(H, pooling_module):
    """Yang et al.'s attention on one unpadded sequence H (steps, size): u = tanh(W h + b), softmax(u . u_ctx)."""
    if pooling_module is None:
        alpha = torch.full((H.shape[0],), 1.0 / H.shape[0], dtype=H.dtype)
    else:
        u = torch.tanh(H @ pooling_module.projection.weight.T + pooling_module.projection.bias)
        alpha = torch.softmax(u @ pooling_module.query, dim=0)
    return alpha, alpha @ H


@torch.no_grad()
def _han_by_hand(model, ids, sentence_lens, doc_lens):
    """nn.GRU run sentence by sentence on the unpadded words, then the attention formulas by hand."""
    batch, sentences, words = ids.shape
    logits = []
    word_weights = torch.zeros(batch, sentences, words, dtype=torch.float64)
    sentence_weights = torch.zeros(batch, sentences, dtype=torch.float64)
    for n in range(batch):
        vectors = []
        for i in range(int(doc_lens[n])):
            x = model.embedding.weight[ids[n, i, :int(sentence_lens[n, i])]]  # (words, E): no padding at all
            h, _ = model.word_encoder(x.unsqueeze(0))  # (1, words, 2h)
            alpha, s = _pool_by_hand(h[0], model.word_attention)
            word_weights[n, i, :len(alpha)] = alpha
            vectors.append(s)
        h, _ = model.sentence_encoder(torch.stack(vectors).unsqueeze(0))  # (1, sentences, 2h)
        alpha, v = _pool_by_hand(h[0], model.sentence_attention)
        sentence_weights[n, :len(alpha)] = alpha
        logits.append(model.classifier(v))
    return torch.stack(logits), word_weights, sentence_weights


@pytest.mark.parametrize("pooling", ["attention", "mean"])
def test_han_matches_a_sentence_by_sentence_reference(pooling):
    model = _han(pooling)
    ids, sentence_lens, doc_lens = _batch()
    logits = model(ids, sentence_lens, doc_lens)
    want_logits, want_words, want_sentences = _han_by_hand(model, ids, sentence_lens, doc_lens)
    assert logits.shape == (3, 3)
    assert model.word_attention_weights.shape == (3, 5, 6) and model.attention_weights.shape == (3, 5)
    torch.testing.assert_close(logits, want_logits)
    torch.testing.assert_close(model.word_attention_weights, want_words)
    torch.testing.assert_close(model.attention_weights, want_sentences)


def test_padding_gets_weight_exactly_zero_and_its_values_change_nothing():
    model = _han()
    ids, sentence_lens, doc_lens = _batch()
    logits = model(ids, sentence_lens, doc_lens)
    words, sentences = model.word_attention_weights.clone(), model.attention_weights.clone()
    real_words = (torch.arange(6) < sentence_lens.unsqueeze(-1)) & (torch.arange(5) < doc_lens[:, None]).unsqueeze(-1)
    assert (words[~real_words] == 0).all() and (sentences[torch.arange(5) >= doc_lens[:, None]] == 0).all()
    torch.testing.assert_close(words.sum(-1), (sentence_lens > 0).to(torch.float64))
    torch.testing.assert_close(sentences.sum(-1), torch.ones(3, dtype=torch.float64))
    noisy = torch.where(real_words, ids, torch.randint(1, 20, ids.shape))  # any token where padding was
    noisy_lens = torch.where(torch.arange(5) < doc_lens[:, None], sentence_lens, 6)  # lengths past the end ignored
    torch.testing.assert_close(model(noisy, noisy_lens, doc_lens), logits, rtol=0, atol=1e-12)
    torch.testing.assert_close(model.word_attention_weights, words, rtol=0, atol=1e-12)
    torch.testing.assert_close(model.attention_weights, sentences, rtol=0, atol=1e-12)


def test_a_document_padded_with_sentences_equals_the_document_alone():
    model = _han()
    ids, sentence_lens, doc_lens = _batch()
    batch_logits = model(ids, sentence_lens, doc_lens)
    batch_words = model.word_attention_weights
    # document 1 (2 sentences of 3 and 5 words), alone and unpadded
    alone = model(ids[1:2, :2, :5], sentence_lens[1:2, :2], doc_lens[1:2])
    torch.testing.assert_close(alone, batch_logits[1:2])
    torch.testing.assert_close(model.word_attention_weights[0], batch_words[1, :2, :5])


def test_lengths_default_to_the_padding_and_empty_documents_give_no_nan():
    model = _han()
    ids, sentence_lens, doc_lens = _batch()
    torch.testing.assert_close(model(ids), model(ids, sentence_lens, doc_lens))
    empty = torch.zeros(2, 3, 4, dtype=torch.long)
    logits = model(empty)
    assert torch.isfinite(logits).all()
    torch.testing.assert_close(logits, model.classifier.bias.expand(2, 3))  # v = 0: only the bias is left
    assert (model.attention_weights == 0).all() and (model.word_attention_weights == 0).all()


def test_flat_classifier_matches_one_gru_over_the_concatenated_words():
    torch.manual_seed(1)
    for pooling in ("mean", "attention"):
        model = FlatDocumentClassifier(20, 5, 4, 6, 3, pooling=pooling).double()
        ids, sentence_lens, doc_lens = _batch()
        logits = model(ids, sentence_lens, doc_lens)
        assert model.attention_weights.shape == (3, 30)
        with torch.no_grad():
            for n in range(3):
                words = torch.cat([ids[n, i, :int(sentence_lens[n, i])] for i in range(int(doc_lens[n]))])
                h, _ = model.encoder(model.embedding.weight[words].unsqueeze(0))  # (1, words, 2h)
                alpha, v = _pool_by_hand(h[0], model.attention)
                torch.testing.assert_close(logits[n], model.classifier(v))
                torch.testing.assert_close(model.attention_weights[n, :len(words)], alpha)
                assert (model.attention_weights[n, len(words):] == 0).all()


def test_pool_words_and_display_weights():
    torch.manual_seed(2)
    H = torch.randn(2, 3, 4, 5)
    lens = torch.tensor([[4, 1, 0], [2, 0, 0]])
    s, w = pool_words(None, H, lens)
    torch.testing.assert_close(s[0, 0], H[0, 0].mean(0))
    torch.testing.assert_close(s[1, 0], H[1, 0, :2].mean(0))
    assert (s[0, 2] == 0).all() and (w[0, 2] == 0).all()
    shown = display_weights(torch.tensor([0.64, 0.36]), torch.tensor([[0.5, 0.5], [1.0, 0.0]]))
    torch.testing.assert_close(shown, torch.tensor([[0.4, 0.4], [0.6, 0.0]]))


def test_bad_input_is_named():
    model = _han()
    ids, sentence_lens, doc_lens = _batch()
    with pytest.raises(ValueError, match=r"token ids of shape \(batch, sentences, words\), got Tensor \(3, 30\)"):
        model(ids.reshape(3, 30))
    with pytest.raises(ValueError, match="integer token ids"):
        model(ids.float())
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 20\), got 0..25"):
        model(ids.masked_fill(ids == ids.max(), 25))
    with pytest.raises(ValueError, match=r"sentence_lens as integers of shape \(3, 5\).*got Tensor \(3, 4\)"):
        model(ids, sentence_lens[:, :4], doc_lens)
    with pytest.raises(ValueError, match=r"sentence_lens must lie in \[0, 6\], got 0..7"):
        model(ids, sentence_lens.masked_fill(sentence_lens == 6, 7), doc_lens)
    with pytest.raises(ValueError, match=r"doc_lens must lie in \[0, 5\], got 2..6"):
        model(ids, sentence_lens, torch.tensor([6, 2, 3]))
    with pytest.raises(ValueError, match="pooling must be one of"):
        HierarchicalAttentionNetwork(20, 5, 4, 3, 6, 3, pooling="max")
    with pytest.raises(ValueError, match="word weights"):
        display_weights(torch.ones(2, 3), torch.ones(2, 4, 5))


def test_overfits_32_documents(one_thread):
    data = make_review_data(32, 8, 8, seed=0)
    torch.manual_seed(0)
    model = HierarchicalAttentionNetwork(len(data.vocab), 16, 16, 16, 16, 2)
    train_classifier(model, data.train.inputs, data.train.labels, max_steps=60, batch_size=32, lr=2e-2, progress=False)
    assert accuracy(model, data.train.inputs, data.train.labels) == 1.0


def test_any_device(any_device):
    model = _han(dtype=torch.float32)
    ids, sentence_lens, doc_lens = _batch()
    want = model(ids, sentence_lens, doc_lens)
    want_words = model.word_attention_weights
    model.to(any_device)
    got = model(ids.to(any_device), sentence_lens.to(any_device), doc_lens.to(any_device))
    assert got.device.type == any_device.type and model.attention_weights.device.type == any_device.type
    # cuDNN's recurrent kernels run float32 in TF32 on CUDA by default: the policy's tolerance follows
    assert_close(got, want)
    assert_close(model.word_attention_weights, want_words)
    flat = FlatDocumentClassifier(20, 5, 4, 6, 3, pooling="attention").to(any_device)
    assert flat(ids.to(any_device)).device.type == any_device.type


# ----------------------------------------------------------------------------------------------
# benchmarks/han_choices.py: section 7.3's classifiers over seeds and learning rates
# ----------------------------------------------------------------------------------------------

def test_the_choice_of_learning_rate_is_the_best_mean_validation_accuracy():
    choose_lr = load_benchmark("han_choices").choose_lr
    def runs_of(*accuracies):
        return [{"seed": seed, "val_accuracy": a} for seed, a in enumerate(accuracies)]

    runs = {1e-3: runs_of(0.9, 0.5), 5e-3: runs_of(0.6, 0.9, 0.0), 1e-2: runs_of(0.8, 0.6)}  # means 0.7, -, 0.7
    assert choose_lr(runs, [0, 1]) == 5e-3  # 0.75 over seeds 0 and 1; seed 2 is not counted
    assert choose_lr(runs, [0, 1, 2]) == 1e-3  # 0.5 for 5e-3 now; 1e-3 and 1e-2 tie, the first wins


def test_the_choices_benchmark_runs_the_sections_code_path_and_stores_its_numbers(tmp_path, one_thread):
    out = tmp_path / "choices.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "han_choices.py"), "--quick", "--out", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    record = json.loads(out.read_text())
    models = ["HAN", "HN-AVE", "flat, attention", "flat, mean"]
    assert list(record["sweep"]) == models and set(record["chosen_lr"]) == set(models)
    for name in models:
        chosen = record["chosen_lr"][name]
        assert chosen in record["lrs"]
        for lr in record["lrs"]:
            seeds = [r["seed"] for r in record["sweep"][name][f"{lr:g}"]["runs"]]
            assert seeds == (record["seeds"] if lr == chosen else record["sweep_seeds"])
    assert list(record["explanation"]) == ["20 steps", "120 reviews, 20 steps"]
    for condition in record["explanation"].values():
        for name in ("HAN", "HN-AVE"):
            runs = condition[name]["runs"]
            assert [r["seed"] for r in runs] == record["seeds"]
            assert all(r["steps"] == 20 and r["val_curve"]["steps"] == [10, 20] for r in runs)
    assert "hit_rate" in record["sweep"]["HAN"]["0.005"]["runs"][0]
    # the stored run is section 7.3's: train_seeds with its data, sizes and options gives the same numbers
    data = make_review_data(1200, 40, 40, seed=0, rare_prob=0.5)
    stored = record["sweep"]["HAN"]["0.005"]["runs"][0]
    run = train_seeds(lambda: HierarchicalAttentionNetwork(len(data.vocab), 32, 32, 32, 32, 2), data.train.inputs,
                      data.train.labels, seeds=[0], progress=False, max_steps=10, batch_size=64, lr=5e-3,
                      val=(data.val.inputs, data.val.labels), eval_every=10)
    assert stored["test_accuracy"] == accuracy(run.models[0], data.test.inputs, data.test.labels)
    assert stored["val_accuracy"] == run.histories[0].evals["val_accuracy"][-1]
    # --resume trains nothing again
    again = subprocess.run(command + ["--resume"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert again.returncode == 0 and ", seed " not in again.stdout
    assert json.loads(out.read_text())["sweep"] == record["sweep"]
