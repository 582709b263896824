"""Interactive explorers. Each has a static twin, so a page read without a kernel still shows it.

``draw_lookup`` draws one soft lookup (keys in the plane, shaded by weight, and the weights as
bars); ``lookup_grid`` draws several queries and temperatures as one static figure; and
``query_explorer`` wraps ``draw_lookup`` in sliders so a reader can move the query and watch the
weights change. ``draw_nw_fit``, ``bandwidth_grid`` and ``bandwidth_explorer`` do the same for the
bandwidth of Nadaraya–Watson regression (chapter 2), and ``attention_grid`` and
``transformer_attention_explorer`` for every layer and head of a Transformer (chapter 10).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from matplotlib import pyplot as plt

from .kernel_regression import KERNELS, nadaraya_watson
from .lookup import soft_lookup
from .plot import show_heatmaps


def _on_cpu(x) -> torch.Tensor:
    """``x`` (a tensor on any device, an array, a list) as a float32 CPU tensor: the figures compute there."""
    return torch.as_tensor(x, dtype=torch.float32).detach().cpu()


def _as_points(keys) -> torch.Tensor:
    keys = _on_cpu(keys)
    if keys.dim() != 2 or keys.shape[1] != 2:
        raise ValueError(f"keys must be points in the plane, shape (num_keys, 2); got {tuple(keys.shape)}")
    return keys


def draw_lookup(query, keys, values, temperature=1.0, score="neg_sq_dist", key_labels=None, axes=None):
    """Draw the soft lookup of one 2-D ``query`` among 2-D ``keys`` with scalar ``values``.

    Left panel: the keys, coloured and sized by their attention weight, the query as a star, and
    the pooled value in the title. Right panel: the weights as bars. Returns the figure. ``query`` is a
    point ``(x, y)``, ``keys`` ``(num_keys, 2)``, ``values`` ``(num_keys,)``, ``temperature`` a number > 0.
    """
    keys = _as_points(keys)
    values = _on_cpu(values)
    query = _on_cpu(query)
    if query.numel() != 2:
        raise ValueError(f"query must be one point in the plane, (x, y); got shape {tuple(query.shape)}")
    query = query.reshape(1, 2)
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
    x_train, y_train = _on_cpu(x_train), _on_cpu(y_train)
    if queries is None:
        queries = torch.linspace(float(x_train.min()), float(x_train.max()), 100)
    queries = _on_cpu(queries)
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


# --- The Transformer's attention maps (chapter 10) -------------------------------------------

ATTENTION_KINDS = ("encoder self", "decoder self", "cross")


def _transformer_maps(maps, src_tokens, tgt_tokens, kind: str, index: int = 0):
    """One sentence's maps of one kind, checked: ``(layers, heads, queries, keys)`` as numpy, with
    the query and key tokens. Encoder self-attention: source × source; decoder self-attention:
    target × target; cross-attention: target (queries) × source (keys)."""
    if kind not in ATTENTION_KINDS:
        raise ValueError(f"kind must be one of {ATTENTION_KINDS}, got {kind!r}")
    if not isinstance(maps, dict) or kind not in maps:
        got = sorted(maps) if isinstance(maps, dict) else type(maps).__name__
        raise ValueError(f"maps must be the dict that transformer_attention returns, with a {kind!r} entry; got {got}")
    queries = list(src_tokens) if kind == "encoder self" else list(tgt_tokens)
    keys = list(tgt_tokens) if kind == "decoder self" else list(src_tokens)
    weights = maps[kind]
    shape = tuple(weights.shape) if hasattr(weights, "shape") else None
    expected = f"(layers, batch, heads, {len(queries)}, {len(keys)})"
    if shape is None or len(shape) != 5 or shape[3:] != (len(queries), len(keys)):
        raise ValueError(f"maps[{kind!r}] must have shape {expected}: {len(queries)} query and {len(keys)} key "
                         f"tokens, as transformer_attention returns for these tokens; got shape {shape}")
    if not 0 <= index < shape[1]:
        raise ValueError(f"index must pick a sentence of the batch, 0 to {shape[1] - 1}; got {index}")
    data = weights[:, index]
    data = data.detach().float().cpu().numpy() if isinstance(weights, torch.Tensor) else np.asarray(data, float)
    return data, queries, keys  # (layers, heads, queries, keys)


def _axis_labels(kind: str) -> tuple[str, str]:
    """(xlabel, ylabel) of a map of ``kind``."""
    side = {"encoder self": ("source", "source"), "decoder self": ("target input", "target input"),
            "cross": ("source", "target input")}[kind]
    return f"{side[0]} (keys)", f"{side[1]} (queries)"


def attention_grid(maps, src_tokens, tgt_tokens, kind: str, index: int = 0, average: bool = False,
                   panel_size=None, vmax: float | None = None):
    """Static figure: every layer (rows) and head (columns) of one kind of attention for one sentence.

    ``maps`` is what ``transformer_attention(model, src, src_valid_lens, tgt_input)`` returns
    (tensors ``(layers, batch, heads, queries, keys)``); ``src_tokens`` and ``tgt_tokens`` label
    the source positions and the decoder's input positions (``index`` picks the sentence of the
    batch); ``kind`` is ``"encoder self"``, ``"decoder self"`` or ``"cross"``. ``average=True`` adds
    a last column with the mean of the heads. One colour scale (0 to ``vmax``, default the largest
    weight) for all panels. Returns the figure.
    """
    data, queries, keys = _transformer_maps(maps, src_tokens, tgt_tokens, kind, index)
    layers, heads = data.shape[:2]
    titles = [[f"layer {i + 1}, head {h + 1}" for h in range(heads)] for i in range(layers)]
    if average:
        data = np.concatenate([data, data.mean(axis=1, keepdims=True)], axis=1)  # (layers, heads + 1, Q, K)
        titles = [row + [f"layer {i + 1}, mean of heads"] for i, row in enumerate(titles)]
    if panel_size is None:
        panel_size = (0.22 * len(keys) + 1.0, 0.22 * len(queries) + 0.9)
    xlabel, ylabel = _axis_labels(kind)
    fig = show_heatmaps(data, xlabel, ylabel, titles=titles, figsize=panel_size, xticklabels=keys,
                        yticklabels=queries, vmax=vmax)
    for ax in fig.axes:
        if ax.get_label() != "<colorbar>":
            ax.title.set_fontsize(9)
            ax.tick_params(labelsize=8)
    fig.suptitle(f"{kind} attention")
    return fig


def transformer_attention_explorer(maps, src_tokens, tgt_tokens, index: int = 0, kind: str = "cross"):
    """A menu for the kind of attention, a layer slider and a head menu (with "average of heads"),
    redrawing that one map of sentence ``index`` (same arguments as ``attention_grid``).

    Needs ``ipywidgets`` and a live kernel; in a static page the last drawn state is shown, so draw
    the grids with ``attention_grid`` as well.
    """
    import ipywidgets as widgets  # imported here so attn_utils works without a notebook

    checked = {k: _transformer_maps(maps, src_tokens, tgt_tokens, k, index) for k in ATTENTION_KINDS if k in maps}
    if kind not in checked:
        raise ValueError(f"kind must be one of {tuple(checked)}, got {kind!r}")
    layers, heads = checked[kind][0].shape[:2]
    kind_menu = widgets.Dropdown(options=list(checked), value=kind, description="attention")
    layer_slider = widgets.IntSlider(value=layers, min=1, max=layers, description="layer")
    head_menu = widgets.Dropdown(options=[(f"head {h + 1}", h) for h in range(heads)] + [("average of heads", -1)],
                                 value=0, description="head")

    def redraw(kind_name, layer, head):
        data, queries, keys = checked[kind_name]
        matrix = data[layer - 1].mean(axis=0) if head < 0 else data[layer - 1, head]  # (queries, keys)
        what = "mean of heads" if head < 0 else f"head {head + 1}"
        xlabel, ylabel = _axis_labels(kind_name)
        show_heatmaps(matrix, xlabel, ylabel, titles=[f"{kind_name}: layer {layer}, {what}"], xticklabels=keys,
                      yticklabels=queries, figsize=(0.3 * len(keys) + 1.6, 0.3 * len(queries) + 1.2))
        plt.show()

    out = widgets.interactive_output(redraw, {"kind_name": kind_menu, "layer": layer_slider, "head": head_menu})
    return widgets.VBox([widgets.HBox([kind_menu, layer_slider, head_menu]), out])
