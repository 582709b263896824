"""Interactive explorers. Each has a static twin, so a page read without a kernel still shows it.

``draw_lookup`` draws one soft lookup (keys in the plane, shaded by weight, and the weights as
bars); ``lookup_grid`` draws several queries and temperatures as one static figure; and
``query_explorer`` wraps ``draw_lookup`` in sliders so a reader can move the query and watch the
weights change. ``draw_nw_fit``, ``bandwidth_grid`` and ``bandwidth_explorer`` do the same for the
bandwidth of Nadaraya–Watson regression (chapter 2).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from matplotlib import pyplot as plt

from .kernel_regression import KERNELS, nadaraya_watson
from .lookup import soft_lookup


def _as_points(keys) -> torch.Tensor:
    keys = torch.as_tensor(keys, dtype=torch.float32)
    if keys.dim() != 2 or keys.shape[1] != 2:
        raise ValueError(f"keys must be points in the plane, shape (num_keys, 2); got {tuple(keys.shape)}")
    return keys


def draw_lookup(query, keys, values, temperature=1.0, score="neg_sq_dist", key_labels=None, axes=None):
    """Draw the soft lookup of one 2-D ``query`` among 2-D ``keys`` with scalar ``values``.

    Left panel: the keys, coloured and sized by their attention weight, the query as a star, and
    the pooled value in the title. Right panel: the weights as bars. Returns the figure.
    """
    keys = _as_points(keys)
    values = torch.as_tensor(values, dtype=torch.float32)
    query = torch.as_tensor(query, dtype=torch.float32).reshape(1, 2)
    output, weights = soft_lookup(query, keys, values, temperature=temperature, score=score)
    w = weights[0].numpy()
    labels = list(key_labels) if key_labels is not None else [str(i) for i in range(len(keys))]
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(8, 3.4), layout="constrained")
    else:
        fig = axes[0].figure
    ax_plane, ax_bars = axes
    pts = keys.numpy()
    ax_plane.scatter(pts[:, 0], pts[:, 1], s=60 + 900 * w, c=w, cmap="Reds", vmin=0, vmax=1,
                     edgecolors="black", linewidths=0.6, zorder=2)
    for (x, y), label, v in zip(pts, labels, values.tolist()):
        ax_plane.annotate(f"{label}\n{v:g}", (x, y), textcoords="offset points", xytext=(8, 6), fontsize=8)
    ax_plane.scatter(*query[0].numpy(), marker="*", s=260, c="tab:blue", edgecolors="black", zorder=3)
    ax_plane.set_title(f"query ★ → pooled value {output.item():.2f}", fontsize=10)
    pad = 0.15 * max(np.ptp(pts[:, 0]), np.ptp(pts[:, 1]), 1.0)
    ax_plane.set_xlim(pts[:, 0].min() - pad, pts[:, 0].max() + 3 * pad)
    ax_plane.set_ylim(pts[:, 1].min() - pad, pts[:, 1].max() + 2 * pad)
    # "box", not "datalim": the limits above are both fixed, so matplotlib would ignore one of them
    # (logging "Ignoring fixed y limits ...") and could clip keys near the edge.
    ax_plane.set_aspect("equal", adjustable="box")
    ax_bars.bar(range(len(w)), w, color=plt.get_cmap("Reds")(0.25 + 0.75 * w), edgecolor="black")
    ax_bars.set_xticks(range(len(w)), labels, rotation=45, ha="right", fontsize=8)
    ax_bars.set_ylim(0, 1)
    ax_bars.set_ylabel("attention weight")
    ax_bars.set_title(f"temperature {temperature:g}", fontsize=10)
    return fig


def lookup_grid(queries, temperatures, keys, values, score="neg_sq_dist", key_labels=None):
    """Static figure: one row per (query, temperature) pair drawn with ``draw_lookup``."""
    pairs = [(q, t) for q in queries for t in temperatures]
    fig, axes = plt.subplots(len(pairs), 2, figsize=(8, 3.2 * len(pairs)), layout="constrained", squeeze=False)
    for row, (q, t) in zip(axes, pairs):
        draw_lookup(q, keys, values, temperature=t, score=score, key_labels=key_labels, axes=row)
    return fig


def query_explorer(keys, values, key_labels=None, score="neg_sq_dist", query=(0.0, 0.0), temperature=1.0):
    """Sliders for the query's x and y and the (log-scale) temperature, redrawing ``draw_lookup``.

    Needs ``ipywidgets`` and a live kernel; in a static page the last drawn state is shown.
    """
    import ipywidgets as widgets  # imported here so attn_utils works without a notebook

    pts = _as_points(keys).numpy()
    lo, hi = pts.min(axis=0) - 1.0, pts.max(axis=0) + 1.0
    step = float(max(hi - lo)) / 100
    x = widgets.FloatSlider(value=float(query[0]), min=float(lo[0]), max=float(hi[0]), step=step, description="query x")
    y = widgets.FloatSlider(value=float(query[1]), min=float(lo[1]), max=float(hi[1]), step=step, description="query y")
    log_t = widgets.FloatSlider(value=math.log10(temperature), min=-2.0, max=2.0, step=0.05,
                                description="log₁₀ temp.", readout_format=".2f")

    def redraw(qx, qy, log_temperature):
        draw_lookup((qx, qy), keys, values, temperature=10.0**log_temperature, score=score, key_labels=key_labels)
        plt.show()

    out = widgets.interactive_output(redraw, {"qx": x, "qy": y, "log_temperature": log_t})
    return widgets.VBox([widgets.HBox([x, y, log_t]), out])


# --- Nadaraya–Watson bandwidth (chapter 2) ---------------------------------------------------


def draw_nw_fit(x_train, y_train, kernel="gaussian", width=0.5, truth=None, queries=None, axes=None):
    """Draw one Nadaraya–Watson fit: the data, the fit (and ``truth``, a function, if given) on
    the left, the attention weights (queries x training inputs) on the right. Returns the figure."""
    x_train = torch.as_tensor(x_train, dtype=torch.float32)
    y_train = torch.as_tensor(y_train, dtype=torch.float32)
    if queries is None:
        queries = torch.linspace(float(x_train.min()), float(x_train.max()), 100)
    queries = torch.as_tensor(queries, dtype=torch.float32)
    fit, weights = nadaraya_watson(queries, x_train, y_train, kernel, width)  # (Q,), (Q, n)
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(7.5, 2.8), layout="constrained")
    else:
        fig = axes[0].figure
    ax_fit, ax_w = axes
    ax_fit.plot(x_train, y_train, "o", ms=3, alpha=0.5, color="tab:gray", label="data")
    if truth is not None:
        ax_fit.plot(queries, truth(queries), "--", color="tab:green", label="truth")
    ax_fit.plot(queries, fit, color="tab:red", label="fit")
    ax_fit.set_title(f"{kernel}, width {width:.3g}", fontsize=10)
    ax_fit.set_xlabel("x")
    ax_fit.legend(fontsize=7, loc="upper right")
    ax_w.imshow(weights.numpy(), cmap="Reds", aspect="auto", vmin=0,
                extent=(float(x_train.min()), float(x_train.max()), float(queries.max()), float(queries.min())))
    ax_w.set_xlabel("keys (training x)")
    ax_w.set_ylabel("queries (x)")
    ax_w.set_title("attention weights", fontsize=10)
    return fig


def bandwidth_grid(x_train, y_train, widths, kernel="gaussian", truth=None):
    """Static figure: one column per width, the fit on top and its attention weights below."""
    fig, axes = plt.subplots(2, len(widths), figsize=(2.6 * len(widths), 4.8), layout="constrained", squeeze=False)
    for col, width in enumerate(widths):
        draw_nw_fit(x_train, y_train, kernel, width, truth=truth, axes=axes[:, col])
        if col:
            axes[0, col].get_legend().remove()
            axes[1, col].set_ylabel("")
    return fig


def bandwidth_explorer(x_train, y_train, kernel="gaussian", width=0.5, truth=None):
    """A kernel menu and a (log-scale) width slider redrawing ``draw_nw_fit``.

    Needs ``ipywidgets`` and a live kernel; in a static page the last drawn state is shown.
    """
    import ipywidgets as widgets  # imported here so attn_utils works without a notebook

    kernel_menu = widgets.Dropdown(options=list(KERNELS), value=kernel, description="kernel")
    width_slider = widgets.FloatLogSlider(value=width, base=10, min=-2, max=1, step=0.05, description="width",
                                          readout_format=".3f")

    def redraw(kernel_name, h):
        draw_nw_fit(x_train, y_train, kernel_name, h, truth=truth)
        plt.show()

    out = widgets.interactive_output(redraw, {"kernel_name": kernel_menu, "h": width_slider})
    return widgets.VBox([widgets.HBox([kernel_menu, width_slider]), out])
