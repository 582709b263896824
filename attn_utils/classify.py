"""Training and measuring the attention classifiers of chapter 7, through the course's one loop (``fit``).

The image, relation and document models differ in their inputs, not in how they are trained or
judged. Each is an ``nn.Module`` whose ``forward(*inputs)`` returns logits ``(batch, classes)``
and keeps the attention weights of its last call in ``attention_weights``. A model whose training
objective is not plain cross-entropy (hard attention, trained with REINFORCE) defines
``training_loss(*inputs, labels=...) -> (objective, cross_entropy, logits)``: the loop minimises the
first and records the second, so every model's curve shows the same quantity.

A comparison of models rests on several seeds: ``train_seeds`` trains one model per seed,
``steps_to_reach`` reads from a history when the validation accuracy first reached a level, and
``plot_seed_curves`` draws each model's validation curve as its mean over the seeds with a band from
the lowest to the highest (``attn_utils.measure.spread`` summarises a number over the seeds).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from .checks import check_positive_int
from .device import set_seed
from .training_loop import History, describe_budget, fit


def _check_inputs(inputs: Sequence[torch.Tensor], labels: torch.Tensor) -> None:
    if not isinstance(labels, torch.Tensor) or labels.dim() != 1:
        raise ValueError(f"labels must be a 1-D tensor of class indices, got "
                         f"{type(labels).__name__} {tuple(getattr(labels, 'shape', ()))}")
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor) or x.shape[:1] != labels.shape:
            raise ValueError(f"input {i} must be a tensor with one row per label ({labels.shape[0]} rows), "
                             f"got {type(x).__name__} {tuple(getattr(x, 'shape', ()))}")


def training_loss(model: nn.Module, inputs: Sequence[torch.Tensor], labels: torch.Tensor):
    """``(objective, cross_entropy, logits)`` of one batch: the model's own objective if it has one."""
    if hasattr(model, "training_loss"):
        objective, cross_entropy, logits = model.training_loss(*inputs, labels=labels)
        return objective, cross_entropy, logits
    logits = model(*inputs)
    cross_entropy = F.cross_entropy(logits, labels)
    return cross_entropy, cross_entropy, logits


def train_classifier(model: nn.Module, inputs: Sequence[torch.Tensor], labels: torch.Tensor, *,
                     max_steps: int | None = None, time_budget: float | None = None, batch_size: int = 64,
                     lr: float = 1e-3, warmup: int = 0, weight_decay: float = 0.0, clip: float | None = 5.0,
                     val: tuple[Sequence[torch.Tensor], torch.Tensor] | None = None, eval_every: int = 50,
                     seed: int = 0, progress: bool = True) -> History:
    """Train ``model`` with ``fit`` (Adam, constant learning rate after ``warmup``) on minibatches drawn
    without replacement (reshuffled each epoch); return the ``History``.

    ``inputs`` are tensors with one row per example (moved to the model's device batch by batch),
    ``labels`` the class indices. Each step records the cross-entropy as its loss and the batch
    accuracy (``history.metrics["accuracy"]``). ``val = (val_inputs, val_labels)`` is scored every
    ``eval_every`` steps and after the last (``history.evals["val_accuracy"]``). The order of the
    batches depends only on ``seed``.
    """
    inputs = tuple(inputs)
    _check_inputs(inputs, labels)
    check_positive_int("batch_size", batch_size)
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    num = labels.shape[0]
    order, position = torch.randperm(num, generator=generator), 0

    def step_loss(model, step):
        nonlocal order, position
        if position + batch_size > num:
            order, position = torch.randperm(num, generator=generator), 0
        idx = order[position:position + batch_size]
        position += batch_size
        y = labels[idx].to(device)
        objective, cross_entropy, logits = training_loss(model, [x[idx].to(device) for x in inputs], y)
        return objective, {"loss": cross_entropy.detach(), "accuracy": (logits.argmax(-1) == y).float().mean()}

    evaluate = (lambda m: {"val_accuracy": accuracy(m, *val)}) if val is not None else None
    return fit(model, step_loss, max_steps=max_steps, time_budget=time_budget, lr=lr, warmup=warmup,
               schedule="constant", clip=clip, weight_decay=weight_decay, evaluate=evaluate,
               eval_every=eval_every if val is not None else None, progress=progress)


@torch.no_grad()
def predict(model: nn.Module, inputs: Sequence[torch.Tensor], batch_size: int = 512):
    """Class predictions ``(n,)`` and the attention weights of every example (concatenated on dim 0).

    The weights are whatever the model keeps in ``attention_weights`` after each call (``None``
    when it keeps none); the model is put in evaluation mode.
    """
    inputs = tuple(inputs)
    model.eval()
    device = next(model.parameters()).device
    predictions, weights = [], []
    for start in range(0, inputs[0].shape[0], batch_size):
        batch = [x[start:start + batch_size].to(device) for x in inputs]
        predictions.append(model(*batch).argmax(-1).cpu())
        w = getattr(model, "attention_weights", None)
        if w is not None:
            weights.append(w.detach().cpu())
    return torch.cat(predictions), (torch.cat(weights) if weights else None)


def accuracy(model: nn.Module, inputs: Sequence[torch.Tensor], labels: torch.Tensor, batch_size: int = 512) -> float:
    """Fraction of ``labels`` that ``model`` predicts."""
    inputs = tuple(inputs)
    _check_inputs(inputs, labels)
    predictions, _ = predict(model, inputs, batch_size)
    return float((predictions == labels.cpu()).float().mean())


def evidence_hit_rate(weights: torch.Tensor, evidence: torch.Tensor) -> float:
    """How often the most-weighted position is the position that carries the evidence.

    ``weights`` ``(n, positions)`` (attention over regions, tokens or sentences; padding should
    already carry weight 0), ``evidence`` ``(n,)`` the index of the position that decides the
    label. Ties go to the first maximum, as ``argmax`` does.
    """
    if weights.dim() != 2 or evidence.shape != weights.shape[:1]:
        raise ValueError(f"expected weights (n, positions) and evidence (n,), got "
                         f"{tuple(weights.shape)} and {tuple(evidence.shape)}")
    if bool(((evidence < 0) | (evidence >= weights.shape[1])).any()):
        raise ValueError(f"evidence indices must lie in [0, {weights.shape[1]}), got "
                         f"{int(evidence.min())}..{int(evidence.max())}")
    return float((weights.argmax(-1).cpu() == evidence.cpu()).float().mean())


# ---------------------------------------------------------------------------------------------
# Several seeds
# ---------------------------------------------------------------------------------------------

@dataclass
class SeedRuns:
    """One model per seed, trained the same way: ``seeds``, the trained ``models`` and their ``histories``."""

    seeds: list[int]
    models: list[nn.Module]
    histories: list[History]


def train_seeds(build: Callable[[], nn.Module], inputs: Sequence[torch.Tensor], labels: torch.Tensor, *,
                seeds: Sequence[int] = (0, 1, 2), device: torch.device | str | None = None, progress: bool = True,
                **train_options) -> SeedRuns:
    """Train ``build()`` once per seed with ``train_classifier`` and return the ``SeedRuns``.

    For each seed, ``set_seed(seed)`` comes first, so the seed fixes the initial weights, the
    minibatch order (``train_classifier(..., seed=seed)``) and any sampling in the model; the model
    is moved to ``device`` when one is given. ``train_options`` go to ``train_classifier``
    (``max_steps``, ``lr``, ``val``, ``eval_every``, ...), the same for every seed. With
    ``progress``, prints the seeds and the budget once and shows one progress bar over the seeds.
    """
    from tqdm.auto import tqdm

    seeds = list(seeds)
    if not seeds or len(set(seeds)) != len(seeds) or not all(isinstance(s, int) for s in seeds):
        raise ValueError(f"seeds must be a non-empty sequence of distinct ints, got {seeds}")
    if "seed" in train_options:
        raise ValueError("pass the seeds as seeds=[...]; train_seeds sets train_classifier's seed itself")
    if progress:
        print(f"{len(seeds)} seeds ({', '.join(map(str, seeds))}), each "
              f"{describe_budget(train_options.get('max_steps'), train_options.get('time_budget'))}")
    models, histories = [], []
    for seed in tqdm(seeds, desc="seeds", unit="seed", disable=not progress):
        set_seed(seed)
        model = build()
        if not isinstance(model, nn.Module):
            raise ValueError(f"build() must return an nn.Module, got {type(model).__name__}")
        if device is not None:
            model = model.to(device)
        histories.append(train_classifier(model, inputs, labels, seed=seed, progress=False, **train_options))
        models.append(model)
    return SeedRuns(seeds, models, histories)


def steps_to_reach(history: History, level: float, name: str = "val_accuracy") -> int | None:
    """The first evaluated step at which ``name`` reached ``level`` (``None`` if it never did)."""
    steps, values = history.curve(name)
    return next((step for step, value in zip(steps, values) if value >= level), None)


def plot_seed_curves(runs: Mapping[str, SeedRuns], name: str = "val_accuracy", ax=None, **plot_options):
    """For each model of ``runs`` (label -> ``SeedRuns``), ``name`` against the step: the mean over the
    seeds as a line and the band from the lowest to the highest seed. Returns the axes."""
    from matplotlib import pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3))
    for label, run in runs.items():
        steps = [h.curve(name)[0] for h in run.histories]
        if any(s != steps[0] for s in steps):
            raise ValueError(f"the seeds of {label!r} were evaluated at different steps; train them alike")
        values = torch.tensor([h.curve(name)[1] for h in run.histories])  # (seeds, evaluations)
        line, = ax.plot(steps[0], values.mean(0).tolist(), label=f"{label} ({len(run.seeds)} seeds)", **plot_options)
        ax.fill_between(steps[0], values.min(0).values.tolist(), values.max(0).values.tolist(),
                        color=line.get_color(), alpha=0.2, linewidth=0)
    ax.set(xlabel="step", ylabel=name.replace("_", " "))
    return ax
