"""The one training loop (``attn_utils.fit``) and the budget switch (``attn_utils.budget``)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attn_utils.budgets import QUICK_ENV_VAR, budget, budget_name, quick_mode
from attn_utils.training_loop import History, describe_budget, fit, learning_rate_factor

# --- the budget switch ---------------------------------------------------------------------------


@pytest.mark.parametrize("value, quick", [("1", True), ("true", True), (" YES ", True), ("0", False), ("", False),
                                          ("off", False)])
def test_quick_mode_reads_the_environment(monkeypatch, value, quick):
    monkeypatch.setenv(QUICK_ENV_VAR, value)
    assert quick_mode() is quick
    assert budget(book=300, quick=4) == (4 if quick else 300)
    assert budget(book={"max_steps": 300}, quick={"max_steps": 4}) == {"max_steps": 4 if quick else 300}
    assert budget_name() == ("quick budget (ATTN_UTILS_QUICK=1)" if quick else "book budget")


def test_book_budget_when_the_variable_is_unset(monkeypatch):
    monkeypatch.delenv(QUICK_ENV_VAR, raising=False)
    assert not quick_mode() and budget(book=1200, quick=3.5) == 1200


def test_bad_budget_settings_are_value_errors(monkeypatch):
    monkeypatch.setenv(QUICK_ENV_VAR, "maybe")
    with pytest.raises(ValueError, match="ATTN_UTILS_QUICK must be 1 .* got 'maybe'"):
        quick_mode()
    monkeypatch.setenv(QUICK_ENV_VAR, "1")
    with pytest.raises(ValueError, match="same type, got dict and int"):
        budget(book={"max_steps": 300}, quick=4)


def test_describe_budget(monkeypatch):
    monkeypatch.delenv(QUICK_ENV_VAR, raising=False)
    assert describe_budget(1200, None) == "1,200 steps (book budget)"
    assert describe_budget(None, 180) == "180 s (book budget)"
    monkeypatch.setenv(QUICK_ENV_VAR, "1")
    assert describe_budget(300, 60.5) == "300 steps or 60.5 s, whichever ends first (quick budget (ATTN_UTILS_QUICK=1))"


# --- the learning-rate schedule ------------------------------------------------------------------


def test_learning_rate_schedule():
    assert learning_rate_factor(0, 100, 0.0) == pytest.approx(0.01)
    assert learning_rate_factor(99, 100, 0.0) == pytest.approx(1.0)
    assert learning_rate_factor(500, 100, 0.25) == pytest.approx(0.75)
    assert learning_rate_factor(900, 100, 1.0) == 0.0
    assert learning_rate_factor(0, 0, 0.5) == pytest.approx(0.5)
    assert learning_rate_factor(1, 4, 0.9, "constant") == pytest.approx(0.5)  # warm-up, then flat
    assert learning_rate_factor(10, 4, 0.9, "constant") == 1.0


# --- the loop ------------------------------------------------------------------------------------


class _Scalar(nn.Module):
    def __init__(self, w: float):
        super().__init__()
        self.w = nn.Parameter(torch.tensor(w, dtype=torch.float64))


def test_sgd_steps_equal_the_update_by_hand():
    """Minimise (w - 3)^2 with SGD, lr 0.1, warm-up 2, linear decay over 4 steps: each update by hand."""
    model = _Scalar(0.0)
    history = fit(model, lambda m, step: (m.w - 3.0) ** 2, max_steps=4, lr=0.1, warmup=2, optimizer="sgd",
                  clip=None, progress=False)
    w, losses, rates = 0.0, [], []
    for step in range(4):
        factor = min((step + 1) / 2, 1 - step / 4)  # 0.5, 0.75, 0.5, 0.25
        losses.append((w - 3.0) ** 2)
        rates.append(0.1 * factor)
        w -= 0.1 * factor * 2 * (w - 3.0)
    assert history.steps == [1, 2, 3, 4]
    assert history.lr == pytest.approx(rates) and rates == pytest.approx([0.05, 0.075, 0.05, 0.025])
    assert history.loss == pytest.approx(losses)
    assert model.w.item() == pytest.approx(w)
    assert len(history.seconds) == 4 and history.train_seconds == history.seconds[-1] > 0
    assert not model.training


def test_adamw_decays_the_weight_apart_from_the_gradient_step():
    """One AdamW step by hand: w <- w (1 - lr wd) - lr g / (|g| + eps) (bias-corrected first step)."""
    model = _Scalar(2.0)
    fit(model, lambda m, step: 3.0 * m.w, max_steps=1, lr=0.1, optimizer="adamw", weight_decay=0.5,
        schedule="constant", clip=None, progress=False)
    assert model.w.item() == pytest.approx(2.0 * (1 - 0.1 * 0.5) - 0.1 * 3.0 / (3.0 + 1e-8))


def test_evaluation_mode_restores_the_mode_also_on_errors():
    from attn_utils.modes import evaluation_mode

    model = nn.Sequential(nn.Dropout(0.5)).train()
    with evaluation_mode(model) as inside:
        assert inside is model and not model.training
    assert model.training
    with pytest.raises(RuntimeError), evaluation_mode(model):
        raise RuntimeError("inside")
    assert model.training
    model.eval()
    with evaluation_mode(model):
        pass
    assert not model.training


def test_clipping_bounds_the_update():
    model = _Scalar(0.0)  # gradient of (w - 100)^2 at 0 is -200; clipped to norm 1
    fit(model, lambda m, step: (m.w - 100.0) ** 2, max_steps=1, lr=0.5, optimizer="sgd", schedule="constant",
        clip=1.0, progress=False)
    assert model.w.item() == pytest.approx(0.5)


def test_recorded_values_and_evaluations():
    model = _Scalar(1.0)
    seen = []

    def step_loss(m, step):
        seen.append(step)
        return 2 * m.w ** 2, {"loss": m.w.detach() ** 2, "tokens": 3}

    def evaluate(m):
        assert not m.training  # evaluate may switch modes; fit puts the model back in training mode
        return {"val": float(m.w.detach())}

    def evaluate_in_eval_mode(m):
        m.eval()
        return evaluate(m)

    history = fit(model, step_loss, max_steps=10, lr=0.01, optimizer="sgd", evaluate=evaluate_in_eval_mode,
                  eval_every=4, progress=False)
    assert seen == list(range(10))
    assert history.eval_steps == [4, 8, 10]  # every 4 steps, and at the end
    assert history.curve("val") == (history.eval_steps, history.evals["val"])
    assert history.metrics["tokens"] == [3.0] * 10 and history.tokens_per_second > 0
    assert history.loss[0] == pytest.approx(1.0)  # the recorded loss, not the objective 2 w^2
    assert history.last("val") == history.evals["val"][-1]
    points = fit(_Scalar(1.0), lambda m, s: m.w ** 2, max_steps=9, lr=0.01, evaluate=lambda m: {"v": 0.0},
                 eval_points=3, progress=False)
    assert points.eval_steps == [3, 6, 9]
    with pytest.raises(ValueError, match="no 'bleu' in this history; it has \\['v'\\]"):
        points.curve("bleu")


def test_history_round_trips_through_a_dict():
    history = fit(_Scalar(1.0), lambda m, s: (m.w ** 2, {"tokens": 2}), max_steps=3, lr=0.1,
                  evaluate=lambda m: {"v": 1.0}, eval_points=1, progress=False)
    assert History.from_dict(history.to_dict()) == history
    assert "3 steps" in history.summary() and "target tokens/s" in history.summary()


class _FakeClock:
    """``time.perf_counter`` for ``fit``: each reading is ``tick`` seconds after the one before (so one step,
    read at its start and end, takes ``tick``); ``now`` can be moved on by hand. Binary fractions: exact sums."""

    def __init__(self, tick):
        self.now, self.tick = 1000.0, tick

    def perf_counter(self):
        self.now += self.tick
        return self.now


def test_time_budget_stops_training(monkeypatch):
    """On a clock that makes each step last 1/16 s, a budget of 1/4 s is exactly 4 steps; time spent evaluating
    (here 10 s a time) does not count. A deterministic clock: a shared machine's load cannot move the verdict."""
    from attn_utils import training_loop

    clock = _FakeClock(0.0625)
    monkeypatch.setattr(training_loop, "time", clock)

    def evaluate(model):
        clock.now += 10.0
        return {"v": 1.0}

    history = fit(_Scalar(1.0), lambda m, s: m.w ** 2, time_budget=0.25, lr=1e-3, evaluate=evaluate, eval_every=1,
                  progress=False)
    assert history.steps == [1, 2, 3, 4] and history.eval_steps == [1, 2, 3, 4]
    assert history.seconds == [0.0625, 0.125, 0.1875, 0.25] and history.train_seconds == 0.25
    longer = fit(_Scalar(1.0), lambda m, s: m.w ** 2, time_budget=0.3, lr=1e-3, progress=False)
    assert len(longer.steps) == 5 and longer.train_seconds == 0.3125  # the step that crosses the budget is the last


def test_fit_prints_the_budget(capsys, monkeypatch):
    monkeypatch.delenv(QUICK_ENV_VAR, raising=False)
    fit(_Scalar(1.0), lambda m, s: m.w ** 2, max_steps=2, lr=0.1, desc="toy")
    assert capsys.readouterr().out.splitlines()[0] == "toy: 2 steps (book budget)"


def test_a_non_finite_loss_stops_before_the_weights_change():
    model = _Scalar(1.0)
    with pytest.raises(FloatingPointError, match="the loss was nan at step 0, before any update"):
        fit(model, lambda m, s: m.w * float("nan"), max_steps=3, lr=0.1, progress=False)
    assert model.w.item() == 1.0


def test_bad_arguments_are_value_errors():
    model = _Scalar(1.0)

    def loss(m, s):
        return m.w ** 2

    for kwargs, message in [({}, "give a budget"), ({"max_steps": 0}, "max_steps must be a positive integer, got 0"),
                            ({"max_steps": 2.5}, "max_steps must be a positive int"),
                            ({"time_budget": -1}, "time_budget must be a positive number"),
                            ({"max_steps": 2, "schedule": "cosine"}, "schedule must be one of"),
                            ({"max_steps": 2, "optimizer": "lbfgs"}, "optimizer must be one of"),
                            ({"max_steps": 2, "eval_points": 2}, "need an evaluate function"),
                            ({"max_steps": 2, "eval_every": 0, "evaluate": lambda m: {}}, "eval_every must be")]:
        with pytest.raises(ValueError, match=message):
            fit(model, loss, progress=False, **kwargs)
    with pytest.raises(ValueError, match="step_loss must return a loss tensor .* got float"):
        fit(model, lambda m, s: 1.0, max_steps=1, progress=False)


def test_summary_names_the_evaluations():
    history = History(steps=[1, 2], loss=[3.5, 3.04], lr=[1e-3, 1e-3], seconds=[75.0, 150.0],
                      metrics={"tokens": [177_075, 177_075]}, eval_steps=[2], evals={"val_bleu": [10.43]},
                      train_seconds=150.0)
    assert history.summary() == "2 steps in 150 s, 2,361 target tokens/s; final loss 3.040; validation BLEU 10.4"
    history.evals = {"val_accuracy": [0.98765]}
    assert history.summary().endswith("; validation accuracy 0.988")
    assert History().summary() == "no steps"


# --- divergence and running out of batches -------------------------------------------------------


def _growing(lr: float = 2.0, max_steps: int = 30, **kwargs):
    """SGD on w^2 with lr 2: w -> -3w each step, so the loss grows 9-fold a step (finite for 30 steps)."""
    return fit(_Scalar(1.0), lambda m, s: m.w ** 2, max_steps=max_steps, lr=lr, optimizer="sgd", schedule="constant",
               clip=None, progress=False, **kwargs)


def test_a_loss_far_above_its_start_stops_training():
    with pytest.raises(RuntimeError, match=r"training diverged: the loss rose from 1 at the start to .* at step 20 "
                                           r".*lower the learning rate \(got lr=2\)"):
        _growing()
    history = _growing(divergence_factor=None)  # switched off: the old behaviour, a finite but absurd loss
    assert len(history.steps) == 30 and history.loss[-1] > 1e25


def test_the_divergence_check_ignores_a_spike_and_non_positive_objectives():
    def spiky(m, step):  # a falling loss with one step 50 times its start
        return (m.w ** 2) * (50.0 if step == 25 else 1.0)

    history = fit(_Scalar(1.0), spiky, max_steps=40, lr=0.01, optimizer="sgd", clip=None, progress=False)
    assert len(history.steps) == 40
    # an objective that is not a positive loss (here negative and growing in size) is left alone
    history = fit(_Scalar(1.0), lambda m, s: -(m.w ** 2), max_steps=30, lr=0.5, optimizer="sgd",
                  schedule="constant", clip=None, progress=False)
    assert len(history.steps) == 30
    with pytest.raises(ValueError, match="divergence_factor must be a number > 1 or None"):
        _growing(divergence_factor=0.5)


def test_an_exhausted_batch_source_is_an_error_not_a_hang():
    batches = iter([1.0, 2.0])

    def step_loss(m, step):
        return m.w ** 2 * next(batches)

    with pytest.raises(ValueError, match="ran out of batches at step 2 .*empty or exhausted"):
        fit(_Scalar(1.0), step_loss, max_steps=5, lr=0.01, progress=False)
    with pytest.raises(ValueError, match="ran out of batches at step 0"):
        fit(_Scalar(1.0), lambda m, s: next(iter([])), max_steps=5, lr=0.01, progress=False)


# --- bad settings and bad losses (issue 37) -----------------------------------------------------------------------


def _square(m, s):
    return (m.w - 3.0) ** 2


@pytest.mark.parametrize("clip, message", [
    (0, r"clip must be a positive gradient norm, or None for no clipping, got 0 \(use None for no clipping\)"),
    (0.0, r"got 0.0 \(use None for no clipping\)"),
    (-1.0, "clip must be a positive gradient norm, or None for no clipping, got -1.0"),
    (float("nan"), "clip must be a positive gradient norm, or None for no clipping, got nan"),
    (True, "clip must be a positive gradient norm, or None for no clipping, got True"),
    ("1", "clip must be a positive gradient norm, or None for no clipping, got '1'"),
])
def test_clip_is_a_positive_norm_or_none(clip, message):
    """Before: 0 silently meant no clipping, -1 flipped every gradient (the loss rose), NaN poisoned the weights
    and the error blamed the learning rate, True clipped at norm 1."""
    model = _Scalar(0.0)
    with pytest.raises(ValueError, match=message):
        fit(model, _square, max_steps=2, lr=0.1, optimizer="sgd", clip=clip, progress=False)
    assert model.w.item() == 0.0  # refused before any step


def test_no_clipping_is_clip_none_or_inf_not_zero():
    """The gradient of (w - 3)^2 at 0 is -6; one SGD step of lr 0.1 moves w to 0.6 unless clipped (to 0.1 at
    norm 1). None and inf do not clip; 0, which used to mean the same, is refused with a pointer to None."""
    for clip, moved in ((None, 0.6), (float("inf"), 0.6), (1.0, 0.1)):
        model = _Scalar(0.0)
        fit(model, _square, max_steps=1, lr=0.1, optimizer="sgd", schedule="constant", clip=clip, progress=False)
        assert model.w.item() == pytest.approx(moved)
    with pytest.raises(ValueError, match=r"use None for no clipping"):
        fit(_Scalar(0.0), _square, max_steps=1, lr=0.1, optimizer="sgd", clip=0, progress=False)


@pytest.mark.parametrize("kwargs, message", [
    ({"time_budget": True}, "time_budget must be a positive number of seconds, got True"),
    ({"time_budget": float("inf")}, r"a run needs a finite bound: time_budget=inf with max_steps=None never ends"),
    ({"max_steps": 2, "lr": float("nan")}, "lr must be a finite number >= 0, got nan"),
    ({"max_steps": 2, "lr": True}, "lr must be a finite number >= 0, got True"),
    ({"max_steps": 2, "lr": float("inf")}, "lr must be a finite number >= 0, got inf"),
    ({"max_steps": 2, "warmup": -5}, "warmup must be a non-negative integer, got -5"),
    ({"max_steps": 2, "warmup": 2.5}, "warmup must be a non-negative integer, got 2.5"),
    ({"max_steps": 2, "eval_points": -1, "evaluate": lambda m: {}}, "eval_points must be a non-negative integer"),
    ({"max_steps": 2, "eval_points": True, "evaluate": lambda m: {}}, "eval_points must be a non-negative integer"),
])
def test_budgets_and_settings_that_cannot_work_are_named(kwargs, message):
    """Before: time_budget=True trained for one second, an infinite time budget alone never returned, a NaN lr
    failed in torch's words, a negative warm-up was silently none and eval_points=-1 silently 'at the end'."""
    with pytest.raises(ValueError, match=message):
        fit(_Scalar(0.0), _square, progress=False, **kwargs)


def test_an_infinite_time_budget_needs_a_step_budget():
    """With max_steps, time_budget=inf is no bound at all and the steps run; alone it is refused (it used to
    train for ever). A budget of True seconds is refused with it (it used to train for one second)."""
    history = fit(_Scalar(0.0), _square, max_steps=3, time_budget=float("inf"), lr=0.1, progress=False)
    assert history.steps == [1, 2, 3]
    with pytest.raises(ValueError, match="time_budget must be a positive number of seconds, got True"):
        fit(_Scalar(0.0), _square, max_steps=3, time_budget=True, lr=0.1, progress=False)


def test_a_model_or_step_loss_of_the_wrong_kind_is_named():
    with pytest.raises(ValueError, match="model must be a torch.nn.Module, got function"):
        fit(lambda x: x, _square, max_steps=1, progress=False)
    with pytest.raises(ValueError, match=r"step_loss must be a function \(model, step\) -> loss, got Tensor"):
        fit(_Scalar(0.0), torch.tensor(1.0), max_steps=1, progress=False)


@pytest.mark.parametrize("step_loss, message", [
    (lambda m, s: (m.w - torch.arange(3.0)) ** 2,
     r"step_loss must return a scalar loss \(a floating-point tensor holding one number\), got shape \(3,\)"),
    (lambda m, s: torch.zeros(0, dtype=torch.float64) + m.w, r"scalar loss .* got shape \(0,\)"),
    (lambda m, s: (m.w - 3.0).detach() ** 2, r"must return a loss computed from the model's parameters "
                                              r"\(requires_grad=True\), got a tensor without grad at step 0"),
    (lambda m, s: torch.tensor(4), r"scalar loss .* dtype torch.int64"),
    (lambda m, s: (m.w * (1 + 1j)).abs() * 0 + m.w * (1 + 1j), r"scalar loss .* dtype torch.complex128"),
])
def test_a_loss_that_is_not_one_number_with_a_gradient_is_named(step_loss, message):
    """Before: torch's own words from .item() or backward() ('a Tensor with 3 elements cannot be converted to
    Scalar', 'element 0 of tensors does not require grad')."""
    model = _Scalar(0.0)
    with pytest.raises(ValueError, match=message):
        fit(model, step_loss, max_steps=2, lr=0.1, progress=False)
    assert model.w.item() == 0.0


def test_recorded_values_that_are_not_numbers_are_named():
    with pytest.raises(ValueError, match=r"step_loss's value 'loss' must be a number .* got Tensor shape \(2,\)"):
        fit(_Scalar(0.0), lambda m, s: (m.w ** 2, {"loss": torch.ones(2)}), max_steps=1, progress=False)
    with pytest.raises(ValueError, match=r"step_loss's value 'tokens' must be a number .* got str 'many' at step 0"):
        fit(_Scalar(0.0), lambda m, s: (m.w ** 2, {"tokens": "many"}), max_steps=1, progress=False)
    with pytest.raises(ValueError, match=r"evaluate must return a dict \{name: number\}, got float"):
        fit(_Scalar(0.0), _square, max_steps=2, evaluate=lambda m: 0.5, eval_every=1, progress=False)


def test_a_non_finite_first_loss_does_not_blame_the_learning_rate():
    """At step 0 nothing has been updated yet: a NaN comes from the model or the data, not from lr."""
    with pytest.raises(FloatingPointError, match=r"the loss was nan at step 0, before any update: .*the learning "
                                                 r"rate has not acted yet"):
        fit(_Scalar(1.0), lambda m, s: m.w * float("nan"), max_steps=3, lr=0.1, progress=False)
    with pytest.raises(FloatingPointError, match=r"the loss became nan at step 1; try a smaller lr \(got 0.1\)"):
        fit(_Scalar(1.0), lambda m, s: m.w * (float("nan") if s == 1 else 1.0), max_steps=3, lr=0.1, progress=False)
