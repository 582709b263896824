"""Canvases of handwritten digits with a frame around the one to read (attn_utils.data.digits)."""

from __future__ import annotations

import pytest
import torch
from data_helpers import canvas_region

from attn_utils.data.digits import (
    DIGIT,
    MARGIN,
    canvas_layout,
    digit_split,
    load_digit_images,
    make_digit_canvases,
)

# ---- data ------------------------------------------------------------------------------------------

def test_canvases_shapes_range_and_determinism():
    images, labels, evidence = make_digit_canvases(50, seed=3)
    assert images.shape == (50, 1, 30, 30) and images.dtype == torch.float32
    assert labels.shape == evidence.shape == (50,) and labels.dtype == evidence.dtype == torch.int64
    assert images.min() >= 0.0 and images.max() <= 1.0
    assert set(labels.tolist()) <= set(range(10)) and set(evidence.tolist()) <= set(range(9))
    again = make_digit_canvases(50, seed=3)
    for a, b in zip((images, labels, evidence), again):
        assert torch.equal(a, b)
    other, _, _ = make_digit_canvases(50, seed=4)
    assert not torch.equal(images, other)
    small, _, ev2 = make_digit_canvases(5, seed=0, grid=2)
    assert small.shape == (5, 1, 20, 20) and int(ev2.max()) < 4


def test_evidence_region_holds_the_labelled_digit_inside_the_full_frame():
    num, grid = 200, 3
    digit_ids, frames, evidence = canvas_layout(num, seed=7, grid=grid, distractors=2)
    images, labels, evidence2 = make_digit_canvases(num, seed=7, grid=grid, distractors=2)
    assert torch.equal(evidence, evidence2)
    source, targets = load_digit_images()
    for n in range(num):
        region = canvas_region(images[n:n + 1], int(evidence[n]), grid)[0]
        inner = region[MARGIN:MARGIN + DIGIT, MARGIN:MARGIN + DIGIT]
        digit = int(digit_ids[n, evidence[n]])
        assert torch.equal(inner, torch.from_numpy(source[digit]))  # the digit image itself
        assert int(labels[n]) == int(targets[digit])  # and its class is the label
        ring = torch.cat([region[0], region[-1], region[:, 0], region[:, -1]])
        assert bool((ring == 1.0).all())  # the full frame
    # exactly one full frame per canvas, exactly two broken frames (3 sides lit, one side dark)
    assert bool(((frames == 1).sum(1) == 1).all()) and bool(((frames >= 2).sum(1) == 2).all())
    n, k = torch.nonzero(frames >= 2)[0].tolist()
    region = canvas_region(images[n:n + 1], k, grid)[0]
    sides = [region[0, 1:-1], region[-1, 1:-1], region[1:-1, 0], region[1:-1, -1]]
    lit = [bool((s == 1.0).all()) for s in sides]
    assert sum(lit) == 3 and not lit[int(frames[n, k]) - 2]
    plain = torch.nonzero(frames == 0)[0].tolist()
    margin = canvas_region(images[plain[0]:plain[0] + 1], plain[1], grid)[0].clone()
    margin[MARGIN:MARGIN + DIGIT, MARGIN:MARGIN + DIGIT] = 0
    assert float(margin.abs().sum()) == 0.0  # no frame: a dark margin


def test_splits_are_disjoint_and_canvases_use_only_their_split():
    parts = {s: set(digit_split(s).tolist()) for s in ("train", "val", "test")}
    assert not parts["train"] & parts["test"] and not parts["train"] & parts["val"] and not parts["val"] & parts["test"]
    assert len(parts["train"] | parts["val"] | parts["test"]) == 1797
    assert [len(parts[s]) for s in ("train", "val", "test")] == [1078, 360, 359]
    for split in ("train", "test"):
        ids, _, _ = canvas_layout(300, seed=1, split=split)
        assert set(ids.flatten().tolist()) <= parts[split]


@pytest.mark.parametrize("kwargs, message", [
    (dict(num=0, seed=0), "num must be a positive integer, got 0"),
    (dict(num=5, seed=0, grid=1), "grid must be an int >= 2"),
    (dict(num=5, seed=0, split="dev"), "split must be one of"),
    (dict(num=5, seed=0, distractors=9), r"distractors must lie in \[0, 8\]"),
])
def test_bad_data_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_digit_canvases(**kwargs)


def test_noise_keeps_the_layout_and_has_the_asked_spread():
    clean, labels, evidence = make_digit_canvases(2000, seed=5)
    noisy, noisy_labels, noisy_evidence = make_digit_canvases(2000, seed=5, noise=0.25)
    assert torch.equal(labels, noisy_labels) and torch.equal(evidence, noisy_evidence)  # the same canvases
    assert noisy.min() >= 0.0 and noisy.max() <= 1.0
    assert torch.equal(noisy, make_digit_canvases(2000, seed=5, noise=0.25)[0])  # the same noise for the seed
    assert not torch.equal(noisy, make_digit_canvases(2000, seed=6, noise=0.25)[0])
    # where the clean canvas is 0, clipping keeps the positive half: E[max(0, 0.25 z)] = 0.25 / sqrt(2 pi)
    assert abs(float((noisy - clean)[clean == 0].mean()) - 0.25 * 0.39894) < 0.002
    # mid-grey pixels are rarely clipped: the difference has nearly the full standard deviation
    middle = (clean > 0.4) & (clean < 0.6)
    assert 0.22 < float((noisy - clean)[middle].std()) < 0.25
    assert torch.equal(make_digit_canvases(2000, seed=5, noise=0.0)[0], clean)  # noise=0: the clean canvases


@pytest.mark.parametrize("noise", [-0.1, float("nan"), float("inf"), "0.2"])
def test_bad_noise_is_named(noise):
    with pytest.raises(ValueError, match="noise must be a standard deviation"):
        make_digit_canvases(5, seed=0, noise=noise)


def test_distractors_and_grid_must_be_integers():
    """Before: distractors=True drew one broken frame (0 <= True <= 8), distractors=1.5 failed inside NumPy,
    grid=True was refused only because True < 2."""
    for bad in (True, 1.5, -1):
        with pytest.raises(ValueError, match=rf"distractors must be a non-negative integer, got {bad!r}"):
            canvas_layout(4, seed=0, distractors=bad)
    with pytest.raises(ValueError, match="grid must be an int >= 2"):
        canvas_layout(4, seed=0, grid=True)
