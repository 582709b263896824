"""Diagrams of the architectures the chapters build, drawn with matplotlib patches.

One public function per figure, ``draw_xxx(ax=None) -> Figure``: it draws into ``ax`` (a matplotlib
``Axes``) when given (the axes are turned into a blank canvas) or into a new figure of its own size. Every drawing uses
the palette and font sizes defined below and a few private primitives (a rounded box, an arrow, a
polyline arrow, a label, a grid of cells), so the figures stay consistent and easy to edit.

Coordinates are inches: a new figure gets one axes covering it, with limits equal to its size, so a
box of width 1 is one inch wide whatever the dpi. The symbols follow ``notation.md`` and the
chapter that shows the figure (chapters 5 and 6 keep their papers' indices).

=============================  ==========  ================================================================
function                       chapter     what it shows
=============================  ==========  ================================================================
``draw_qkv_lookup``            1           a query scored against keys; softmax weights average the values
``draw_encoder_decoder``       4           the GRU encoder–decoder and its one context vector
``draw_bahdanau_step``         5           one decoder step: query s_{i-1}, weights, c_i, GRU, deep output
``draw_luong_windows``         6           global attention next to local-p's window and Gaussian
``draw_causal_self_attention`` 8           Q, K, V from X, the masked score matrix, the weights, Y
``draw_multihead_split_merge`` 9           projections split into heads, attended, merged, with shapes
``draw_transformer``           10          encoder–decoder stacks, post-norm and pre-norm side by side
``draw_kv_cache``              10          one decoding step with the self- and cross-attention caches
``draw_tiled_attention``       11b         the tiled loop: one tile of scores and the running m, l, O
``draw_gpu_memory``            11e         a GPU's memory levels (H100), what FlashAttention keeps in each
=============================  ==========  ================================================================
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib import pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle

# ----------------------------------------------------------------------------------------------
# Palette and font sizes, shared by every figure
# ----------------------------------------------------------------------------------------------

COLORS = {
    "input": "#dbe9f6",  # tokens, embeddings, source states
    "attention": "#fde0c5",  # scoring, softmax, attention layers
    "recurrent": "#d9f0d3",  # GRUs and decoder states
    "norm": "#eeeeee",  # layer norms, residual sums
    "output": "#e8dff5",  # output layers and distributions
    "context": "#fff2a8",  # context vectors, caches
    "highlight": "#d62728",  # what the figure is about (the bottleneck, the new token, the current tile)
    "masked": "#c8c8c8",  # masked or skipped cells
    "edge": "#404040",
    "text": "#202020",
    "frame": "#8c8c8c",
}
HEAD_COLORS = ["#4c78a8", "#f58518", "#54a24b", "#b279a2"]  # one per head in the multi-head figure
# The book shows a figure at the width of its text column (752 pixels at a 1280-pixel window) with
# body text of 16 pixels, so a label of ``pt`` points on a canvas ``w`` inches wide reads at
# ``pt / 72 * 752 / (w + 0.2)`` pixels (Jupyter crops each figure to its drawing plus 0.1 inch a side):
# 10 points on the 7.8-inch canvases is 13 pixels, 80 % of the body text (tests/test_diagrams.py).
FONT = {"box": 11, "small": 10, "tiny": 10, "title": 12}
DPI = 100  # a 7.8-inch canvas is 800 pixels wide, a little more than the column: shown sharp, never enlarged


# ----------------------------------------------------------------------------------------------
# Primitives
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Box:
    """A drawn box: centre ``(x, y)``, width ``w`` and height ``h`` in inches."""

    x: float
    y: float
    w: float
    h: float

    @property
    def left(self) -> float:
        return self.x - self.w / 2

    @property
    def right(self) -> float:
        return self.x + self.w / 2

    @property
    def top(self) -> float:
        return self.y + self.h / 2

    @property
    def bottom(self) -> float:
        return self.y - self.h / 2


def _canvas(ax: Axes | None, size: tuple[float, float]) -> tuple[Figure, Axes]:
    """A blank drawing area of ``size`` inches: a new figure, or ``ax`` (a matplotlib ``Axes``) with the same
    limits."""
    if ax is not None and not isinstance(ax, Axes):
        raise ValueError(f"ax must be None (a new figure) or a matplotlib Axes, got {type(ax).__name__}")
    if ax is None:
        fig = plt.figure(figsize=size, dpi=DPI)
        ax = fig.add_axes((0, 0, 1, 1))
    fig = ax.figure
    ax.set_xlim(0, size[0])
    ax.set_ylim(0, size[1])
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_axis_off()
    return fig, ax


def _box(ax: Axes, x: float, y: float, w: float, h: float, text: str = "", color: str = COLORS["input"],
         size: int = FONT["box"], edge: str = COLORS["edge"], lw: float = 1.0, **text_kw) -> _Box:
    """A rounded box centred on ``(x, y)`` with ``text`` in its middle."""
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0,rounding_size=0.06",
                                facecolor=color, edgecolor=edge, linewidth=lw))
    if text:
        _label(ax, x, y, text, size=size, **text_kw)
    return _Box(x, y, w, h)


def _arrow(ax: Axes, start, end, color: str = COLORS["edge"], lw: float = 1.0, style: str = "-|>",
           ls: str = "-", rad: float = 0.0) -> None:
    """An arrow from ``start`` to ``end`` (points in inches), straight or bent by ``rad``."""
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=9, color=color, linewidth=lw,
                                 linestyle=ls, shrinkA=0, shrinkB=0, connectionstyle=f"arc3,rad={rad}"))


def _path(ax: Axes, points, color: str = COLORS["edge"], lw: float = 1.0, ls: str = "-", head: bool = True) -> None:
    """A polyline through ``points`` with an arrow head on its last segment."""
    xs, ys = zip(*points)
    ax.plot(xs[:-1], ys[:-1], color=color, lw=lw, ls=ls, solid_capstyle="butt")
    _arrow(ax, points[-2], points[-1], color=color, lw=lw, style="-|>" if head else "-", ls=ls)


def _label(ax: Axes, x: float, y: float, text: str, size: int = FONT["small"], ha: str = "center",
           va: str = "center", color: str = COLORS["text"], **kw):
    """Text at ``(x, y)``, centred unless told otherwise."""
    return ax.text(x, y, text, fontsize=size, ha=ha, va=va, color=color, **kw)


def _grid(ax: Axes, left: float, bottom: float, rows: int, cols: int, cell: float, colors,
          texts=None, size: int = FONT["tiny"], edge: str = "white") -> None:
    """A ``rows`` x ``cols`` grid of square cells (row 0 on top); ``colors[r][c]`` fills each cell and
    ``texts[r][c]`` (optional, ``""`` for none) is written in it."""
    for r in range(rows):
        for c in range(cols):
            x, y = left + c * cell, bottom + (rows - 1 - r) * cell
            ax.add_patch(Rectangle((x, y), cell, cell, facecolor=colors[r][c], edgecolor=edge, linewidth=1.0))
            if texts is not None and texts[r][c]:
                _label(ax, x + cell / 2, y + cell / 2, texts[r][c], size=size)


def _shade(weight: float, rgb=(0.84, 0.15, 0.16)) -> tuple:
    """White for weight 0, ``rgb`` for weight 1."""
    return tuple(1 - weight * (1 - channel) for channel in rgb)


def _softmax(scores) -> np.ndarray:
    scores = np.asarray(scores, dtype=float)
    e = np.exp(scores - scores.max())
    return e / e.sum()


# ----------------------------------------------------------------------------------------------
# Chapter 1: the query-key-value lookup
# ----------------------------------------------------------------------------------------------

def draw_qkv_lookup(ax: Axes | None = None) -> Figure:
    """Attention as a soft lookup (chapter 1): the query ``q`` is scored against every key ``k_i`` by
    ``a(q, k_i)``, a softmax turns the scores into weights ``alpha(q, k_i)`` that sum to 1, and the output
    is the weighted average of the values ``v_i``. Three of the ``m`` key-value pairs are drawn."""
    fig, ax = _canvas(ax, (7.6, 3.4))
    rows = {"1": 2.55, "2": 1.85, "m": 1.15}
    for text, x in [("query", 0.45), ("keys", 1.35), ("scores", 2.55), ("weights", 4.95), ("values", 6.05)]:
        _label(ax, x, 3.1, text, size=FONT["small"])
    q = _box(ax, 0.45, rows["2"], 0.45, 0.4, r"$\mathbf{q}$", COLORS["attention"])
    soft = _box(ax, 3.75, rows["2"], 0.75, 1.75, "softmax", COLORS["attention"], size=FONT["small"])
    total = _box(ax, 6.95, rows["2"], 0.45, 1.75, r"$\Sigma$", COLORS["context"])
    for i, y in rows.items():
        key = _box(ax, 1.35, y, 0.5, 0.4, rf"$\mathbf{{k}}_{i}$", COLORS["input"])
        score = _box(ax, 2.55, y, 1.2, 0.4, rf"$a(\mathbf{{q}}, \mathbf{{k}}_{i})$", COLORS["attention"])
        weight = _box(ax, 4.95, y, 1.2, 0.4, rf"$\alpha(\mathbf{{q}}, \mathbf{{k}}_{i})$", COLORS["attention"])
        value = _box(ax, 6.05, y, 0.5, 0.4, rf"$\mathbf{{v}}_{i}$", COLORS["input"])
        _arrow(ax, (q.right, q.y), (key.left, y))
        _arrow(ax, (key.right, y), (score.left, y))
        _arrow(ax, (score.right, y), (soft.left, y))
        _arrow(ax, (soft.right, y), (weight.left, y))
        _label(ax, (weight.right + value.left) / 2, y + 0.13, r"$\times$", size=FONT["small"])
        _arrow(ax, (value.right, y), (total.left, y))
    out = _box(ax, 5.9, 0.4, 2.9, 0.6, r"output $\sum_{i=1}^{m} \alpha(\mathbf{q}, \mathbf{k}_i)\, \mathbf{v}_i$",
               COLORS["context"])
    _arrow(ax, (total.x, total.bottom), (total.x, out.top))
    _label(ax, 0.1, 0.4, r"the weights are positive and sum to 1 over the $m$ keys", ha="left", size=FONT["small"])
    return fig


# ----------------------------------------------------------------------------------------------
# Chapter 4: the encoder-decoder and its bottleneck
# ----------------------------------------------------------------------------------------------

def draw_encoder_decoder(ax: Axes | None = None) -> Figure:
    """The GRU encoder-decoder without attention (chapter 4, ``attn_utils.make_seq2seq``): the encoder reads
    ``x_1 ... x_T`` into states ``h_t``; its final state is the one context ``c``, which starts the decoder
    and is concatenated with the embedded previous token at every decoder step. Everything the decoder
    learns about the source passes through ``c``: the bottleneck."""
    fig, ax = _canvas(ax, (7.6, 3.4))
    _label(ax, 1.35, 3.15, "encoder (GRU)", size=FONT["title"])
    _label(ax, 5.45, 3.15, "decoder (GRU)", size=FONT["title"])
    states = []
    for x, t in [(0.5, "1"), (1.35, "2"), (2.2, "T")]:
        token = _box(ax, x, 0.45, 0.55, 0.36, rf"$x_{t}$", COLORS["input"])
        state = _box(ax, x, 1.75, 0.55, 0.4, rf"$\mathbf{{h}}_{t}$", COLORS["recurrent"])
        _arrow(ax, (x, token.top), (x, state.bottom))
        if states:
            _arrow(ax, (states[-1].right, state.y), (state.left, state.y))
        states.append(state)
    context = _box(ax, 3.3, 1.75, 0.45, 0.55, r"$\mathbf{c}$", COLORS["context"], edge=COLORS["highlight"], lw=2.0)
    _arrow(ax, (states[-1].right, context.y), (context.left, context.y))
    _label(ax, 3.3, 2.55, "bottleneck:", size=FONT["small"], color=COLORS["highlight"])
    _label(ax, 3.3, 2.3, "one vector of fixed size", size=FONT["small"], color=COLORS["highlight"])
    previous = None
    for k, (x, given, written) in enumerate([(4.45, "<bos>", "1"), (5.45, r"$y_1$", "2"),
                                            (6.45, r"$y_{2}$", "3")], start=1):
        state = _box(ax, x, 1.75, 0.55, 0.4, rf"$\mathbf{{s}}_{k}$", COLORS["recurrent"])
        token = _box(ax, x + 0.12, 0.45, 0.62, 0.36, given, COLORS["input"], size=FONT["small"])
        out = _box(ax, x, 2.7, 0.5, 0.36, rf"$y_{written}$", COLORS["output"])
        _arrow(ax, (x + 0.12, token.top), (x + 0.12, state.bottom))
        _path(ax, [(context.x, context.bottom), (context.x, 1.0), (x - 0.14, 1.0), (x - 0.14, state.bottom)],
              color=COLORS["highlight"], lw=1.0)
        _arrow(ax, (x, state.top), (x, out.bottom))
        _arrow(ax, (previous.right if previous else context.right, state.y), (state.left, state.y))
        previous = state
    _label(ax, 3.3, 0.45, r"$\mathbf{c}$ enters every step", size=FONT["small"], color=COLORS["highlight"])
    return fig


# ----------------------------------------------------------------------------------------------
# Chapter 5: one step of Bahdanau's decoder
# ----------------------------------------------------------------------------------------------

def draw_bahdanau_step(ax: Axes | None = None) -> Figure:
    """One decoder step of Bahdanau et al. (chapter 5, ``attn_utils.BahdanauDecoder``): the *previous* state
    ``s_{i-1}`` is the query of the additive scores ``e_ij`` against the annotations ``h_j``; their softmax
    ``alpha_ij`` averages the annotations into ``c_i``; the GRU reads ``[E y_{i-1}; c_i]`` and ``s_{i-1}`` and
    gives ``s_i``; the deep output (maxout) reads ``s_i``, ``E y_{i-1}`` and ``c_i``."""
    fig, ax = _canvas(ax, (7.8, 4.6))
    xs = {"1": 1.3, "j": 2.2, "T_x": 3.1}
    annotations = {j: _box(ax, x, 0.75, 0.6, 0.4, rf"$\mathbf{{h}}_{{{j}}}$", COLORS["input"]) for j, x in xs.items()}
    _label(ax, 2.2, 0.22, r"annotations $\mathbf{h}_j = [\overrightarrow{\mathbf{h}}_j;\, "
                          r"\overleftarrow{\mathbf{h}}_j]$", size=FONT["small"])
    score = _box(ax, 2.2, 1.6, 2.55, 0.42,
                 r"$e_{ij} = \mathbf{v}_a^\top \tanh(\mathbf{W}_a \mathbf{s}_{i-1} + \mathbf{U}_a \mathbf{h}_j)$",
                 COLORS["attention"], size=FONT["small"])
    weights = {j: _box(ax, x, 2.4, 0.6, 0.38, rf"$\alpha_{{i{j}}}$", COLORS["attention"]) for j, x in xs.items()}
    _label(ax, 3.55, 2.4, r"softmax over $j$", ha="left", size=FONT["small"])
    context = _box(ax, 2.2, 3.25, 1.7, 0.42, r"$\mathbf{c}_i = \sum_j \alpha_{ij} \mathbf{h}_j$", COLORS["context"])
    for j, x in xs.items():
        _arrow(ax, (x, annotations[j].top), (x, score.bottom))
        _arrow(ax, (x, score.top), (x, weights[j].bottom))
        _arrow(ax, (x, weights[j].top), (context.x + (x - context.x) * 0.5, context.bottom))
    query = _box(ax, 0.5, 4.1, 0.62, 0.42, r"$\mathbf{s}_{i-1}$", COLORS["recurrent"])
    _path(ax, [(query.x, query.bottom), (query.x, score.y), (score.left, score.y)])
    _label(ax, 0.5, 4.5, "query", size=FONT["small"])
    concat = _box(ax, 5.1, 3.25, 1.35, 0.42, r"$[\mathbf{E} y_{i-1};\, \mathbf{c}_i]$", COLORS["input"])
    _arrow(ax, (context.right, context.y), (concat.left, concat.y))
    previous = _box(ax, 5.1, 2.4, 0.7, 0.38, r"$y_{i-1}$", COLORS["input"])
    _arrow(ax, (previous.x, previous.top), (previous.x, concat.bottom))
    gru = _box(ax, 5.1, 4.1, 0.8, 0.42, "GRU", COLORS["recurrent"])
    _arrow(ax, (concat.x, concat.top), (gru.x, gru.bottom))
    _arrow(ax, (query.right, query.y), (gru.left, gru.y))
    state = _box(ax, 6.75, 4.1, 0.6, 0.42, r"$\mathbf{s}_i$", COLORS["recurrent"])
    _arrow(ax, (gru.right, gru.y), (state.left, state.y))
    _label(ax, 6.75, 4.5, r"next step's query", size=FONT["small"])
    deep = _box(ax, 6.75, 3.25, 1.1, 0.42, r"maxout $\mathbf{t}_i$", COLORS["output"], size=FONT["small"])
    _arrow(ax, (state.x, state.bottom), (deep.x, deep.top))
    _arrow(ax, (concat.right, concat.y), (deep.left, deep.y))
    probs = _box(ax, 6.75, 2.4, 1.3, 0.42, r"$\mathrm{softmax}(\mathbf{W}_o \mathbf{t}_i)$", COLORS["output"],
                 size=FONT["small"])
    _arrow(ax, (deep.x, deep.bottom), (probs.x, probs.top))
    _arrow(ax, (probs.x, probs.bottom), (probs.x, 1.85))
    _label(ax, 6.75, 1.7, r"$P(y_i \mid y_{<i}, \mathbf{x})$", size=FONT["small"])
    return fig


# ----------------------------------------------------------------------------------------------
# Chapter 6: Luong's global and local-p attention
# ----------------------------------------------------------------------------------------------

_LUONG_SCORES = np.array([0.5, 1.6, -0.2, 0.9, 2.0, 0.3, 1.2, -0.6, 0.4, 1.0])  # chapter 6's made-up row


def _luong_panel(ax: Axes, left: float, weights: np.ndarray, inside: np.ndarray, cell: float) -> list[float]:
    """Source states as cells at the bottom of a panel, with bars of ``weights`` above them; cells outside
    the window (``inside`` False) are greyed. Returns the cells' centres."""
    centres = []
    for s, (w, keep) in enumerate(zip(weights, inside)):
        x = left + s * cell
        ax.add_patch(Rectangle((x, 0.75), cell, cell, facecolor=COLORS["input"] if keep else COLORS["masked"],
                               edgecolor="white"))
        ax.add_patch(Rectangle((x + 0.04, 1.1), cell - 0.08, 1.1 * w / 0.6, facecolor=COLORS["highlight"]))
        centres.append(x + cell / 2)
    ax.plot([left, left + len(weights) * cell], [1.1, 1.1], color=COLORS["edge"], lw=0.8)
    return centres


def draw_luong_windows(ax: Axes | None = None) -> Figure:
    """Luong et al.'s global attention next to local-p (chapter 6, ``attn_utils.LuongDecoder``): global
    attention scores the current top state ``h_t`` against every source state ``h̄_s`` and takes the softmax
    over all ``S`` positions; local-p predicts a centre ``p_t = S sigmoid(v_pᵀ tanh(W_p h_t))``, takes the
    softmax over the window ``|s - p_t| <= D`` only (exactly 0 outside) and multiplies it by a Gaussian with
    ``sigma = D / 2``. The bars are the weights ``a_t(s)`` of chapter 6's example row of scores."""
    fig, ax = _canvas(ax, (7.8, 3.6))
    cell, S, D, p_t = 0.3, len(_LUONG_SCORES), 2, 5.3
    positions = np.arange(S)
    inside = np.abs(positions - p_t) <= D
    global_w = _softmax(_LUONG_SCORES)
    local = np.where(inside, np.exp(_LUONG_SCORES - _LUONG_SCORES[inside].max()), 0.0)
    local = local / local.sum() * np.exp(-(positions - p_t) ** 2 / (2 * (D / 2) ** 2))

    # global
    left = 0.3
    _label(ax, left + S * cell / 2, 3.35, "global: every source position", size=FONT["title"])
    h_t = _box(ax, 0.55, 2.75, 0.5, 0.38, r"$\mathbf{h}_t$", COLORS["recurrent"])
    _label(ax, h_t.right + 0.12, 2.75, r"$a_t(s) = \mathrm{softmax}_s\, \mathrm{score}(\mathbf{h}_t, "
                                       r"\bar{\mathbf{h}}_s)$", ha="left", size=FONT["small"])
    _luong_panel(ax, left, global_w, np.ones(S, bool), cell)
    _label(ax, left + S * cell / 2, 0.5, r"source states $\bar{\mathbf{h}}_s$, $s = 0, \ldots, S - 1$",
           size=FONT["small"])
    _label(ax, left + S * cell / 2, 0.2, r"$\mathbf{c}_t = \sum_s a_t(s)\, \bar{\mathbf{h}}_s$", size=FONT["small"])

    # local-p
    left = 4.3
    _label(ax, left + S * cell / 2, 3.35, r"local-p: a window around $p_t$", size=FONT["title"])
    h_t = _box(ax, 4.55, 2.75, 0.5, 0.38, r"$\mathbf{h}_t$", COLORS["recurrent"])
    centre = _box(ax, 6.25, 2.75, 2.6, 0.38,
                  r"$p_t = S \cdot \mathrm{sigmoid}(\mathbf{v}_p^\top \tanh(\mathbf{W}_p \mathbf{h}_t))$",
                  COLORS["attention"], size=FONT["small"])
    _arrow(ax, (h_t.right, h_t.y), (centre.left, centre.y))
    x_of = lambda s: left + (s + 0.5) * cell  # noqa: E731 - position s (fractional) on the panel
    ax.add_patch(Rectangle((x_of(p_t - D) - 0.02, 0.7), x_of(p_t + D) - x_of(p_t - D) + 0.04, 1.72,
                           facecolor="none", edgecolor=COLORS["frame"], linestyle="--"))
    _luong_panel(ax, left, local, inside, cell)
    s = np.linspace(0, S - 1, 200)
    ax.plot([x_of(v) for v in s], 1.1 + 1.0 * np.exp(-(s - p_t) ** 2 / (2 * (D / 2) ** 2)),
            color=COLORS["edge"], lw=1.0, ls=":")
    _arrow(ax, (x_of(p_t), centre.bottom), (x_of(p_t), 2.42))
    ax.plot([x_of(p_t)] * 2, [0.75, 2.42], color=COLORS["edge"], lw=0.8, ls=":")
    _label(ax, x_of(p_t) + 0.08, 2.3, r"$p_t$", ha="left", size=FONT["small"])
    _label(ax, x_of(p_t + D) + 0.2, 1.9, r"$\sigma = D/2$", ha="left", size=FONT["small"])
    _label(ax, left + S * cell / 2, 0.5, r"window $|s - p_t| \leq D$; grey: $a_t(s) = 0$", size=FONT["small"])
    _label(ax, left + S * cell / 2, 0.2, r"$a_t(s) = \mathrm{softmax}_{\mathrm{window}} \cdot "
                                         r"\exp(-(s - p_t)^2 / 2\sigma^2)$", size=FONT["small"])
    return fig


# ----------------------------------------------------------------------------------------------
# Chapter 8: self-attention with the causal mask
# ----------------------------------------------------------------------------------------------

def draw_causal_self_attention(ax: Axes | None = None) -> Figure:
    """Causal self-attention (chapter 8): the rows of ``X`` (n tokens) are projected into ``Q``, ``K`` and
    ``V``; the scores ``Q Kᵀ / sqrt(d_k)`` get ``-inf`` above the diagonal (key ``j`` after query ``i``); the
    row-wise softmax gives weights ``alpha_ij`` that are 0 there; ``Y`` is the weights times ``V``."""
    fig, ax = _canvas(ax, (7.8, 3.5))
    n, cell = 5, 0.32
    _label(ax, 0.5, 3.15, r"$\mathbf{X}$ ($n \times d$)", size=FONT["small"])
    _grid(ax, 0.2, 1.15, n, 3, 0.2, [[COLORS["input"]] * 3 for _ in range(n)], edge=COLORS["edge"])
    x_right, x_mid = 0.8, 1.15
    boxes = {}
    for name, y in [("Q", 2.55), ("K", 1.65), ("V", 0.75)]:
        boxes[name] = _box(ax, 1.75, y, 1.05, 0.4, rf"$\mathbf{{{name}}} = \mathbf{{X}} \mathbf{{W}}_{name}$",
                           COLORS["attention"], size=FONT["small"])
        _path(ax, [(x_right, 1.65), (x_mid - 0.15, 1.65), (x_mid - 0.15, y), (boxes[name].left, y)])
    rng = np.random.default_rng(3)
    scores = rng.normal(size=(n, n))
    future = np.triu(np.ones((n, n), bool), k=1)
    weights = np.where(future, 0.0, np.exp(scores))
    weights /= weights.sum(axis=1, keepdims=True)
    left_s, bottom = 2.95, 1.0
    _grid(ax, left_s, bottom, n, n, cell,
          [[COLORS["masked"] if future[i, j] else _shade(0.25 + 0.1 * scores[i, j] % 0.5) for j in range(n)]
           for i in range(n)],
          [[r"$-\infty$" if future[i, j] else "" for j in range(n)] for i in range(n)])
    _label(ax, left_s + n * cell / 2, 3.2, r"scores $\mathbf{Q}\mathbf{K}^\top / \sqrt{d_k}$", size=FONT["small"])
    left_w = 5.55
    _grid(ax, left_w, bottom, n, n, cell,
          [[_shade(weights[i, j]) for j in range(n)] for i in range(n)],
          [["0" if future[i, j] else "" for j in range(n)] for i in range(n)])
    _label(ax, left_w + n * cell / 2, 3.2, r"weights $\alpha_{ij}$", size=FONT["small"])
    for left in (left_s, left_w):
        _label(ax, left + n * cell / 2, bottom + n * cell + 0.15, r"key $j$", size=FONT["tiny"])
        _label(ax, left - 0.15, bottom + n * cell / 2, r"query $i$", size=FONT["tiny"], rotation=90)
    _arrow(ax, (boxes["Q"].right, boxes["Q"].y), (left_s - 0.3, 2.3))
    _arrow(ax, (boxes["K"].right, boxes["K"].y), (left_s - 0.3, 1.75))
    _arrow(ax, (left_s + n * cell + 0.05, 1.8), (left_w - 0.3, 1.8))
    _label(ax, (left_s + n * cell + left_w - 0.25) / 2, 1.98, "softmax", size=FONT["tiny"])
    y_out = _box(ax, 7.5, 1.8, 0.45, 0.4, r"$\mathbf{Y}$", COLORS["context"])
    _arrow(ax, (left_w + n * cell + 0.05, 1.8), (y_out.left, y_out.y))
    _path(ax, [(boxes["V"].right, boxes["V"].y), (y_out.x, boxes["V"].y), (y_out.x, y_out.bottom)])
    _label(ax, left_s + n * cell / 2, 0.55, r"$-\infty$ where $j > i$: the future", size=FONT["small"])
    _label(ax, left_w + n * cell / 2, 0.55, r"$\mathbf{Y} = \alpha \mathbf{V}$", size=FONT["small"])
    return fig


# ----------------------------------------------------------------------------------------------
# Chapter 9: multi-head attention, split and merge
# ----------------------------------------------------------------------------------------------

def _feature_bar(ax: Axes, left: float, y: float, heads: list[int], d_h: int, cell: float) -> float:
    """A row of ``len(heads) * d_h`` feature cells coloured by head; returns its right end."""
    for k, head in enumerate(heads):
        for f in range(d_h):
            x = left + (k * d_h + f) * cell
            ax.add_patch(Rectangle((x, y - cell / 2), cell, cell, facecolor=HEAD_COLORS[head], edgecolor="white"))
    return left + len(heads) * d_h * cell


def draw_multihead_split_merge(ax: Axes | None = None) -> Figure:
    """Multi-head attention as ``attn_utils.MultiHeadAttention`` computes it (chapter 9), with the tensor
    shapes: the queries projected by ``W_q`` (``d`` features, coloured by head) are split into ``h`` heads of
    ``d_h = d / h`` features, ``(batch, h, n, d_h)``; the keys and values likewise with ``m`` positions;
    every head attends on its own (weights ``(batch, h, n, m)``); the heads' outputs are put side by side
    again, ``(batch, n, h d_h) = (batch, n, d)``, and mixed by ``W_o``. Drawn for ``h = 4``, ``d_h = 2``."""
    fig, ax = _canvas(ax, (7.8, 3.9))
    h, d_h, cell = 4, 2, 0.15
    heads_y = [3.05, 2.45, 1.85, 1.25]
    mid = sum(heads_y) / h
    _label(ax, 0.9, 3.6, r"$\mathbf{X}\mathbf{W}_q$: (batch, $n$, $d$)", size=FONT["small"])
    right = _feature_bar(ax, 0.3, mid, list(range(h)), d_h, cell)
    _label(ax, 2.6, 3.6, r"split: (batch, $h$, $n$, $d_h$)", size=FONT["small"])
    _label(ax, 5.05, 3.6, r"(batch, $h$, $n$, $d_h$)", size=FONT["small"])
    _label(ax, 6.75, 3.6, r"merge: (batch, $n$, $d$)", size=FONT["small"])
    outputs_right = []
    for k, y in enumerate(heads_y):
        _label(ax, 2.6, y + 0.22, rf"head {k + 1}", size=FONT["tiny"])
        piece = _feature_bar(ax, 2.45, y, [k], d_h, cell)
        _arrow(ax, (right + 0.05, mid), (2.4, y), lw=0.8)
        attend = _box(ax, 3.75, y, 1.3, 0.36, "attention", COLORS["attention"], size=FONT["small"])
        _arrow(ax, (piece + 0.05, y), (attend.left, y), lw=0.8)
        out = _feature_bar(ax, 4.9, y, [k], d_h, cell)
        _arrow(ax, (attend.right, y), (4.85, y), lw=0.8)
        outputs_right.append((out, y))
    merged_left, merged_y = 6.15, 2.45
    merged = _feature_bar(ax, merged_left, merged_y, list(range(h)), d_h, cell)
    for out, y in outputs_right:
        _arrow(ax, (out + 0.05, y), (merged_left - 0.05, merged_y), lw=0.8)
    final_y = 1.25
    _feature_bar(ax, merged_left, final_y, [0] * h, d_h, cell)
    ax.add_patch(Rectangle((merged_left, final_y - cell / 2), merged - merged_left, cell, facecolor="#6b6b6b",
                           edgecolor="white"))
    _arrow(ax, ((merged_left + merged) / 2, merged_y - 0.12), ((merged_left + merged) / 2, final_y + 0.12))
    _label(ax, merged + 0.08, 1.85, r"$\mathbf{W}_o$", ha="left", size=FONT["small"])
    _label(ax, 6.75, 0.85, r"output: (batch, $n$, $d$)", size=FONT["small"])
    _label(ax, 3.75, 0.75, r"each head: softmax$(\mathbf{Q}_i \mathbf{K}_i^\top / \sqrt{d_h})\, \mathbf{V}_i$",
           size=FONT["small"])
    _label(ax, 3.75, 0.4, r"weights (batch, $h$, $n$, $m$); keys and values split alike: (batch, $h$, $m$, $d_h$)",
           size=FONT["small"])
    _label(ax, 0.9, 2.45, r"$d = h\, d_h$", size=FONT["small"])
    return fig


# ----------------------------------------------------------------------------------------------
# Chapter 10: the Transformer, post-norm and pre-norm, and the key-value cache
# ----------------------------------------------------------------------------------------------

_BOX_W = 1.3
_GAP = 0.1  # the arrow between two boxes of a stack


def _sublayer_height(name: str) -> float:
    return 0.3 + 0.16 * name.count("\n")


def _stack(ax: Axes, x: float, below: float, sublayers: list[str], pre_norm: bool,
           skip_side: float) -> tuple[float, dict[str, float]]:
    """A Transformer block drawn upwards at ``x`` from its input at ``below``: each sublayer with its
    residual connection, post-norm (sublayer, add & norm) or pre-norm (layer norm, sublayer, +). The
    residual line runs on the side ``skip_side`` (-1 left, +1 right). Returns the y where the block's output
    leaves its last element and the centre y of each sublayer's box."""
    skip_x = x + skip_side * (_BOX_W / 2 + 0.1)
    centres = {}
    for name in sublayers:
        branch = below + 0.05  # where the residual branch leaves the main path
        h = _sublayer_height(name)
        if pre_norm:
            norm = _box(ax, x, below + _GAP + 0.14, _BOX_W * 0.8, 0.28, "layer norm", COLORS["norm"],
                        size=FONT["tiny"])
            sub = _box(ax, x, norm.top + _GAP + h / 2, _BOX_W, h, name, COLORS["attention"], size=FONT["tiny"])
            plus_y = sub.top + _GAP + 0.1
            ax.add_patch(Circle((x, plus_y), 0.1, facecolor=COLORS["norm"], edgecolor=COLORS["edge"]))
            _label(ax, x, plus_y, "+", size=FONT["tiny"])
            _arrow(ax, (x, below), (x, norm.bottom))
            _arrow(ax, (x, norm.top), (x, sub.bottom))
            _arrow(ax, (x, sub.top), (x, plus_y - 0.1))
            _path(ax, [(x, branch), (skip_x, branch), (skip_x, plus_y), (x + skip_side * 0.1, plus_y)], lw=0.8)
            below = plus_y + 0.1
        else:
            sub = _box(ax, x, below + _GAP + h / 2, _BOX_W, h, name, COLORS["attention"], size=FONT["tiny"])
            norm = _box(ax, x, sub.top + _GAP + 0.14, _BOX_W, 0.28, "add & norm", COLORS["norm"],
                        size=FONT["tiny"])
            _arrow(ax, (x, below), (x, sub.bottom))
            _arrow(ax, (x, sub.top), (x, norm.bottom))
            _path(ax, [(x, branch), (skip_x, branch), (skip_x, norm.y), (x + skip_side * _BOX_W / 2, norm.y)],
                  lw=0.8)
            below = norm.top
        centres[name] = sub.y
    return below, centres


def _transformer_half(ax: Axes, x_enc: float, x_dec: float, pre_norm: bool, title: str, formula: str,
                      top: float) -> None:
    """One encoder-decoder, post-norm or pre-norm, for ``draw_transformer``."""
    _label(ax, (x_enc + x_dec) / 2, top - 0.2, title, size=FONT["title"])
    _label(ax, (x_enc + x_dec) / 2, top - 0.52, formula, size=FONT["small"])
    tops, cross_y = {}, None
    for x, kind, sublayers, side in [
            (x_enc, "source tokens", ["self-attention"], -1),
            (x_dec, "target tokens,\nshifted right", ["masked\nself-attention", "cross-attention"], 1)]:
        sublayers = sublayers + ["feed-forward"]
        _label(ax, x, 0.24, kind, size=FONT["tiny"])
        embed = _box(ax, x, 0.85, _BOX_W, 0.46, "embedding $\\times \\sqrt{d}$\n+ positions", COLORS["input"],
                     size=FONT["tiny"])
        frame_bottom = embed.top + 0.15
        _arrow(ax, (x, embed.top), (x, frame_bottom), style="-")
        y_out, centres = _stack(ax, x, frame_bottom, sublayers, pre_norm, side)
        cross_y = centres.get("cross-attention", cross_y)
        frame_top = y_out + 0.08
        ax.add_patch(FancyBboxPatch((x - _BOX_W / 2 - 0.2, frame_bottom), _BOX_W + 0.4, frame_top - frame_bottom,
                                    boxstyle="round,pad=0,rounding_size=0.08", facecolor="none",
                                    edgecolor=COLORS["frame"], linestyle="--"))
        _label(ax, x - _BOX_W / 2 - 0.02, frame_top, r"$N \times$", size=FONT["tiny"],
               bbox=dict(facecolor="white", edgecolor="none", pad=0.5))
        out = frame_top
        if pre_norm:
            final = _box(ax, x, out + 0.32, _BOX_W, 0.28, "final layer norm", COLORS["norm"],
                         size=FONT["tiny"], edge=COLORS["highlight"], lw=1.5)
            _arrow(ax, (x, out), (x, final.bottom))
            out = final.top
        tops[kind] = out
    # the decoder's output layer
    decoder_top = tops["target tokens,\nshifted right"]
    linear = _box(ax, x_dec, decoder_top + 0.32, _BOX_W * 0.8, 0.28, "linear", COLORS["output"], size=FONT["tiny"])
    _arrow(ax, (x_dec, decoder_top), (x_dec, linear.bottom))
    soft = _box(ax, x_dec, linear.top + 0.3, _BOX_W * 0.8, 0.28, "softmax", COLORS["output"], size=FONT["tiny"])
    _arrow(ax, (x_dec, linear.top), (x_dec, soft.bottom))
    # the encoder's output is the keys and values of every decoder block's cross-attention
    bus = tops["source tokens"] + 0.22
    gap = x_dec - _BOX_W / 2 - 0.42
    _path(ax, [(x_enc, tops["source tokens"]), (x_enc, bus), (gap, bus), (gap, cross_y),
               (x_dec - _BOX_W / 2, cross_y)], color=COLORS["highlight"], lw=1.0)
    _label(ax, (x_enc + gap) / 2, bus + 0.15, "keys, values", size=FONT["tiny"], color=COLORS["highlight"])


def draw_transformer(ax: Axes | None = None) -> Figure:
    """The Transformer encoder-decoder (chapter 10, ``attn_utils.make_transformer``), post-norm (the paper,
    ``norm_first=False``: ``LN(x + F(x))``) beside pre-norm (``norm_first=True``, the default of
    ``make_transformer`` and the model the chapter trains: ``x + F(LN(x))``, and one final layer norm after
    each stack). Encoder blocks: self-attention and feed-forward; decoder blocks: masked self-attention,
    cross-attention to the encoder's output, feed-forward; each stack of ``N`` blocks starts from the
    embeddings times ``sqrt(d)`` plus positions; a linear layer and a softmax follow the decoder."""
    width, height = 7.8, 7.0
    fig, ax = _canvas(ax, (width, height))
    _transformer_half(ax, 0.92, 2.92, False, "post-norm (the paper)",
                      r"$\mathbf{x} \leftarrow \mathrm{LN}(\mathbf{x} + F(\mathbf{x}))$", height)
    _transformer_half(ax, 4.88, 6.88, True, "pre-norm (norm_first=True)",
                      r"$\mathbf{x} \leftarrow \mathbf{x} + F(\mathrm{LN}(\mathbf{x}))$", height)
    ax.plot([3.9, 3.9], [0.1, height - 0.1], color=COLORS["frame"], lw=0.8)
    return fig


def draw_kv_cache(ax: Axes | None = None) -> Figure:
    """One step of incremental decoding with the key-value cache (chapter 10, ``attn_utils.TransformerDecoder``):
    in each block, only the newest token ``x_t`` is projected; its key and value are appended to the cached
    ones of the earlier positions, and its query attends to all of them. The cross-attention keys and values
    of the ``S`` source positions were projected once, in ``init_state``, and are reused at every step."""
    fig, ax = _canvas(ax, (7.8, 4.4))
    cell, cached, left = 0.32, 5, 2.75
    _label(ax, 3.9, 4.18, r"one decoder block at step $t$: only the newest token is computed", size=FONT["title"])
    x_t = _box(ax, 0.55, 2.6, 0.6, 0.42, r"$\mathbf{x}_t$", COLORS["input"], edge=COLORS["highlight"], lw=2.0)
    _label(ax, 0.55, 2.15, "newest token", size=FONT["tiny"])
    rows = {"q": 3.55, "k": 2.6, "v": 1.65}
    new_x = left + cached * cell + cell / 2  # the centre of the newest position's cell
    attend = _box(ax, 6.45, 2.15, 2.2, 0.5, r"softmax$(\mathbf{q}_t^\top \mathbf{K} / \sqrt{d_h})\, \mathbf{V}$",
                  COLORS["attention"], size=FONT["small"])
    for name, y in rows.items():
        box = _box(ax, 1.85, y, 0.95, 0.4, rf"$\mathbf{{{name}}}_t = \mathbf{{W}}_{name.upper()} \mathbf{{x}}_t$",
                   COLORS["attention"], size=FONT["small"])
        _path(ax, [(x_t.right, x_t.y), (1.1, x_t.y), (1.1, y), (box.left, y)])
        if name == "q":
            _path(ax, [(box.right, y), (attend.x, y), (attend.x, attend.top)])
            continue
        texts = [[rf"${j}$" for j in range(1, cached - 1)] + [r"$\cdots$", r"$t{-}1$", r"$t$"]]
        _grid(ax, left, y - cell / 2, 1, cached + 1, cell, [[COLORS["context"]] * cached + [COLORS["highlight"]]],
              texts)
        above = y + cell / 2 + 0.14
        _path(ax, [(box.right, y), (2.55, y), (2.55, above), (new_x, above), (new_x, y + cell / 2)],
              color=COLORS["highlight"])
        what = "keys" if name == "k" else "values"
        _label(ax, left + (cached + 1) * cell / 2, y - cell / 2 - 0.16,
               rf"cached {what} of positions $1, \ldots, t-1$ and $t$", size=FONT["tiny"])
        end = left + (cached + 1) * cell
        _arrow(ax, (end + 0.05, y), (attend.left, attend.y + (0.1 if name == "k" else -0.1)))
    for k, text in enumerate(["self_k, self_v:", r"(blocks, batch, heads, $P$, $d$/heads)",
                              r"$P$ grows by one position per step"]):
        _label(ax, attend.x, attend.bottom - 0.2 - 0.23 * k, text, size=FONT["tiny"])
    # cross-attention cache
    ax.plot([0.2, 7.6], [0.95, 0.95], color=COLORS["frame"], lw=0.6, ls="--")
    _grid(ax, 0.3, 0.35, 1, 6, 0.26, [[COLORS["input"]] * 6])
    _label(ax, 2.1, 0.62, r"cross_k, cross_v: the source's $S$ positions, projected once in init_state",
           ha="left", size=FONT["tiny"])
    _label(ax, 2.1, 0.36, r"and reused at every step: (blocks, batch, heads, $S$, $d$/heads)", ha="left",
           size=FONT["tiny"])
    return fig


# ----------------------------------------------------------------------------------------------
# Chapter 11b: tiled attention
# ----------------------------------------------------------------------------------------------

def draw_tiled_attention(ax: Axes | None = None) -> Figure:
    """The loop of tiled attention (chapter 11b, ``attn_utils.tiled_attention``, FlashAttention-2's forward
    pass): for query block ``Q_i`` the key blocks ``K_j, V_j`` are visited in turn; each gives one
    ``B_r x B_c`` tile of scores ``S_ij``, which updates the running maximum ``m_i``, normaliser ``l_i`` and
    unnormalised output ``Õ_i`` and is then dropped; after the last key block ``O_i = Õ_i / l_i`` and
    ``L_i = m_i + log l_i``. Tiles already visited are grey, later ones white."""
    fig, ax = _canvas(ax, (7.8, 3.7))
    tiles, size, i, j = 4, 0.55, 1, 2  # the current tile: query block i, key block j (0-based)
    left, bottom = 0.75, 0.55
    colors = [[COLORS["highlight"] if (r, c) == (i, j) else COLORS["masked"] if r == i and c < j
               else COLORS["context"] if r == i else "white" for c in range(tiles)] for r in range(tiles)]
    _grid(ax, left, bottom, tiles, tiles, size, colors, edge=COLORS["edge"])
    _label(ax, left + tiles * size / 2, 3.45,
           r"scores $\mathbf{S} = \tau \mathbf{Q}\mathbf{K}^\top$, never stored whole", size=FONT["small"])
    row_y = bottom + (tiles - 1 - i) * size + size / 2
    col_x = left + j * size + size / 2
    _label(ax, left - 0.3, row_y, r"$\mathbf{Q}_i$", size=FONT["box"])
    _label(ax, col_x, bottom + tiles * size + 0.2, r"$\mathbf{K}_j, \mathbf{V}_j$", size=FONT["small"])
    _label(ax, left + tiles * size / 2, 0.3, r"tile: $B_r \times B_c$ scores", size=FONT["small"])
    _arrow(ax, (left + 0.05, row_y - 0.12), (left + tiles * size - 0.05, row_y - 0.12), lw=0.8, style="->")
    _label(ax, left + tiles * size / 2 - size, row_y + 0.12, r"$j = 1, \ldots, T_c$", size=FONT["tiny"])
    x0 = 3.4
    lines = [
        (3.2, r"for each key block $j$ (one tile at a time):", FONT["small"]),
        (2.8, r"$\mathbf{S}_{ij} = \tau\, \mathbf{Q}_i \mathbf{K}_j^\top$", FONT["box"]),
        (2.4, r"$m_i^{(j)} = \max(m_i^{(j-1)}, \mathrm{rowmax}(\mathbf{S}_{ij}))$,  "
              r"$\tilde{\mathbf{P}}_{ij} = e^{\mathbf{S}_{ij} - m_i^{(j)}}$", FONT["box"]),
        (2.0, r"$\ell_i^{(j)} = e^{m_i^{(j-1)} - m_i^{(j)}}\, \ell_i^{(j-1)} + "
              r"\mathrm{rowsum}(\tilde{\mathbf{P}}_{ij})$", FONT["box"]),
        (1.6, r"$\tilde{\mathbf{O}}_i^{(j)} = e^{m_i^{(j-1)} - m_i^{(j)}}\, \tilde{\mathbf{O}}_i^{(j-1)} + "
              r"\tilde{\mathbf{P}}_{ij} \mathbf{V}_j$", FONT["box"]),
        (1.05, r"after the last key block:", FONT["small"]),
        (0.7, r"$\mathbf{O}_i = \tilde{\mathbf{O}}_i / \ell_i$,   $L_i = m_i + \log \ell_i$", FONT["box"]),
    ]
    for y, text, size_ in lines:
        _label(ax, x0 + 0.15, y, text, ha="left", size=size_)
    ax.add_patch(FancyBboxPatch((x0, 1.35), 4.25, 1.65, boxstyle="round,pad=0,rounding_size=0.08",
                                facecolor=COLORS["context"], edgecolor=COLORS["edge"], alpha=0.5))
    _arrow(ax, (col_x + size / 2 + 0.02, row_y), (x0 - 0.02, 2.2), color=COLORS["highlight"], rad=-0.2)
    return fig


# ----------------------------------------------------------------------------------------------
# Chapter 11e: the GPU's memory hierarchy and FlashAttention's kernel
# ----------------------------------------------------------------------------------------------

#: the memory levels of an NVIDIA H100 SXM5 (NVIDIA's H100 whitepaper, 2022): (name, size, what the kernel
#: keeps there); registers and shared memory are per streaming multiprocessor (SM), of which there are 132
GPU_MEMORY_LEVELS = [
    ("registers", "256 KB per SM",
     r"$\mathbf{Q}_i$, $m_i$, $\ell_i$, $\tilde{\mathbf{O}}_i$ and the tile "
     r"$\mathbf{S}_{ij}$, $\tilde{\mathbf{P}}_{ij}$"),
    ("shared memory", "228 KB per SM", r"$\mathbf{K}_j, \mathbf{V}_j$ tiles, loaded ahead of use"),
    ("L2 cache", "50 MB", r"$\mathbf{K}_j, \mathbf{V}_j$ read by many programs at once"),
    ("HBM3", "80 GB", r"$\mathbf{Q}, \mathbf{K}, \mathbf{V}$ in, $\mathbf{O}, L$ out (explicit attention: "
                      r"$\mathbf{S}, \mathbf{P}$ too)"),
]


def draw_gpu_memory(ax: Axes | None = None) -> Figure:
    """The memory hierarchy of a GPU (chapter 11e, the section on FlashAttention's kernel), for an NVIDIA
    H100 SXM5: registers and shared memory inside each of the 132 streaming multiprocessors (SMs), the L2
    cache and the HBM that all SMs share, each level larger and slower than the one above it, and what
    FlashAttention's forward kernel (``attn_utils.triton_attention``) keeps at each level: the running
    ``m, l, Õ`` of one block of queries in registers, the key and value tiles in shared memory, and in HBM
    only the inputs and outputs, where explicit attention also writes its n x n scores and weights."""
    fig, ax = _canvas(ax, (7.8, 3.9))
    _label(ax, 3.9, 3.65, "NVIDIA H100 SXM5: smaller and faster towards the top; what FlashAttention keeps where",
           size=FONT["title"])
    centre, height, ys = 1.55, 0.5, [2.85, 2.1, 1.2, 0.45]
    widths = [1.5, 2.0, 2.5, 2.9]
    colors = [COLORS["highlight"], COLORS["attention"], COLORS["context"], COLORS["input"]]
    for (name, size, kept), y, w, color in zip(GPU_MEMORY_LEVELS, ys, widths, colors):
        box = _box(ax, centre, y, w, height, "", "#f4b6b6" if color == COLORS["highlight"] else color)
        _label(ax, box.x, y + 0.09, name, size=FONT["box"])
        _label(ax, box.x, y - 0.12, size, size=FONT["tiny"])
        _label(ax, 3.35, y, kept, ha="left", size=FONT["small"])
        _arrow(ax, (box.right + 0.05, y), (3.28, y), lw=0.6, style="-")
    # the two levels inside each SM, framed together
    ax.add_patch(FancyBboxPatch((centre - 1.15, 1.68), 2.3, 1.5, boxstyle="round,pad=0,rounding_size=0.06",
                                facecolor="none", edgecolor=COLORS["frame"], linestyle="--", linewidth=0.8))
    _label(ax, centre, 3.32, "inside each of 132 SMs", size=FONT["tiny"], color=COLORS["frame"])
    _label(ax, centre + 1.35, 0.86, "3.35 TB/s", size=FONT["tiny"], ha="left")
    _arrow(ax, (centre + 1.3, 0.72), (centre + 1.3, 0.98), lw=0.8, style="<|-|>")
    return fig
