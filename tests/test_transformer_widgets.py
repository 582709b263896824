"""The Transformer's attention grid and explorer: what they draw, and errors for maps they cannot draw."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from matplotlib import pyplot as plt

from attn_utils import attention_grid, make_transformer, transformer_attention, transformer_attention_explorer

SRC = ["i", "see", "a", "cat", ".", "<eos>"]
TGT = ["<bos>", "je", "vois", "un", "chat", "."]
LAYERS, HEADS = 2, 4


@pytest.fixture(scope="module")
def maps():
    """Real maps of a small untrained Transformer: a batch of 2, the first sentence of 6 source
    tokens (the second one shorter, padded) and 6 target positions."""
    torch.manual_seed(0)
    model = make_transformer(20, 30, num_hiddens=16, ffn_num_hiddens=32, num_heads=HEADS, num_blks=LAYERS)
    src = torch.randint(4, 20, (2, len(SRC)))
    tgt = torch.randint(4, 30, (2, len(TGT)))
    return transformer_attention(model, src, torch.tensor([len(SRC), 3]), tgt)


def _panels(fig):
    return [ax for ax in fig.axes if ax.images]


@pytest.mark.parametrize("kind, queries, keys", [("encoder self", SRC, SRC), ("decoder self", TGT, TGT),
                                                 ("cross", TGT, SRC)])
def test_grid_draws_every_layer_and_head_with_its_weights(maps, kind, queries, keys):
    fig = attention_grid(maps, SRC, TGT, kind)
    panels = _panels(fig)
    assert len(panels) == LAYERS * HEADS
    for n, ax in enumerate(panels):  # row by row: layer n // HEADS, head n % HEADS
        layer, head = divmod(n, HEADS)
        np.testing.assert_allclose(ax.images[0].get_array(), maps[kind][layer, 0, head].numpy(), rtol=1e-6)
        assert ax.get_title() == f"layer {layer + 1}, head {head + 1}"
        assert len(ax.get_xticks()) == len(keys) and len(ax.get_yticks()) == len(queries)
        if layer == LAYERS - 1:  # the panels share their axes: tokens under the last row ...
            assert [t.get_text() for t in ax.get_xticklabels()] == keys
        if head == 0:  # ... and left of the first column
            assert [t.get_text() for t in ax.get_yticklabels()] == queries
    assert {ax.images[0].get_clim() for ax in panels} == {(0.0, float(maps[kind][:, 0].max()))}  # one scale
    assert fig._suptitle.get_text() == f"{kind} attention"
    plt.close(fig)


def test_grid_shows_the_sentence_asked_for_and_the_mean_of_heads(maps):
    fig = attention_grid(maps, SRC, TGT, "encoder self", index=1, average=True, vmax=1.0)
    panels = _panels(fig)
    assert len(panels) == LAYERS * (HEADS + 1)
    weights = maps["encoder self"][:, 1]  # (layers, heads, Q, K) of the second, padded sentence
    np.testing.assert_allclose(panels[HEADS].images[0].get_array(), weights[0].mean(dim=0).numpy(), rtol=1e-6)
    np.testing.assert_allclose(panels[HEADS + 1].images[0].get_array(), weights[1, 0].numpy(), rtol=1e-6)
    assert panels[-1].get_title() == f"layer {LAYERS}, mean of heads"
    assert np.all(panels[0].images[0].get_array()[:, 3:] == 0)  # its padded keys get no weight
    assert panels[0].images[0].get_clim() == (0.0, 1.0)
    plt.close(fig)


def test_grid_errors_name_the_expected_shape(maps):
    with pytest.raises(ValueError, match=r"maps\['cross'\] must have shape \(layers, batch, heads, 5, 6\).*"
                                         r"got shape \(2, 2, 4, 6, 6\)"):
        attention_grid(maps, SRC, TGT[:5], "cross")
    with pytest.raises(ValueError, match=r"shape \(layers, batch, heads, 6, 6\).*got shape \(2, 4, 6, 6\)"):
        attention_grid({"encoder self": maps["encoder self"][:, 0]}, SRC, TGT, "encoder self")
    with pytest.raises(ValueError,
                       match=r"kind must be one of \('encoder self', 'decoder self', 'cross'\), got 'self'"):
        attention_grid(maps, SRC, TGT, "self")
    with pytest.raises(ValueError, match=r"with a 'cross' entry; got \['encoder self'\]"):
        attention_grid({"encoder self": maps["encoder self"]}, SRC, TGT, "cross")
    with pytest.raises(ValueError, match=r"index must pick a sentence of the batch, 0 to 1; got 2"):
        attention_grid(maps, SRC, TGT, "cross", index=2)


def test_explorer_builds_kind_layer_and_head_controls(maps):
    pytest.importorskip("ipywidgets")
    box = transformer_attention_explorer(maps, SRC, TGT)
    kind, layer, head = box.children[0].children
    assert [kind.description, layer.description, head.description] == ["attention", "layer", "head"]
    assert list(kind.options) == ["encoder self", "decoder self", "cross"] and kind.value == "cross"
    assert (layer.min, layer.max, layer.value) == (1, LAYERS, LAYERS)
    assert [label for label, _ in head.options] == [f"head {h + 1}" for h in range(HEADS)] + ["average of heads"]
    kind.value, layer.value, head.value = "decoder self", 1, -1  # redraws without error
    plt.close("all")


def test_explorer_checks_every_kind_up_front(maps):
    pytest.importorskip("ipywidgets")
    with pytest.raises(ValueError, match=r"maps\['encoder self'\] must have shape \(layers, batch, heads, 5, 5\)"):
        transformer_attention_explorer(maps, SRC[:5], TGT)
    with pytest.raises(ValueError, match=r"kind must be one of \('cross',\), got 'encoder self'"):
        transformer_attention_explorer({"cross": maps["cross"]}, SRC, TGT, kind="encoder self")
