"""attn_utils.diagrams: every figure renders, shows its key labels, no two labels overlap or leave the figure,
and the smallest label reads at 80 % of the body text or more where the book shows the figure."""

import io
import itertools

import matplotlib.figure
import matplotlib.text
import pytest
from matplotlib import pyplot as plt
from PIL import Image

from attn_utils import diagrams

# conftest.py selects the Agg backend before anything is drawn.
# The labels each figure must show (exact strings of its texts).
KEY_LABELS = {
    "draw_qkv_lookup": [r"$\mathbf{q}$", r"$\mathbf{k}_1$", r"$\mathbf{v}_m$", r"$a(\mathbf{q}, \mathbf{k}_1)$",
                        r"$\alpha(\mathbf{q}, \mathbf{k}_m)$", "softmax"],
    "draw_encoder_decoder": [r"$\mathbf{h}_T$", r"$\mathbf{c}$", r"$\mathbf{s}_1$", "<bos>", r"$y_1$",
                             "one vector of fixed size"],
    "draw_bahdanau_step": [r"$\mathbf{s}_{i-1}$", r"$\mathbf{h}_{j}$", r"$\alpha_{ij}$",
                           r"$\mathbf{c}_i = \sum_j \alpha_{ij} \mathbf{h}_j$",
                           r"$[\mathbf{E} y_{i-1};\, \mathbf{c}_i]$", "GRU", r"$\mathbf{s}_i$",
                           r"maxout $\mathbf{t}_i$"],
    "draw_luong_windows": [r"$\mathbf{h}_t$", r"$p_t$", r"$\sigma = D/2$",
                           r"$p_t = S \cdot \mathrm{sigmoid}(\mathbf{v}_p^\top \tanh(\mathbf{W}_p \mathbf{h}_t))$"],
    "draw_causal_self_attention": [r"$\mathbf{Q} = \mathbf{X} \mathbf{W}_Q$", r"$\mathbf{K} = \mathbf{X} \mathbf{W}_K$",
                                   r"$\mathbf{V} = \mathbf{X} \mathbf{W}_V$", r"$-\infty$", r"weights $\alpha_{ij}$",
                                   r"$\mathbf{Y}$"],
    "draw_multihead_split_merge": [r"$\mathbf{X}\mathbf{W}_q$: (batch, $n$, $d$)", r"split: (batch, $h$, $n$, $d_h$)",
                                   r"merge: (batch, $n$, $d$)", r"$\mathbf{W}_o$", "head 1", "head 4",
                                   r"$d = h\, d_h$"],
    "draw_transformer": ["post-norm (the paper)", "pre-norm (norm_first=True)", "final layer norm",
                         "masked\nself-attention", "cross-attention", "add & norm", "layer norm", "+",
                         "linear", "softmax", "keys, values", r"$N \times$"],
    "draw_kv_cache": [r"$\mathbf{x}_t$", r"$\mathbf{q}_t = \mathbf{W}_Q \mathbf{x}_t$", r"$t{-}1$", r"$t$",
                      "self_k, self_v:", r"(blocks, batch, heads, $P$, $d$/heads)"],
    "draw_tiled_attention": [r"$\mathbf{Q}_i$", r"$\mathbf{K}_j, \mathbf{V}_j$",
                             r"$\mathbf{S}_{ij} = \tau\, \mathbf{Q}_i \mathbf{K}_j^\top$"],
    "draw_gpu_memory": ["registers", "shared memory", "L2 cache", "HBM3", "256 KB per SM", "228 KB per SM",
                        "50 MB", "80 GB", "3.35 TB/s", "inside each of 132 SMs",
                        r"$\mathbf{K}_j, \mathbf{V}_j$ tiles, loaded ahead of use"],
}
FIGURES = sorted(name for name in dir(diagrams) if name.startswith("draw_"))
# Where the book shows a figure: its text column at a 1280-pixel window, body text of 16 pixels (both
# measured on every page by tests/test_browser.py, which also checks each figure's size as shown).
COLUMN_PX = 752
BODY_PX = 16
SMALLEST_LABEL = 0.8  # of the body text


def _texts(fig):
    """The figure's drawn texts with their rendered bounding boxes (pixels)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    return [(t.get_text(), t.get_window_extent(renderer)) for t in fig.findobj(matplotlib.text.Text)
            if t.get_visible() and t.get_text().strip()]


def _overlaps(texts, tolerance: float = 0.5):
    """Pairs of labels whose boxes overlap by more than ``tolerance`` pixels both ways."""
    return [(a, b) for (a, ba), (b, bb) in itertools.combinations(texts, 2)
            if min(ba.x1, bb.x1) - max(ba.x0, bb.x0) > tolerance and min(ba.y1, bb.y1) - max(ba.y0, bb.y0) > tolerance]


def _outside(fig, texts):
    box = fig.bbox
    return [a for a, b in texts if b.x0 < box.x0 or b.y0 < box.y0 or b.x1 > box.x1 or b.y1 > box.y1]


def test_every_figure_is_tested_and_documented():
    assert sorted(KEY_LABELS) == FIGURES
    for name in FIGURES:
        doc = getattr(diagrams, name).__doc__
        assert doc and "chapter" in doc, f"{name} says what it shows and which chapter uses it"


@pytest.mark.parametrize("name", FIGURES)
@pytest.mark.parametrize("dpi", [80, 100])
def test_figure_renders_with_its_labels_apart_and_inside(name, dpi):
    fig = getattr(diagrams, name)()
    try:
        fig.set_dpi(dpi)
        assert isinstance(fig, matplotlib.figure.Figure)
        width, height = fig.get_size_inches()
        assert width <= 8.0 and height <= 7.0, f"{name} is {width} x {height} inches"
        texts = _texts(fig)
        shown = {text for text, _ in texts}
        missing = [label for label in KEY_LABELS[name] if label not in shown]
        assert not missing, f"{name} does not show {missing}"
        assert not _overlaps(texts), f"{name}: labels overlap: {_overlaps(texts)}"
        assert not _outside(fig, texts), f"{name}: labels outside the figure: {_outside(fig, texts)}"
    finally:
        plt.close(fig)


def test_figure_draws_into_given_axes():
    fig, ax = plt.subplots(figsize=(7.8, 4.6))
    try:
        assert diagrams.draw_bahdanau_step(ax=ax) is fig
        assert ax.get_xlim() == (0, 7.8) and not ax.axison
    finally:
        plt.close(fig)


def test_the_checks_catch_overlapping_and_escaping_labels():
    fig = diagrams.draw_qkv_lookup()
    try:
        texts = _texts(fig)
        assert not _overlaps(texts) and not _outside(fig, texts)
        label = next(t for t in fig.findobj(matplotlib.text.Text) if t.get_text() == r"$\mathbf{k}_2$")
        label.set_position((2.55, 1.85))  # onto the score beside it
        assert (r"$\mathbf{k}_2$", r"$a(\mathbf{q}, \mathbf{k}_2)$") in _overlaps(_texts(fig))
        label.set_position((7.6, 1.85))  # half off the right edge
        assert r"$\mathbf{k}_2$" in _outside(fig, _texts(fig))
    finally:
        plt.close(fig)


def _saved_width(fig) -> int:
    """The figure's width in pixels as Jupyter stores it: at its own dpi, cropped to the drawing."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight", dpi=fig.get_dpi())
    return Image.open(buffer).size[0]


def smallest_label_px(fig, column_px: float = COLUMN_PX) -> float:
    """The smallest label's size in pixels on the page: its points at the figure's dpi, times the scale at
    which a column of ``column_px`` shows the stored image (the page narrows an image wider than its column
    and never enlarges one). Subscripts and superscripts inside a label are not counted apart."""
    points = min(t.get_fontsize() for t in fig.findobj(matplotlib.text.Text)
                 if t.get_visible() and t.get_text().strip())
    return points * fig.get_dpi() / 72 * min(1.0, column_px / _saved_width(fig))


@pytest.mark.parametrize("name", FIGURES)
def test_smallest_label_reads_at_80_percent_of_the_body_text(name):
    fig = getattr(diagrams, name)()
    try:
        size = smallest_label_px(fig)
        assert size >= SMALLEST_LABEL * BODY_PX, (
            f"{name}: its smallest label is {size:.1f} px at a {COLUMN_PX}-px column, under "
            f"{SMALLEST_LABEL:.0%} of the {BODY_PX}-px body text")
    finally:
        plt.close(fig)


def test_the_label_size_check_catches_a_small_label_and_a_wide_figure():
    fig = diagrams.draw_qkv_lookup()
    try:
        assert smallest_label_px(fig) >= SMALLEST_LABEL * BODY_PX
        assert smallest_label_px(fig, column_px=500) < SMALLEST_LABEL * BODY_PX  # shrunk to a narrow column
        next(t for t in fig.findobj(matplotlib.text.Text) if t.get_text() == "softmax").set_fontsize(7)
        assert smallest_label_px(fig) == pytest.approx(7 * diagrams.DPI / 72 * min(1.0, COLUMN_PX / _saved_width(fig)))
        assert smallest_label_px(fig) < SMALLEST_LABEL * BODY_PX
    finally:
        plt.close(fig)
