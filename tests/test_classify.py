"""The shared classifier trainers and measurements of chapter 7 (trainers, evaluate, metrics, show_text_weights)."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest
import torch
from torch import nn

matplotlib.use("Agg")

from attn_utils.device import set_seed
from attn_utils.evaluate import accuracy, predict
from attn_utils.metrics import Spread, evidence_hit_rate, spread, steps_to_reach
from attn_utils.plot import plot_seed_curves, show_text_weights
from attn_utils.trainers import SeedRuns, train_classifier, train_seeds
from attn_utils.training_loop import History


class _PickOne(nn.Module):
    """Attention over 4 positions with a learned query; the label is the class of one position."""

    def __init__(self):
        super().__init__()
        self.query = nn.Parameter(torch.full((3,), -1.0))  # starts looking at position 0
        self.attention_weights = None

    def forward(self, x):  # x: (batch, 4, 3) one-hot classes
        weights = torch.softmax(x.new_tensor([0.0, 0.0, 0.0, 0.0]) + self.query.sum() * torch.arange(4.0), -1)
        self.attention_weights = weights.expand(x.shape[0], 4)
        return 10 * (self.attention_weights.unsqueeze(-1) * x).sum(1)  # (batch, 3)


def _data(n=256, seed=0):
    g = torch.Generator().manual_seed(seed)
    classes = torch.randint(0, 3, (n, 4), generator=g)
    return (nn.functional.one_hot(classes, 3).float(),), classes[:, 3]


def test_training_learns_to_attend_to_the_deciding_position():
    inputs, labels = _data()
    model = _PickOne()
    before = accuracy(model, inputs, labels)
    history = train_classifier(model, inputs, labels, max_steps=200, batch_size=32, lr=0.1,
                               val=_data(64, seed=1), eval_every=100, progress=False)
    assert before < 0.45
    assert history.eval_steps == [100, 200] and len(history.loss) == 200
    # Not a knife edge: over 8 seeds (data, validation data and batch order) validation accuracy was already 1.0 at
    # step 100, and after 200 steps the weight on position 3 was 0.975-0.979 (the label is read right above ~0.5).
    assert history.evals["val_accuracy"][-1] == 1.0
    _, weights = predict(model, inputs)
    assert weights.shape == (256, 4)
    assert evidence_hit_rate(weights, torch.full((256,), 3)) == 1.0
    assert evidence_hit_rate(weights, torch.zeros(256, dtype=torch.long)) == 0.0


def test_same_seed_same_model():
    inputs, labels = _data()
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        model = _PickOne()
        train_classifier(model, inputs, labels, max_steps=20, batch_size=16, lr=0.05, seed=3, progress=False)
        runs.append(model.query.detach().clone())
    torch.testing.assert_close(runs[0], runs[1], rtol=0, atol=0)


def test_model_objective_is_minimised_and_cross_entropy_recorded():
    class Objective(_PickOne):
        def training_loss(self, x, labels):
            logits = self(x)
            ce = nn.functional.cross_entropy(logits, labels)
            return 0 * ce + (self.query - 1.0).pow(2).sum(), ce.detach(), logits

    inputs, labels = _data()
    model = Objective()
    history = train_classifier(model, inputs, labels, max_steps=300, batch_size=32, lr=0.05, progress=False)
    torch.testing.assert_close(model.query.detach(), torch.ones(3), atol=1e-2, rtol=0)
    first = nn.functional.cross_entropy(_PickOne()(inputs[0][:32]), labels[:32]).item()
    assert history.loss[0] == pytest.approx(first, rel=0.5)


def test_val_evidence_records_the_hit_rate_and_leaves_training_alone():
    """_PickOne's weights are the same for every example: position 0 first (query -1, -1, -1), position 3 once
    trained. With the evidence on position 3 for 16 of 64 validation examples and on 0 for the rest, the hit rate
    is 48 / 64 = 0.75 while position 0 has the largest weight and 16 / 64 = 0.25 once position 3 has it."""
    val_inputs, val_labels = _data(64, seed=1)
    evidence = torch.cat([torch.full((16,), 3), torch.zeros(48, dtype=torch.long)])
    inputs, labels = _data()
    histories = []
    for options in ({}, {"val_evidence": evidence}):
        torch.manual_seed(0)
        histories.append(train_classifier(_PickOne(), inputs, labels, max_steps=200, batch_size=32, lr=0.1,
                                          val=(val_inputs, val_labels), eval_every=100, progress=False, **options))
    plain, with_hits = histories
    assert with_hits.loss == plain.loss  # bit for bit: recording the hit rate changes no step
    assert with_hits.evals["val_accuracy"] == plain.evals["val_accuracy"] == [1.0, 1.0]
    assert with_hits.evals["val_hit_rate"] == [0.25, 0.25] and "val_hit_rate" not in plain.evals
    barely = train_classifier(_PickOne(), inputs, labels, max_steps=1, batch_size=32, lr=1e-6,
                              val=(val_inputs, val_labels), eval_every=1, val_evidence=evidence, progress=False)
    assert barely.evals["val_hit_rate"] == [0.75]


def test_val_evidence_is_checked_before_training():
    inputs, labels = _data()
    val = _data(8, seed=1)
    with pytest.raises(ValueError, match=r"val_evidence .*\(no val given\)"):
        train_classifier(_PickOne(), inputs, labels, max_steps=1, val_evidence=torch.zeros(8, dtype=torch.long),
                         progress=False)
    with pytest.raises(ValueError, match=r"one position per validation label \(8,\), got \(7,\)"):
        train_classifier(_PickOne(), inputs, labels, max_steps=1, val=val,
                         val_evidence=torch.zeros(7, dtype=torch.long), progress=False)

    class NoWeights(_PickOne):
        def forward(self, x):
            logits = super().forward(x)
            self.attention_weights = None
            return logits

    with pytest.raises(ValueError, match="keeps no attention_weights|keeps none"):
        train_classifier(NoWeights(), inputs, labels, max_steps=1, val=val, eval_every=1,
                         val_evidence=torch.zeros(8, dtype=torch.long), progress=False)


def test_evidence_hit_rate_counts_argmax_matches():
    weights = torch.tensor([[0.1, 0.7, 0.2], [0.5, 0.25, 0.25], [0.2, 0.2, 0.6], [0.4, 0.4, 0.2]])
    assert evidence_hit_rate(weights, torch.tensor([1, 0, 0, 1])) == 0.5  # ties go to the first


def test_a_model_without_parameters_predicts_on_the_device_of_its_inputs():
    class SignOfSum(nn.Module):  # no parameters: there is no model device, the inputs stay where they are
        def forward(self, x):
            return torch.stack([-x.sum(-1), x.sum(-1)], dim=-1)

    x = torch.tensor([[1.0, 2.0], [-3.0, 1.0], [0.5, 0.0]])
    predictions, weights = predict(SignOfSum(), [x], batch_size=2)
    assert predictions.tolist() == [1, 0, 1] and weights is None
    assert accuracy(SignOfSum(), [x], torch.tensor([1, 1, 1])) == pytest.approx(2 / 3)


def test_bad_input_is_named():
    inputs, labels = _data()
    with pytest.raises(ValueError, match="one row per label"):
        train_classifier(_PickOne(), (inputs[0][:10],), labels, max_steps=1, progress=False)
    with pytest.raises(ValueError, match="1-D tensor of class indices"):
        accuracy(_PickOne(), inputs, labels[:, None])
    with pytest.raises(ValueError, match=r"expected weights \(n, positions\)"):
        evidence_hit_rate(torch.ones(4), torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"must lie in \[0, 3\)"):
        evidence_hit_rate(torch.ones(2, 3), torch.tensor([0, 3]))


def test_text_weights_figure_draws_every_token():
    fig = show_text_weights([["the", "cat", "sat"], ["a", "dog"]], torch.tensor([[0.1, 0.8, 0.1], [0.9, 0.1, 0.0]]),
                            row_labels=["0.3", "0.7"], title="demo")
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts == ["0.3", "the", "cat", "sat", "0.7", "a", "dog"]
    darkest = fig.axes[0].texts[2].get_bbox_patch().get_facecolor()
    lightest = fig.axes[0].texts[1].get_bbox_patch().get_facecolor()
    assert sum(darkest[:3]) < sum(lightest[:3])
    with pytest.raises(ValueError, match="line 1 has 2 tokens"):
        show_text_weights([["a"], ["b", "c"]], [np.ones(1), np.ones(1)])


# ---- several seeds ------------------------------------------------------------------------------

class _Noisy(_PickOne):
    """_PickOne with a random initial query, so that the seed matters for the weights too."""

    def __init__(self):
        super().__init__()
        self.query = nn.Parameter(torch.randn(3))


def test_train_seeds_repeats_one_run_per_seed(capsys):
    inputs, labels = _data()
    options = dict(max_steps=30, batch_size=16, lr=0.05, val=_data(64, seed=1), eval_every=10)
    runs = train_seeds(_Noisy, inputs, labels, seeds=(3, 5), **options)
    assert "2 seeds (3, 5), each 30 steps (" in capsys.readouterr().out  # and the budget's name
    assert runs.seeds == [3, 5] and len(runs.models) == len(runs.histories) == 2
    assert all(h.eval_steps == [10, 20, 30] for h in runs.histories)
    for seed, model in zip(runs.seeds, runs.models):  # each equals the same run by hand
        set_seed(seed)
        alone = _Noisy()
        train_classifier(alone, inputs, labels, seed=seed, progress=False, **options)
        torch.testing.assert_close(model.query, alone.query, rtol=0, atol=0)
    assert not torch.equal(runs.models[0].query, runs.models[1].query)
    assert runs.histories[0].loss != runs.histories[1].loss


def test_train_seeds_names_bad_arguments():
    inputs, labels = _data()
    with pytest.raises(ValueError, match="non-empty sequence of distinct ints"):
        train_seeds(_Noisy, inputs, labels, seeds=(), max_steps=1)
    with pytest.raises(ValueError, match="non-empty sequence of distinct ints"):
        train_seeds(_Noisy, inputs, labels, seeds=(1, 1), max_steps=1)
    with pytest.raises(ValueError, match="pass the seeds as seeds="):
        train_seeds(_Noisy, inputs, labels, seed=1, max_steps=1)
    with pytest.raises(ValueError, match="build\\(\\) must return an nn.Module, got str"):
        train_seeds(lambda: "model", inputs, labels, max_steps=1, progress=False)


def test_spread_and_its_format():
    s = spread([0.9, 0.8, 1.0])
    assert isinstance(s, Spread) and s.min == 0.8 and s.max == 1.0 and s.mean == pytest.approx(0.9)
    assert f"{s:.2f}" == "0.90 (0.80–1.00)" and f"{spread([3]):.1f}" == "3.0 (3.0–3.0)"
    assert f"{spread([2e-4, 1e-4, 6e-4]):.1e}" == "3.0e-04 (1.0e-04–6.0e-04)"
    with pytest.raises(ValueError, match="at least one value"):
        spread([])


def test_steps_to_reach_reads_the_first_evaluation_at_the_level():
    history = History(eval_steps=[10, 20, 30, 40], evals={"val_accuracy": [0.4, 0.85, 0.8, 0.9]})
    assert steps_to_reach(history, 0.8) == 20 and steps_to_reach(history, 0.9) == 40
    assert steps_to_reach(history, 0.95) is None and steps_to_reach(history, 0.0) == 10
    with pytest.raises(ValueError, match="no 'val_bleu' in this history"):
        steps_to_reach(history, 0.5, name="val_bleu")


def test_plot_seed_curves_draws_the_mean_and_the_range():
    def run(*curves):
        return SeedRuns(list(range(len(curves))), [None] * len(curves),
                        [History(eval_steps=[10, 20], evals={"val_accuracy": list(c)}) for c in curves])

    ax = plot_seed_curves({"a": run((0.2, 0.6), (0.4, 1.0)), "b": run((0.5, 0.5), (0.5, 0.5), (0.5, 0.8))})
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["a (2 seeds)", "b (3 seeds)"]
    np.testing.assert_allclose(lines[0].get_ydata(), [0.3, 0.8])
    np.testing.assert_allclose(lines[1].get_ydata(), [0.5, 0.6])
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() == pytest.approx(0.2) and band.max() == pytest.approx(1.0)
    uneven = [History(eval_steps=[step], evals={"val_accuracy": [1.0]}) for step in (10, 20)]
    with pytest.raises(ValueError, match="evaluated at different steps"):
        plot_seed_curves({"c": SeedRuns([0, 1], [None, None], uneven)})


def test_empty_data_is_named_not_nan():
    """Before: train_classifier on no example trained on empty batches until the NaN loss stopped it, blaming
    the learning rate; accuracy of no example failed in torch.cat's words; the hit rate of no example and the
    spread of a NaN were NaN, silently."""
    inputs, labels = _data()
    model = _PickOne()
    with pytest.raises(ValueError, match="labels is empty: train_classifier needs at least one example, got 0"):
        train_classifier(model, (inputs[0][:0],), labels[:0], max_steps=3, progress=False)
    assert model.query.tolist() == [-1.0, -1.0, -1.0]
    with pytest.raises(ValueError, match=r"inputs hold no example \(0 rows\): nothing to predict"):
        accuracy(model, (inputs[0][:0],), labels[:0])
    with pytest.raises(ValueError, match="the hit rate needs at least one example, got 0"):
        evidence_hit_rate(torch.ones(0, 3), torch.zeros(0, dtype=torch.long))
    with pytest.raises(ValueError, match=r"spread needs finite values, got nan at index 1 of \[0.9, nan, 0.8\]"):
        spread([0.9, float("nan"), 0.8])
    with pytest.raises(ValueError, match="spread needs finite values, got inf at index 0"):
        spread([float("inf")])


def test_a_bad_validation_set_or_batch_size_is_named_before_training():
    """Before: a val of the wrong shape failed at the first evaluation, after eval_every steps of training;
    predict(batch_size=0) failed in range()'s words."""
    inputs, labels = _data()
    model = _PickOne()
    with pytest.raises(ValueError, match=r"val must be a pair \(val_inputs, val_labels\), got Tensor"):
        train_classifier(model, inputs, labels, max_steps=3, val=labels, progress=False)
    with pytest.raises(ValueError, match=r"input 0 must be a tensor with one row per label \(256 rows\)"):
        train_classifier(model, inputs, labels, max_steps=3, val=((inputs[0][:5],), labels), progress=False)
    with pytest.raises(ValueError, match="val's labels are empty"):
        train_classifier(model, inputs, labels, max_steps=3, val=((inputs[0][:0],), labels[:0]), progress=False)
    assert model.query.tolist() == [-1.0, -1.0, -1.0]
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got 0"):
        predict(model, inputs, batch_size=0)
    with pytest.raises(ValueError, match=r"inputs must be a non-empty sequence of tensors .* got \[\]"):
        predict(model, ())
