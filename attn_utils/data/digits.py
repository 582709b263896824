"""Canvases of handwritten digits in which a frame says which digit to read, for soft and hard attention.

A canvas is a grid of regions, each holding an 8x8 handwritten digit from scikit-learn's
``load_digits``; a bright frame in the margin of one region says which digit to read, and a few
other regions carry a *broken* frame (one side missing), so that bright margins alone do not
decide; ``noise`` > 0 adds Gaussian pixel noise over the whole canvas, which makes both the frame and the
digit harder to read. The label is the digit in the framed region, and its index is the ``evidence``. The glimpse
models of Xu et al. (2015) and Mnih et al. (2014) that read them are in ``attn_utils.glimpse``.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from ..canvas import DIGIT, MARGIN, REGION
from ..checks import check_non_negative_int, check_positive_int, check_seed, is_finite_number

SPLITS = {"train": (0.0, 0.6), "val": (0.6, 0.8), "test": (0.8, 1.0)}  # fractions of the 1,797 digits


@lru_cache(maxsize=1)
def load_digit_images() -> tuple[np.ndarray, np.ndarray]:
    """The 1,797 images of ``sklearn.datasets.load_digits`` scaled to [0, 1], ``(1797, 8, 8)``
    float32, and their classes ``(1797,)`` int64; loaded once, then cached."""
    from sklearn.datasets import load_digits  # bundled with scikit-learn: no download

    data = load_digits()
    return (data.images / 16.0).astype(np.float32), data.target.astype(np.int64)  # (1797, 8, 8) in [0, 1]


def digit_split(split: str) -> np.ndarray:
    """Indices into ``load_digits`` of the source digits of ``split`` ("train", "val" or "test").

    The 1,797 digits are shuffled once with a fixed seed and cut 60/20/20, so canvases of different
    splits never share a digit image, whatever seeds make the canvases.
    """
    if not isinstance(split, str) or split not in SPLITS:
        raise ValueError(f"split must be one of {sorted(SPLITS)}, got {split!r}")
    num = len(load_digit_images()[1])
    order = np.random.default_rng(0).permutation(num)
    lo, hi = SPLITS[split]
    return np.sort(order[round(lo * num):round(hi * num)])


def canvas_layout(num: int, seed: int, grid: int = 3, split: str = "train", distractors: int = 2):
    """What goes where on ``num`` canvases, without drawing them.

    Returns ``digit_ids`` ``(num, grid * grid)`` (indices into ``load_digits``, one per region, row by
    row), ``frames`` ``(num, grid * grid)`` (0: no frame, 1: the full frame, 2-5: a broken frame
    missing its top, bottom, left or right side) and ``evidence`` ``(num,)``, the framed region. ``seed`` is an
    int >= 0 (NumPy's generators take no other), ``grid`` an int >= 2, ``distractors`` one in
    ``[0, grid * grid - 1]``.
    """
    check_positive_int("num", num)
    if isinstance(grid, bool) or not isinstance(grid, int) or grid < 2:
        raise ValueError(f"grid must be an int >= 2 (at least 4 regions to choose from), got {grid!r}")
    regions = grid * grid
    check_non_negative_int("distractors", distractors)
    if not 0 <= distractors <= regions - 1:
        raise ValueError(f"distractors must lie in [0, {regions - 1}] for a {grid}x{grid} grid, got {distractors}")
    seed = check_seed("seed", seed, non_negative=True)
    pool = digit_split(split)
    rng = np.random.default_rng(seed)
    digit_ids = pool[rng.integers(0, len(pool), size=(num, regions))]  # (num, regions)
    evidence = rng.integers(0, regions, size=num)  # (num,)
    frames = np.zeros((num, regions), dtype=np.int64)
    frames[np.arange(num), evidence] = 1
    if distractors:
        # a random permutation of the other regions per canvas; the first `distractors` get broken frames
        keys = rng.random((num, regions))
        keys[np.arange(num), evidence] = 2.0  # never pick the evidence region
        chosen = np.argsort(keys, axis=1)[:, :distractors]  # (num, distractors)
        frames[np.arange(num)[:, None], chosen] = rng.integers(2, 6, size=(num, distractors))
    return torch.from_numpy(digit_ids), torch.from_numpy(frames), torch.from_numpy(evidence)


def draw_canvases(digit_ids: torch.Tensor, frames: torch.Tensor, grid: int = 3) -> torch.Tensor:
    """Images ``(num, 1, grid * 10, grid * 10)`` of a layout from :func:`canvas_layout`: ``digit_ids`` and
    ``frames`` integer tensors ``(num, grid * grid)``, the ids indices into ``load_digits``, the frames in 0..5."""
    images, _ = load_digit_images()
    if isinstance(grid, bool) or not isinstance(grid, int) or grid < 2:
        raise ValueError(f"grid must be an int >= 2, got {grid!r}")
    for name, t in (("digit_ids", digit_ids), ("frames", frames)):
        if not isinstance(t, torch.Tensor) or t.dim() != 2 or t.is_floating_point() or t.is_complex() \
                or t.dtype == torch.bool:
            got = f"shape {tuple(t.shape)}, dtype {t.dtype}" if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{name} must be an integer tensor (num, {grid * grid}), got {got}")
    num, regions = digit_ids.shape
    if regions != grid * grid or frames.shape != digit_ids.shape:
        raise ValueError(f"expected digit_ids and frames of shape (num, {grid * grid}), got "
                         f"{tuple(digit_ids.shape)} and {tuple(frames.shape)}")
    if digit_ids.numel() and not (int(digit_ids.min()) >= 0 and int(digit_ids.max()) < len(images)):
        raise ValueError(f"digit_ids must be indices into load_digits, in [0, {len(images)}), got "
                         f"{int(digit_ids.min())}..{int(digit_ids.max())}")
    if frames.numel() and not (int(frames.min()) >= 0 and int(frames.max()) <= 5):
        raise ValueError(f"frames must be 0 (none), 1 (full) or 2-5 (one side missing), got "
                         f"{int(frames.min())}..{int(frames.max())}")
    cells = np.zeros((num, regions, REGION, REGION), dtype=np.float32)
    cells[:, :, MARGIN:MARGIN + DIGIT, MARGIN:MARGIN + DIGIT] = images[digit_ids.numpy()]
    frames = frames.numpy()
    sides = [(0, slice(None)), (-1, slice(None)), (slice(None), 0), (slice(None), -1)]
    for missing, (rows, cols) in enumerate(sides, 2):
        lit = (frames == 1) | ((frames >= 2) & (frames != missing))  # (num, regions): this side is drawn
        cells[lit, rows, cols] = 1.0  # top, bottom, left, right: a row or a column of the region
    # (num, grid, grid, R, R) -> (num, grid, R, grid, R) -> (num, 1, grid * R, grid * R)
    canvas = cells.reshape(num, grid, grid, REGION, REGION).transpose(0, 1, 3, 2, 4)
    return torch.from_numpy(np.ascontiguousarray(canvas).reshape(num, 1, grid * REGION, grid * REGION))


def make_digit_canvases(num: int, seed: int, grid: int = 3, split: str = "train", distractors: int = 2,
                        noise: float = 0.0):
    """``(images (num, 1, 10 grid, 10 grid), labels (num,), evidence (num,))``, the same for the same seed.

    Each region holds a digit of ``split`` (see :func:`digit_split`); one region, the ``evidence``,
    has a full bright frame in its margin, ``distractors`` others a frame with one side missing. The
    label is the class of the framed digit. ``noise`` > 0 adds independent Gaussian noise of that
    standard deviation to every pixel (drawn from ``seed`` too; the layout is the same as without
    noise), then clips to [0, 1]. Pixels lie in [0, 1]. ``seed`` is an int >= 0, ``noise`` a finite number >= 0.
    """
    if not is_finite_number(noise) or noise < 0:
        raise ValueError(f"noise must be a standard deviation >= 0, got {noise!r}")
    digit_ids, frames, evidence = canvas_layout(num, seed, grid, split, distractors)
    labels = torch.from_numpy(load_digit_images()[1])[digit_ids[torch.arange(num), evidence]]
    images = draw_canvases(digit_ids, frames, grid)
    if noise > 0:
        rng = np.random.default_rng([seed, 1])  # a stream of its own, so the layout does not depend on the noise
        images = (images + noise * torch.from_numpy(rng.standard_normal(images.shape, dtype=np.float32))).clamp(0, 1)
    return images, labels, evidence
