"""Figures shared by the chapters: attention-weight heatmaps."""

from __future__ import annotations

import numpy as np
import torch
from matplotlib import pyplot as plt


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
