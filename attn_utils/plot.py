"""Figures shared by the chapters: attention-weight heatmaps, text shaded by its weights, and training
curves (one run's ``History``, or several seeds' ``SeedRuns``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import torch
from matplotlib import pyplot as plt

if TYPE_CHECKING:
    from .trainers import SeedRuns
    from .training_loop import History


def _to_numpy(matrices) -> np.ndarray:
    if isinstance(matrices, torch.Tensor):
        return matrices.detach().float().cpu().numpy()
    return np.asarray(matrices, dtype=float)


def show_heatmaps(
    matrices,
    xlabel: str = "Keys",
    ylabel: str = "Queries",
    titles=None,
    figsize=(2.5, 2.5),
    cmap: str = "Reds",
    xticklabels=None,
    yticklabels=None,
    vmin: float | None = 0.0,
    vmax: float | None = None,
    colorbar: bool = True,
):
    """Draw a grid of heatmaps, one per attention-weight matrix (d2l's signature, extended).

    ``matrices`` is (rows, cols, queries, keys); (queries, keys) and (cols, queries, keys) are
    promoted to that. ``titles`` names the columns (a list of ``cols`` strings) or every panel
    (a nested list). ``xticklabels``/``yticklabels`` label keys and queries, e.g. with tokens.
    ``figsize`` is the size of one panel. The colour scale is shared by all panels and starts at
    0 unless ``vmin`` says otherwise. Returns the matplotlib figure.
    """
    data = _to_numpy(matrices)
    if data.ndim == 2:
        data = data[None, None]
    elif data.ndim == 3:
        data = data[None]
    if data.ndim != 4:
        raise ValueError(
            f"show_heatmaps expects matrices of shape (queries, keys), (cols, queries, keys) or "
            f"(rows, cols, queries, keys); got {data.ndim} dimensions, shape {data.shape}"
        )
    num_rows, num_cols, num_q, num_k = data.shape
    if not num_rows or not num_cols:
        raise ValueError(f"show_heatmaps needs at least one matrix, got shape {data.shape}")
    for name, labels, size in (("xticklabels", xticklabels, num_k), ("yticklabels", yticklabels, num_q)):
        if labels is not None and len(labels) != size:
            raise ValueError(f"{name} has {len(labels)} labels but the matrices have {size} {name[0]}-positions")
    if vmax is None:
        vmax = float(np.nanmax(data)) if data.size else 1.0
    fig, axes = plt.subplots(
        num_rows, num_cols, figsize=(figsize[0] * num_cols, figsize[1] * num_rows),
        sharex=True, sharey=True, squeeze=False, layout="constrained",
    )
    image = None
    for i in range(num_rows):
        for j in range(num_cols):
            ax = axes[i, j]
            image = ax.imshow(data[i, j], cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
            if i == num_rows - 1:
                ax.set_xlabel(xlabel)
            if j == 0:
                ax.set_ylabel(ylabel)
            if titles is not None:
                title = titles[i][j] if isinstance(titles[0], (list, tuple)) else (titles[j] if i == 0 else None)
                if title:
                    ax.set_title(title)
            if xticklabels is not None:
                ax.set_xticks(range(num_k), xticklabels, rotation=90)
            if yticklabels is not None:
                ax.set_yticks(range(num_q), yticklabels)
    if colorbar and image is not None:
        fig.colorbar(image, ax=axes, shrink=0.6)
    return fig


def show_text_weights(rows, weights, title=None, cmap: str = "Reds", vmax: float | None = None,
                      fontsize: int = 11, width: float = 8.0, row_labels=None):
    """Draw lines of text with every word shaded by its weight (darker = more weight).

    ``rows`` is a list of token lists (one sentence per line), ``weights`` the matching weights
    (a list of sequences, or a 2-D tensor/array padded on the right; only the first ``len(row)``
    weights of a line are used). ``row_labels`` (one string per line, e.g. a sentence's own
    weight) is written to the left of each line; ``title`` goes above the lines.
    The colour scale runs from 0 to ``vmax`` (default: the largest weight shown). Returns the figure.
    """
    rows = [list(map(str, r)) for r in rows]
    if isinstance(weights, (torch.Tensor, np.ndarray)):
        weights = _to_numpy(weights)
        if weights.ndim == 1:
            weights = weights[None]
    if len(weights) != len(rows):
        raise ValueError(f"show_text_weights got {len(rows)} lines of text but {len(weights)} rows of weights")
    shown = []
    for i, (tokens, w) in enumerate(zip(rows, weights)):
        w = np.asarray(w, dtype=float)
        if w.ndim != 1 or w.shape[0] < len(tokens):
            raise ValueError(f"line {i} has {len(tokens)} tokens but its weights have shape {w.shape}")
        shown.append(w[:len(tokens)])
    if row_labels is not None and len(row_labels) != len(rows):
        raise ValueError(f"show_text_weights got {len(rows)} lines but {len(row_labels)} row_labels")
    top = max((float(w.max()) for w in shown if w.size), default=1.0)
    vmax = vmax if vmax is not None else (top if top > 0 else 1.0)
    colours = plt.get_cmap(cmap)
    line_height = 0.32
    height = 0.3 + line_height * len(rows)
    fig = plt.figure(figsize=(width, height + (0.35 if title else 0.0)))
    ax = fig.add_axes([0, 0, 1, height / (height + (0.35 if title else 0.0))])
    ax.set_axis_off()
    renderer = fig.canvas.get_renderer()
    left = 0.14 if row_labels is not None else 0.01
    for i, (tokens, w) in enumerate(zip(rows, shown)):
        y = 1 - (i + 1) / (len(rows) + 0.5)
        if row_labels is not None:
            ax.text(0.01, y, str(row_labels[i]), fontsize=fontsize - 2, va="center", ha="left",
                    transform=ax.transAxes, color="0.35")
        x = left
        for token, value in zip(tokens, w):
            level = min(max(value / vmax, 0.0), 1.0)
            text = ax.text(x, y, token, fontsize=fontsize, va="center", ha="left", transform=ax.transAxes,
                           color="white" if level > 0.6 else "black",
                           bbox=dict(boxstyle="square,pad=0.15", facecolor=colours(level), edgecolor="none"))
            box = text.get_window_extent(renderer=renderer).transformed(ax.transAxes.inverted())
            x = box.x1 + 0.008
    if title:
        fig.suptitle(title, fontsize=fontsize, x=0.01, ha="left")
    return fig


def plot_history(history: History, figsize=(9, 3)):
    """Training loss per step (and its running mean) beside validation BLEU; returns the figure."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=figsize, layout="constrained")
    ax1.plot(history.steps, history.loss, lw=0.5, alpha=0.4, label="per step")
    window = max(1, len(history.loss) // 50)
    if len(history.loss) >= window:
        kernel = torch.ones(window) / window
        smooth = torch.conv1d(torch.tensor(history.loss)[None, None], kernel[None, None])[0, 0]
        ax1.plot(history.steps[window - 1:], smooth.tolist(), label=f"mean of {window}")
    ax1.set(xlabel="step", ylabel="training loss", title="loss (label-smoothed)")
    ax1.legend(fontsize=8)
    if "val_bleu" in history.evals:
        ax2.plot(*history.curve("val_bleu"), marker="o")
    ax2.set(xlabel="step", ylabel="BLEU", title="validation BLEU (greedy)")
    return fig


def plot_seed_curves(runs: Mapping[str, SeedRuns], name: str = "val_accuracy", ax=None, **plot_options):
    """For each model of ``runs`` (label -> ``SeedRuns``), ``name`` against the step: the mean over the
    seeds as a line and the band from the lowest to the highest seed. Returns the axes."""
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
