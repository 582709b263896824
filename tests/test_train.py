"""The training loop: the masked loss, the schedule, a short run, and checkpoints."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
import torch
from torch.nn import functional as F

from attn_utils.checkpoints import load_checkpoint, save_checkpoint
from attn_utils.data import load_translation_data
from attn_utils.losses import sequence_loss
from attn_utils.plot import plot_history
from attn_utils.seq2seq import make_seq2seq
from attn_utils.trainers import train_seq2seq, trim_batch
from attn_utils.training_loop import History

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def grammar():
    return load_translation_data("grammar", num_train=256, verbose=False)


def test_loss_ignores_padding():
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 7)
    labels = torch.tensor([[4, 5, 2, 0], [6, 2, 0, 0]])
    loss = sequence_loss(logits, labels, pad=0, label_smoothing=0.1)
    # By hand: the mean of the 5 real positions' (smoothed) cross-entropies.
    real = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]
    by_hand = sum(F.cross_entropy(logits[b, t], labels[b, t], label_smoothing=0.1) for b, t in real) / 5
    torch.testing.assert_close(loss, by_hand)
    # Whatever the logits say at padded positions, the loss stays the same.
    changed = logits.clone()
    changed[0, 3], changed[1, 2:] = 100.0, -50.0
    torch.testing.assert_close(sequence_loss(changed, labels, pad=0, label_smoothing=0.1), loss)
    # With valid lengths, the labels at padded positions do not count either.
    valid = torch.tensor([3, 2])
    relabelled = labels.clone()
    relabelled[0, 3], relabelled[1, 2:] = 5, 6
    torch.testing.assert_close(sequence_loss(logits, relabelled, valid, label_smoothing=0.1), loss)
    with pytest.raises(ValueError, match="no target token"):
        sequence_loss(logits, torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="expected logits"):
        sequence_loss(logits, labels[:, :3])


def test_model_loss_ignores_padded_decoder_inputs():
    """Teacher forcing with a causal decoder: inputs at padded positions cannot change the loss."""
    torch.manual_seed(0)
    model = make_seq2seq(10, 9, 8, 16, 2)
    src, valid = torch.randint(4, 10, (2, 5)), torch.tensor([5, 5])
    dec_in = torch.tensor([[1, 4, 5, 6], [1, 7, 0, 0]])
    labels = torch.tensor([[4, 5, 6, 2], [7, 2, 0, 0]])
    loss = sequence_loss(model(src, dec_in, valid), labels)
    dec_in[1, 2:] = torch.tensor([8, 3])
    torch.testing.assert_close(sequence_loss(model(src, dec_in, valid), labels), loss)


def test_trim_batch_drops_padding_columns():
    src = torch.tensor([[4, 5, 2, 0, 0], [6, 2, 0, 0, 0]])
    dec = torch.tensor([[1, 7, 8, 0, 0], [1, 9, 0, 0, 0]])
    label = torch.tensor([[7, 8, 2, 0, 0], [9, 2, 0, 0, 0]])
    s, d, v, lab = trim_batch((src, dec, torch.tensor([3, 2]), label), pad=0)
    assert s.tolist() == [[4, 5, 2], [6, 2, 0]] and d.shape == lab.shape == (2, 3)


def test_short_training_run_lowers_the_loss(grammar):
    torch.manual_seed(0)
    model = make_seq2seq(len(grammar.src_vocab), len(grammar.tgt_vocab), 16, 32, 1)
    history = train_seq2seq(model, grammar, lr=1e-2, max_steps=40, batch_size=32, warmup=5, eval_points=2,
                            progress=False)
    assert history.steps == list(range(1, 41)) and len(history.loss) == 40
    assert sum(history.loss[-5:]) / 5 < sum(history.loss[:5]) / 5 - 0.5
    assert history.eval_steps == [20, 40]
    assert all(0.0 <= b <= 100.0 for b in history.evals["val_bleu"])
    # Warm-up to step 5, on a line falling to 0 at step 40: min(5 / 5, 1 - 4 / 40) at step 5.
    assert history.lr[4] == pytest.approx(1e-2 * 0.9) and history.lr[-1] == pytest.approx(1e-2 / 40)
    assert sum(history.metrics["tokens"]) > 0 and history.tokens_per_second > 0
    assert "40 steps" in history.summary()
    assert len(plot_history(history).axes) == 2


def test_time_budget_stops_training(grammar, monkeypatch):
    """``time_budget`` reaches ``fit``'s clock: on a clock that moves 1/8 s at each reading (a step reads it at its
    start and end), a budget of 1/2 s is exactly 4 steps. Deterministic, unlike a wall-clock bound on a shared
    machine."""
    from types import SimpleNamespace

    from attn_utils import training_loop

    readings = iter(range(10_000))
    monkeypatch.setattr(training_loop, "time", SimpleNamespace(perf_counter=lambda: next(readings) / 8))
    model = make_seq2seq(len(grammar.src_vocab), len(grammar.tgt_vocab), 8, 8, 1)
    history = train_seq2seq(model, grammar, time_budget=0.5, batch_size=8, eval_points=0, progress=False)
    assert history.steps == [1, 2, 3, 4] and history.train_seconds == 0.5 and history.evals == {}


def test_bad_budgets_raise_value_errors(grammar):
    model = make_seq2seq(len(grammar.src_vocab), len(grammar.tgt_vocab), 8, 8, 1)
    with pytest.raises(ValueError, match="budget"):
        train_seq2seq(model, grammar)
    with pytest.raises(ValueError, match="max_steps"):
        train_seq2seq(model, grammar, max_steps=0)
    with pytest.raises(ValueError, match="time_budget"):
        train_seq2seq(model, grammar, time_budget=-1)


def test_checkpoint_round_trip(tmp_path, grammar):
    torch.manual_seed(0)
    model = make_seq2seq(len(grammar.src_vocab), len(grammar.tgt_vocab), 8, 16, 2)
    history = History(steps=[1, 2], loss=[3.0, 2.5], lr=[1e-3, 2e-3], seconds=[0.1, 0.2], metrics={"tokens": [4, 6]},
                      eval_steps=[2], evals={"val_bleu": [1.5]}, train_seconds=0.2)
    path = tmp_path / "model.pt"
    save_checkpoint(path, model, history, extra={"note": "test"})
    raw = torch.load(path, weights_only=True)  # plain tensors and a JSON string only
    assert json.loads(raw["record"])["config"]["num_layers"] == 2
    restored, record = load_checkpoint(path)  # rebuilt from the stored config
    src, dec = torch.randint(4, 10, (3, 5)), torch.randint(4, 10, (3, 4))
    model.eval()
    assert torch.equal(restored(src, dec, torch.tensor([5, 3, 1])), model(src, dec, torch.tensor([5, 3, 1])))
    assert record["history"] == history and record["extra"] == {"note": "test"}
    other = make_seq2seq(len(grammar.src_vocab), len(grammar.tgt_vocab), 8, 16, 2)
    same, _ = load_checkpoint(path, other)  # or loaded into a model you built
    assert same is other and torch.equal(other(src, dec), model(src, dec))
    with pytest.raises(ValueError, match="JSON"):
        save_checkpoint(tmp_path / "bad.pt", model, extra={"x": object()})
    assert math.isfinite(record["history"].tokens_per_second)


def _small_model(hiddens=8):
    torch.manual_seed(0)
    return make_seq2seq(10, 10, 8, hiddens, 1)


EXPECTED = r"expected a checkpoint written by save_checkpoint \(.+\), found "


def test_an_interrupted_save_keeps_the_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "model.pt"
    model = _small_model()
    save_checkpoint(path, model)
    before = path.read_bytes()
    real_save = torch.save

    def fails_half_way(obj, f, *args, **kwargs):
        real_save(obj, f, *args, **kwargs)
        f.truncate(f.tell() // 2)
        raise KeyboardInterrupt  # the reader pressed stop, or the disk filled up

    monkeypatch.setattr(torch, "save", fails_half_way)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, _small_model(16))
    monkeypatch.undo()
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["model.pt"]  # no temporary left
    restored, _ = load_checkpoint(path)
    assert restored.config == model.config
    save_checkpoint(path, _small_model(16))  # a save that succeeds replaces the file
    assert load_checkpoint(path)[0].config["num_hiddens"] == 16 and len(list(tmp_path.iterdir())) == 1


def test_a_model_without_a_config_is_refused_when_saved(tmp_path):
    path = tmp_path / "linear.pt"
    with pytest.raises(ValueError, match=r"cannot save Linear to .*linear.pt: load_checkpoint\(path\) rebuilds a model "
                                         r"from its config, and this model has no config"):
        save_checkpoint(path, torch.nn.Linear(2, 3))
    assert not path.exists()
    save_checkpoint(path, torch.nn.Linear(2, 3), require_config=False)  # allowed, if you load it into a model
    loaded, record = load_checkpoint(path, torch.nn.Linear(2, 3))
    assert isinstance(loaded, torch.nn.Linear) and record["config"] == {}
    with pytest.raises(ValueError, match=r"linear.pt: expected a checkpoint with a config that rebuilds its model"):
        load_checkpoint(path)


def test_an_empty_file_is_named_and_refused(tmp_path):
    path = tmp_path / "empty.pt"
    path.write_bytes(b"")
    with pytest.raises(ValueError, match=rf"empty.pt: {EXPECTED}an empty file \(0 bytes\)"):
        load_checkpoint(path, _small_model())


def test_a_raw_state_dict_is_named_and_refused(tmp_path):
    path = tmp_path / "raw.pt"
    torch.save(_small_model().state_dict(), path)
    with pytest.raises(ValueError, match=rf"raw.pt: {EXPECTED}a raw state dict \(\d+ tensors, .*no 'record'\)"):
        load_checkpoint(path)


def test_a_truncated_file_is_named_and_refused(tmp_path):
    path = tmp_path / "cut.pt"
    save_checkpoint(path, _small_model())
    path.write_bytes(path.read_bytes()[:-200])
    with pytest.raises(ValueError, match=rf"cut.pt: {EXPECTED}a truncated or damaged torch file"):
        load_checkpoint(path)


def test_a_file_that_is_no_checkpoint_is_named_and_refused(tmp_path):
    text = tmp_path / "notes.pt"
    text.write_text("not a checkpoint\n")
    with pytest.raises(ValueError, match=rf"notes.pt: {EXPECTED}a file that is not a torch file at all"):
        load_checkpoint(text)
    other = tmp_path / "other.pt"
    torch.save({"weights": [1, 2]}, other)
    with pytest.raises(ValueError, match=rf"other.pt: {EXPECTED}a dict with the keys \['weights'\]"):
        load_checkpoint(other)
    torch.save([torch.ones(2)], other)
    with pytest.raises(ValueError, match=rf"other.pt: {EXPECTED}a list saved with torch.save"):
        load_checkpoint(other)


def test_a_checkpoint_of_another_model_is_named_and_refused(tmp_path):
    from attn_utils.transformer import make_transformer

    path = tmp_path / "rnn.pt"
    save_checkpoint(path, _small_model())
    transformer = make_transformer(10, 10, num_hiddens=8, ffn_num_hiddens=16, num_heads=2, num_blks=1)
    with pytest.raises(ValueError, match=r"rnn.pt: expected a checkpoint of a 'transformer' model \(the model given\), "
                                         r"found a checkpoint of a 'seq2seq' model"):
        load_checkpoint(path, transformer)
    wrong_size = (r"rnn.pt: expected weights that fit the EncoderDecoder given .*'num_hiddens': 16.*"
                  r"found weights saved from the config .*'num_hiddens': 8.*size mismatch")
    with pytest.raises(ValueError, match=wrong_size):
        load_checkpoint(path, _small_model(16))


def test_an_empty_training_set_is_refused_not_a_hang(grammar):
    with pytest.raises(ValueError, match=r"the training set is empty: num_train=0 of the [\d,]+ pairs of 'grammar'"):
        load_translation_data("grammar", num_train=0, verbose=False)
    empty = replace(grammar, split=replace(grammar.split, train=[]), _cache={})
    model = make_seq2seq(len(grammar.src_vocab), len(grammar.tgt_vocab), 8, 16, 1)
    with pytest.raises(ValueError, match="the training set is empty: grammar: train 0"):
        train_seq2seq(model, empty, max_steps=3, eval_points=0, progress=False)


def test_a_huge_learning_rate_stops_with_a_clear_error(grammar):
    torch.manual_seed(0)
    model = make_seq2seq(len(grammar.src_vocab), len(grammar.tgt_vocab), 8, 16, 1)
    with pytest.raises(RuntimeError, match=r"training diverged: the loss rose from .* lower the learning rate "
                                           r"\(got lr=1000\)"):
        train_seq2seq(model, grammar, lr=1e3, max_steps=60, batch_size=32, eval_points=0, progress=False)


# --- bad inputs to train_seq2seq and save_checkpoint (issue 37) --------------------------------------------------


@pytest.mark.parametrize("side", ["source", "target"])
def test_a_model_built_for_a_smaller_vocabulary_is_refused_before_training(grammar, side, capsys):
    """Before: an IndexError from inside nn.Embedding or the loss (a device-side assert on a GPU), at the first
    batch that held a token past the model's vocabulary, possibly many steps into training."""
    V_src, V_tgt = len(grammar.src_vocab), len(grammar.tgt_vocab)
    sizes = (V_src - 1, V_tgt) if side == "source" else (V_src, V_tgt - 1)
    model = make_seq2seq(*sizes, 8, 8, 1)
    before = [p.detach().clone() for p in model.parameters()]
    size = sizes[0] if side == "source" else sizes[1]
    needed = V_src if side == "source" else V_tgt
    key = "src_vocab_size" if side == "source" else "tgt_vocab_size"
    with pytest.raises(ValueError, match=rf"the model was built for a {side} vocabulary of {size} tokens "
                                         rf"\(model.config\['{key}'\]\), but the data's {side} vocabulary has "
                                         rf"{needed} \(grammar: .*len\(data.src_vocab\) and len\(data.tgt_vocab\)"):
        train_seq2seq(model, grammar, max_steps=2, batch_size=8, eval_points=0)
    assert capsys.readouterr().out == ""  # not even the budget line: nothing ran
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before))


def test_a_model_without_a_config_is_checked_by_its_embeddings_and_logits(grammar):
    V_src, V_tgt = len(grammar.src_vocab), len(grammar.tgt_vocab)
    small = make_seq2seq(V_src, V_tgt - 1, 8, 8, 1)
    small.config = {}  # a hand-built model: only its layers say what it was built for
    with pytest.raises(ValueError, match=rf"target vocabulary of {V_tgt - 1} tokens \(model.decoder.embedding\)"):
        train_seq2seq(small, grammar, max_steps=2, batch_size=8, eval_points=0, progress=False)
    narrow = make_seq2seq(V_src, V_tgt, 8, 8, 1)
    narrow.config = {}
    narrow.decoder.dense = torch.nn.Linear(8, V_tgt - 1)  # an output layer one token short
    with pytest.raises(ValueError, match=rf"logits \(batch, steps, vocab\) over at least the data's {V_tgt} target "
                                         rf"tokens, got shape \(\d+, \d+, {V_tgt - 1}\)"):
        train_seq2seq(narrow, grammar, max_steps=2, batch_size=8, eval_points=0, progress=False)
    larger = make_seq2seq(V_src + 5, V_tgt + 5, 8, 8, 1)  # room to spare is fine
    assert len(train_seq2seq(larger, grammar, max_steps=1, batch_size=8, eval_points=0, progress=False).steps) == 1


@pytest.mark.parametrize("kwargs, message", [
    ({"max_steps": 2, "clip": 0}, r"clip must be a positive gradient norm, or None for no clipping, got 0 \(use None"),
    ({"max_steps": 2, "clip": -1.0}, "clip must be a positive gradient norm"),
    ({"max_steps": 2, "clip": float("nan")}, "clip must be a positive gradient norm, or None for no clipping, got nan"),
    ({"time_budget": True}, "time_budget must be a positive number of seconds, got True"),
    ({"time_budget": float("inf")}, "a run needs a finite bound: time_budget=inf with max_steps=None"),
    ({"max_steps": 2, "batch_size": 0}, "batch_size must be a positive integer, got 0"),
    ({"max_steps": 2, "batch_size": True}, "batch_size must be a positive integer, got True"),
    ({"max_steps": 2, "label_smoothing": 1.5}, r"label_smoothing must be a number in \[0, 1\], got 1.5"),
    ({"max_steps": 2, "eval_points": 2, "eval_split": "dev"}, r"split must be one of \('train', 'val', 'test'\)"),
])
def test_train_seq2seq_names_bad_settings_before_training(grammar, kwargs, message, capsys):
    """Before: clip=0 trained without clipping, -1 and NaN trained on flipped or NaN gradients (NaN blamed the
    learning rate), time_budget=True trained for a second, inf never returned, batch_size=0 and a bad eval_split
    failed only once training had started."""
    model = make_seq2seq(len(grammar.src_vocab), len(grammar.tgt_vocab), 8, 8, 1)
    with pytest.raises(ValueError, match=message):
        train_seq2seq(model, grammar, **{"eval_points": 0, **kwargs})
    assert "steps" not in capsys.readouterr().out  # refused before the budget line


def test_an_empty_validation_split_is_named_before_training(grammar):
    no_val = replace(grammar, split=replace(grammar.split, val=[]), _cache={})
    model = make_seq2seq(len(grammar.src_vocab), len(grammar.tgt_vocab), 8, 8, 1)
    with pytest.raises(ValueError, match=r"eval_split 'val' is empty \(grammar: train 256, val 0, .*pass "
                                         r"eval_points=0"):
        train_seq2seq(model, no_val, max_steps=2, batch_size=8, eval_points=2, progress=False)
    assert len(train_seq2seq(model, no_val, max_steps=1, batch_size=8, eval_points=0, progress=False).steps) == 1


def test_a_checkpoint_into_a_missing_folder_creates_it(tmp_path):
    """Before: FileNotFoundError naming a temporary file ('.model.pt.abc123.tmp') the reader never asked for."""
    model = _small_model()
    path = tmp_path / "runs" / "chapter4" / "model.pt"
    save_checkpoint(path, model)
    restored, _ = load_checkpoint(path)
    assert all(torch.equal(a, b) for a, b in zip(restored.state_dict().values(), model.state_dict().values()))
    assert sorted(p.name for p in path.parent.iterdir()) == ["model.pt"]  # no temporary file left behind


def test_a_checkpoint_path_that_is_a_folder_or_under_a_file_is_named(tmp_path):
    model = _small_model()
    with pytest.raises(ValueError, match=rf"cannot save to {tmp_path}: it is a folder; give a file name"):
        save_checkpoint(tmp_path, model)
    (tmp_path / "notes.txt").write_text("a file")
    with pytest.raises(ValueError, match=r"cannot save to .*notes.txt/model.pt: .*notes.txt is a file, not a folder"):
        save_checkpoint(tmp_path / "notes.txt" / "model.pt", model)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_save_checkpoint_names_arguments_of_the_wrong_kind(tmp_path):
    model = _small_model()
    with pytest.raises(ValueError, match="model must be a torch.nn.Module, got OrderedDict"):
        save_checkpoint(tmp_path / "m.pt", model.state_dict())
    with pytest.raises(ValueError, match="history must be the History that fit or a trainer returned, or None, "
                                         "got dict"):
        save_checkpoint(tmp_path / "m.pt", model, {"loss": [1.0]})
    with pytest.raises(ValueError, match="extra must be a dict of JSON-able values, or None, got list"):
        save_checkpoint(tmp_path / "m.pt", model, None, ["note"])
    assert not any(tmp_path.iterdir())


def test_translating_an_empty_split_or_with_no_batch_is_named(grammar):
    """Before: BLEU of an empty split failed in corpus_bleu's words ('needs at least one hypothesis'), naming no
    split; translate(batch_size=0) failed in range()'s."""
    from attn_utils.evaluate import evaluate_bleu, translate

    model = make_seq2seq(len(grammar.src_vocab), len(grammar.tgt_vocab), 8, 8, 1)
    no_test = replace(grammar, split=replace(grammar.split, test=[]), _cache={})
    with pytest.raises(ValueError, match=r"the 'test' split is empty \(grammar: train 256, val 250, test 0"):
        evaluate_bleu(model, no_test, "test")
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got 0"):
        translate(model, ["a cat sleeps ."], grammar, batch_size=0)
