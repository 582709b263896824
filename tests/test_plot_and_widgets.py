"""Heatmaps and the query explorer: what they draw, and errors for input they cannot draw."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attn_utils import show_heatmaps, soft_lookup
from attn_utils.widgets import draw_lookup, lookup_grid, query_explorer


def test_single_matrix_draws_one_panel_with_its_data():
    weights = torch.eye(4)
    fig = show_heatmaps(weights, xlabel="Keys", ylabel="Queries", titles=["eye"])
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert len(panels) == 1
    np.testing.assert_array_equal(panels[0].images[0].get_array(), np.eye(4))
    assert panels[0].get_xlabel() == "Keys" and panels[0].get_ylabel() == "Queries"
    assert panels[0].get_title() == "eye"


def test_grid_of_panels_shares_one_colour_scale():
    matrices = torch.rand(2, 3, 4, 5)
    fig = show_heatmaps(matrices, "k", "q", titles=[["a", "b", "c"], ["d", "e", "f"]], colorbar=True)
    images = [ax.images[0] for ax in fig.axes if ax.images]
    assert len(images) == 6
    assert {im.get_clim() for im in images} == {(0.0, float(matrices.max()))}
    assert [ax.get_title() for ax in fig.axes if ax.images] == list("abcdef")


def test_tick_labels_from_tokens():
    fig = show_heatmaps(torch.rand(2, 3), "keys", "queries", xticklabels=["a", "b", "c"], yticklabels=["x", "y"])
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["x", "y"]


def test_heatmap_errors():
    with pytest.raises(ValueError, match=r"got 5 dimensions"):
        show_heatmaps(torch.rand(1, 1, 1, 2, 2), "k", "q")
    with pytest.raises(ValueError, match=r"xticklabels has 2 labels but the matrices have 3"):
        show_heatmaps(torch.rand(2, 3), "k", "q", xticklabels=["a", "b"])


KEYS = [[0.0, 0.0], [2.0, 0.0], [0.0, 2.0]]
VALUES = [1.0, 5.0, 9.0]


def test_draw_lookup_shows_the_weights_and_pooled_value():
    fig = draw_lookup((0.5, 0.5), KEYS, VALUES, temperature=0.5, key_labels=["a", "b", "c"])
    plane, bars = fig.axes
    out, weights = soft_lookup(torch.tensor([[0.5, 0.5]]), torch.tensor(KEYS), torch.tensor(VALUES), temperature=0.5)
    heights = [p.get_height() for p in bars.patches]
    np.testing.assert_allclose(heights, weights[0].numpy(), rtol=1e-6)
    assert f"{out.item():.2f}" in plane.get_title()


def test_lookup_grid_has_a_row_per_query_and_temperature():
    fig = lookup_grid([(0, 0), (1, 1)], [0.1, 1.0, 10.0], KEYS, VALUES)
    assert len(fig.axes) == 12


def test_query_explorer_builds_sliders():
    pytest.importorskip("ipywidgets")
    box = query_explorer(KEYS, VALUES, query=(1.0, 1.0), temperature=0.1)
    sliders = box.children[0].children
    assert [s.description for s in sliders] == ["query x", "query y", "log₁₀ temp."]
    assert sliders[0].value == 1.0 and sliders[2].value == pytest.approx(-1.0)


def test_keys_must_be_planar():
    with pytest.raises(ValueError, match=r"shape \(num_keys, 2\); got \(3, 3\)"):
        draw_lookup((0, 0), torch.zeros(3, 3), VALUES)
