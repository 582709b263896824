"""The one training loop of the course, and the record it keeps.

Every trainer of ``trainers`` (``train_nw`` for chapter 2, ``train_seq2seq`` for the translators,
``train_classifier`` for chapter 7, ``train_language_model`` for chapter 11) is ``fit`` with a
function that computes one batch's loss (``losses``). ``fit`` owns what they share: the budget (``max_steps`` steps
and/or ``time_budget`` seconds of training, whichever ends first), the optimiser, the learning-rate
schedule (linear warm-up over ``warmup`` steps, then linear decay to 0 at the end of the budget,
or constant), gradient clipping at norm ``clip``, a progress bar, evaluations at a few points, a
check that the loss stays finite, and a ``History``.

A step budget gives the same model on every machine; a time budget the best model a machine can
train in that time. Time spent in evaluations does not count towards the budget.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch
from torch import nn
from tqdm.auto import tqdm

from .budgets import budget_name
from .checks import check_non_negative_int, check_positive_int

SCHEDULES = ("linear", "constant")
_SUMMARY_LABELS = {"val_bleu": ("validation BLEU", ".1f"), "val_accuracy": ("validation accuracy", ".3f")}
OPTIMIZERS = ("adam", "adamw", "sgd")


def learning_rate_factor(step: int, warmup: int, progress: float, schedule: str = "linear") -> float:
    """The multiplier of the base learning rate at ``step`` (counted from 0).

    Linear warm-up over ``warmup`` steps; then, for ``schedule="linear"``, linear decay to 0 as
    ``progress`` (the used fraction of the budget) goes 0 → 1, or, for ``"constant"``, 1.
    """
    rise = (step + 1) / warmup if warmup > 0 else 1.0
    if schedule == "constant":
        return min(rise, 1.0)
    return max(0.0, min(rise, 1.0 - progress))


@dataclass
class History:
    """What happened during training.

    Per step: ``steps`` (1, 2, ...), the recorded ``loss``, the learning rate ``lr``, ``seconds`` of
    training when the step ended, and in ``metrics`` any other per-step value a trainer records
    (e.g. ``"accuracy"``, ``"tokens"``). At each evaluation: the step in ``eval_steps`` and the values
    in ``evals`` (e.g. ``evals["val_bleu"]``). ``train_seconds`` excludes the evaluations.
    """

    steps: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    metrics: dict[str, list[float]] = field(default_factory=dict)
    eval_steps: list[int] = field(default_factory=list)
    evals: dict[str, list[float]] = field(default_factory=dict)
    train_seconds: float = 0.0

    def curve(self, name: str) -> tuple[list[int], list[float]]:
        """``(steps, values)`` of an evaluated quantity (``evals``) or a per-step one (``metrics``)."""
        if name in self.evals:
            return self.eval_steps, self.evals[name]
        if name in self.metrics:
            return self.steps, self.metrics[name]
        raise ValueError(f"no {name!r} in this history; it has {sorted(self.evals) + sorted(self.metrics)}")

    def last(self, name: str) -> float | None:
        """The latest value of ``name`` (``None`` if it was never recorded)."""
        values = self.evals.get(name) or self.metrics.get(name)
        return values[-1] if values else None

    @property
    def tokens_per_second(self) -> float:
        """Throughput when the trainer records ``metrics["tokens"]``: tokens per second of training."""
        tokens = sum(self.metrics.get("tokens", []))
        return tokens / self.train_seconds if self.train_seconds > 0 else 0.0

    def summary(self) -> str:
        if not self.steps:
            return "no steps"
        text = f"{len(self.steps)} steps in {self.train_seconds:.0f} s"
        if "tokens" in self.metrics:
            text += f", {self.tokens_per_second:,.0f} target tokens/s"
        text += f"; final loss {self.loss[-1]:.3f}"
        for name, values in self.evals.items():
            label, spec = _SUMMARY_LABELS.get(name, (name.replace("_", " "), ".4g"))
            text += f"; {label} {values[-1]:{spec}}"
        return text

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> History:
        return cls(**d)


def describe_budget(max_steps: int | None, time_budget: float | None) -> str:
    """E.g. ``'300 steps (book budget)'`` or ``'300 steps or 180 s, whichever ends first (book budget)'``."""
    parts = ([f"{max_steps:,} steps"] if max_steps is not None else []) + (
        [f"{time_budget:g} s"] if time_budget is not None else [])
    both = ", whichever ends first" if len(parts) == 2 else ""
    return f"{' or '.join(parts)}{both} ({budget_name()})"


def _is_number(value) -> bool:
    """An int or a float, not a bool (``True`` is an int to Python, never a budget or a norm here)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_budget(max_steps, time_budget) -> None:
    if max_steps is None and time_budget is None:
        raise ValueError("give a budget: max_steps (an int > 0) and/or time_budget (seconds > 0); got neither")
    if max_steps is not None:
        check_positive_int("max_steps", max_steps)
    if time_budget is not None and not (_is_number(time_budget) and time_budget > 0):
        raise ValueError(f"time_budget must be a positive number of seconds, got {time_budget!r}")
    if max_steps is None and time_budget == math.inf:
        raise ValueError("a run needs a finite bound: time_budget=inf with max_steps=None never ends; give a finite "
                         "time_budget, or max_steps (with time_budget=inf or None)")


def _check_settings(model, step_loss, lr, warmup, clip, eval_points) -> None:
    """``ValueError`` naming the first of ``fit``'s arguments that cannot train anything sensible."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not callable(step_loss):
        raise ValueError(f"step_loss must be a function (model, step) -> loss, got {type(step_loss).__name__}")
    if not (_is_number(lr) and math.isfinite(lr) and lr >= 0):
        raise ValueError(f"lr must be a finite number >= 0, got {lr!r}")
    check_non_negative_int("warmup", warmup)
    if clip is not None and not (_is_number(clip) and clip > 0):  # NaN fails clip > 0
        raise ValueError(f"clip must be a positive gradient norm, or None for no clipping, got {clip!r}"
                         + (" (use None for no clipping)" if _is_number(clip) and clip == 0 else ""))
    check_non_negative_int("eval_points", eval_points)


def _check_objective(objective: torch.Tensor, step: int) -> None:
    """``ValueError`` unless ``objective`` is a loss ``backward`` can start from: one real floating-point
    number that depends on the parameters (checked on the host: no wait for the device)."""
    if objective.numel() != 1 or not objective.is_floating_point():
        raise ValueError(f"step_loss must return a scalar loss (a floating-point tensor holding one number), got "
                         f"shape {tuple(objective.shape)}, dtype {objective.dtype} at step {step}; reduce it, "
                         f"e.g. with .mean()")
    if not objective.requires_grad:
        raise ValueError(f"step_loss must return a loss computed from the model's parameters (requires_grad=True), "
                         f"got a tensor without grad at step {step}: was it computed under torch.no_grad(), "
                         f"detached (.detach(), .item(), torch.tensor(...)), or with every parameter frozen?")


def _as_float(value, name: str, step: int, source: str = "step_loss") -> float:
    """``float(value)``, or a ``ValueError`` naming the recorded value that is not one number and the function
    ``source`` that returned it."""
    try:
        return float(value)
    except (TypeError, ValueError, RuntimeError) as err:
        shown = f"shape {tuple(value.shape)}" if isinstance(value, torch.Tensor) else repr(value)
        raise ValueError(f"{source}'s value {name!r} must be a number (or a one-number tensor), got "
                         f"{type(value).__name__} {shown} at step {step}") from err


def _optimizer(model: nn.Module, name: str, lr: float, betas, weight_decay: float) -> torch.optim.Optimizer:
    if name == "adam":
        return torch.optim.Adam(model.parameters(), lr=lr, betas=tuple(betas), weight_decay=weight_decay)
    if name == "adamw":  # decoupled weight decay (Loshchilov and Hutter, 2019), as GPT-style models train
        return torch.optim.AdamW(model.parameters(), lr=lr, betas=tuple(betas), weight_decay=weight_decay)
    if name == "sgd":
        return torch.optim.SGD(model.parameters(), lr=lr, weight_decay=weight_decay)
    raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {name!r}")


def _split(result) -> tuple[torch.Tensor, dict]:
    """A step's result: a loss tensor, or ``(objective, {name: value})`` whose ``"loss"`` is recorded instead."""
    if isinstance(result, torch.Tensor):
        return result, {}
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], torch.Tensor) \
            and isinstance(result[1], dict):
        return result
    raise ValueError("step_loss must return a loss tensor or (loss tensor, dict of values), "
                     f"got {type(result).__name__}")


DIVERGENCE_FACTOR = 10.0


class DivergenceMonitor:
    """Raises ``RuntimeError`` when a smoothed loss rises ``factor`` times above its starting level.

    The start is the first step's loss: the untrained model's, before any update (a mean over the
    first steps would already include the climb when the learning rate is far too large). The
    smoothed loss is an exponential mean (weight ``1 - decay`` on the newest), compared from step
    ``after`` on, so a spike of a step or two is not divergence. A start <= 0 (an objective that is
    not a positive loss) disables the check.
    """

    def __init__(self, factor: float = DIVERGENCE_FACTOR, lr: float | None = None, after: int = 20,
                 decay: float = 0.9):
        self.factor, self.lr, self.after, self.decay = factor, lr, after, decay
        self.start: float | None = None
        self.smoothed: float | None = None

    def check(self, loss: float, step: int) -> None:
        if self.start is None:
            self.start = self.smoothed = loss
        self.smoothed = self.decay * self.smoothed + (1 - self.decay) * loss
        start = self.start
        if step >= self.after and start > 0 and self.smoothed > self.factor * start:
            lr = f" (got lr={self.lr:g})" if self.lr is not None else ""
            raise RuntimeError(f"training diverged: the loss rose from {start:.3g} at the start to {loss:.3g} at step "
                               f"{step} (smoothed {self.smoothed:.3g}, over {self.factor:g} times the start); lower "
                               f"the learning rate{lr}, or pass divergence_factor=None to train on regardless")


def fit(model: nn.Module, step_loss: Callable[[nn.Module, int], object], *, max_steps: int | None = None,
        time_budget: float | None = None, lr: float = 1e-3, warmup: int = 0, schedule: str = "linear",
        clip: float | None = 1.0, optimizer: str = "adam", betas=(0.9, 0.999), weight_decay: float = 0.0,
        evaluate: Callable[[nn.Module], dict] | None = None, eval_points: int = 0, eval_every: int | None = None,
        progress: bool = True, desc: str = "training", divergence_factor: float | None = DIVERGENCE_FACTOR) -> History:
    """Train ``model`` by minimising ``step_loss(model, step)`` (step = 0, 1, ...); return the ``History``.

    ``step_loss`` returns the batch's loss, or ``(objective, values)``: the objective is minimised
    and ``values`` (floats) are recorded per step, ``values["loss"]`` as the step's loss (e.g. the
    cross-entropy of a model trained with another objective). ``evaluate(model) -> {name: value}``
    runs ``eval_points`` times evenly over the budget, or every ``eval_every`` steps, and always
    at the end when either is set; the model is back in training mode after it and in evaluation
    mode when ``fit`` returns. With ``progress``, prints the budget and shows a progress bar.

    Divergence stops training: a non-finite objective at once (``FloatingPointError``), and, unless
    ``divergence_factor`` is ``None``, a smoothed objective (exponential mean over about 10 steps)
    above ``divergence_factor`` times the first step's objective (``RuntimeError``), checked from
    step 20 on and only when that start is positive (``DivergenceMonitor``). A normal run's loss
    falls below its start; 10 times the start is far beyond any noise.
    ``step_loss`` raising ``StopIteration`` (its batches ran out) is a ``ValueError``, not a hang.
    Bad settings are a ``ValueError`` before anything runs: ``clip`` is a positive norm or ``None`` (no
    clipping; 0 is refused rather than read as "none"), a budget needs a finite bound, ``lr`` is finite;
    a ``step_loss`` result that is not one number with a gradient is one at the step it comes.
    """
    _check_budget(max_steps, time_budget)
    _check_settings(model, step_loss, lr, warmup, clip, eval_points)
    if divergence_factor is not None and not (isinstance(divergence_factor, (int, float)) and divergence_factor > 1):
        raise ValueError(f"divergence_factor must be a number > 1 or None (no check), got {divergence_factor!r}")
    monitor = DivergenceMonitor(divergence_factor, lr) if divergence_factor is not None else None
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    if eval_every is not None:
        check_positive_int("eval_every", eval_every)
    if (eval_points or eval_every) and evaluate is None:
        raise ValueError("eval_points/eval_every need an evaluate function")
    opt = _optimizer(model, optimizer, lr, betas, weight_decay)
    history = History()
    next_eval = [k / eval_points for k in range(1, eval_points + 1)] if eval_points else []
    if progress:
        print(f"{desc}: {describe_budget(max_steps, time_budget)}")
    total = max_steps if max_steps is not None else float(time_budget)
    bar = tqdm(total=total, desc=desc, unit="step" if max_steps is not None else "s", disable=not progress,
               mininterval=1.0)

    def used() -> float:  # the fraction of the budget used so far
        return max(step / max_steps if max_steps else 0.0, elapsed / time_budget if time_budget else 0.0)

    elapsed, step = 0.0, 0
    model.train()
    while used() < 1.0:
        start = time.perf_counter()
        factor = learning_rate_factor(step, warmup, used(), schedule)
        for group in opt.param_groups:
            group["lr"] = lr * factor
        try:
            result = step_loss(model, step)
        except StopIteration as err:  # e.g. next() on an exhausted (or empty) iterator of batches
            raise ValueError(f"step_loss ran out of batches at step {step} (StopIteration): its batch source is "
                             "empty or exhausted; give it data that repeats, epoch after epoch") from err
        objective, values = _split(result)
        _check_objective(objective, step)
        objective_value = objective.item()  # waits for the device, so the timing is real
        if not math.isfinite(objective_value):  # stop before a non-finite gradient reaches the weights
            if step == 0:  # no update yet: the learning rate cannot be the cause
                raise FloatingPointError(f"the loss was {objective_value} at step 0, before any update: the model's "
                                         f"initial output or the first batch holds a non-finite value (the "
                                         f"learning rate has not acted yet)")
            raise FloatingPointError(f"the loss became {objective_value} at step {step}; try a smaller lr (got {lr})")
        if monitor is not None:
            monitor.check(objective_value, step + 1)  # counted as in history.steps
        opt.zero_grad(set_to_none=True)
        objective.backward()
        if clip is not None:  # a positive norm (checked above)
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        recorded = values.pop("loss", objective_value)
        loss_value = _as_float(recorded, "loss", step)
        elapsed += time.perf_counter() - start
        step += 1
        history.steps.append(step)
        history.loss.append(loss_value)
        history.lr.append(lr * factor)
        history.seconds.append(elapsed)
        for name, value in values.items():
            history.metrics.setdefault(name, []).append(_as_float(value, name, step - 1))  # counted from 0
        bar.update(1 if max_steps is not None else min(elapsed, total) - bar.n)
        bar.set_postfix(loss=f"{loss_value:.3f}", refresh=False)
        done = used()
        due = bool(next_eval) and done >= next_eval[0]
        while next_eval and done >= next_eval[0]:
            next_eval.pop(0)
        if evaluate is not None and (due or (eval_every and step % eval_every == 0)
                                     or ((eval_points or eval_every) and done >= 1.0)):
            history.eval_steps.append(step)
            scores = evaluate(model)
            if not isinstance(scores, dict):
                raise ValueError(f"evaluate must return a dict {{name: number}}, got {type(scores).__name__}")
            for name, value in scores.items():
                history.evals.setdefault(name, []).append(_as_float(value, name, step, "evaluate"))
            bar.set_postfix(loss=f"{loss_value:.3f}", **{k: f"{v[-1]:.3g}" for k, v in history.evals.items()},
                            refresh=False)
            model.train()
    bar.close()
    history.train_seconds = elapsed
    model.eval()
    return history
