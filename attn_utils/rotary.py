"""Rotary position embeddings (Su et al., 2021, RoFormer): positions enter attention as rotations.

``apply_rotary`` rotates each pair of features ``(x[..., 2i], x[..., 2i + 1])`` of the vector at
position ``p`` by the angle ``p * base^(-2i / d)``, the paper's interleaved pairs. Applied to queries
and keys, it makes their dot product depend on the positions only through their offset:
``<R(p) q, R(r) k> = <q, R(r - p) k>``, since rotations by the same angle cancel. (Some code bases pair
feature ``i`` with feature ``i + d / 2`` instead, the "rotate half" layout; it is the same idea with
the features permuted.)
"""

from __future__ import annotations

import math
import sys

import torch

from .checks import check_positive_int, checks_read_values, is_finite_number


def _largest_frequency(dim: int, base) -> float:
    """``max_i base^(-2i / dim)``: 1 for a base >= 1, the last pair's frequency for a base below 1 (inf where
    that overflows a float)."""
    try:
        return max(1.0, float(base) ** (-(dim - 2) / dim))
    except OverflowError:
        return math.inf


def check_rotary_arguments(positions, dim: int, base) -> None:
    """Raise ``ValueError`` unless ``positions`` is a real (not boolean) tensor of finite positions, ``dim`` a
    positive even int and ``base`` a finite number > 0: a NaN or inf would make every angle it touches NaN.
    The positions' values are read only where ``checks_read_values`` says (integer positions, a model's,
    hold no NaN and are not read at all)."""
    if not is_finite_number(base) or base <= 0:
        raise ValueError(f"base must be a finite number > 0, got {base!r}")
    check_positive_int("dim", dim)
    if dim % 2:
        raise ValueError(f"the feature size d must be even (the features are rotated in pairs), got d = {dim}")
    if not isinstance(positions, torch.Tensor) or positions.dtype == torch.bool or positions.is_complex():
        got = f"dtype {positions.dtype}" if isinstance(positions, torch.Tensor) else type(positions).__name__
        raise ValueError(f"positions must be a tensor of integer (or real) positions, got {got}")
    if positions.is_floating_point() and checks_read_values(positions) and not bool(positions.isfinite().all()):
        shown = positions.tolist() if positions.numel() <= 20 else "NaN or inf among them"
        raise ValueError(f"positions must be finite, got {shown}")
    if not math.isfinite(_largest_frequency(dim, base)):  # inf, and NaN at position 0 (0 * inf)
        raise ValueError(f"base={base!r} is so small that the frequency base^(-(d - 2) / d) overflows for d = {dim}; "
                         f"use a base >= 1 (10000 is usual)")


def _check_angles(angles: torch.Tensor, positions: torch.Tensor, dim: int, base) -> None:
    """Raise unless every angle is finite (read where ``checks_read_values`` says): finite positions and
    frequencies can still overflow float64 together (huge positions with a base below 1), and cos(inf) is
    NaN. Integer positions are read only where their dtype's largest value could overflow (never for a
    base >= 1), so a model's positions cost no host synchronisation."""
    if not positions.is_floating_point() and \
            torch.iinfo(positions.dtype).max * _largest_frequency(dim, base) < sys.float_info.max:
        return
    if angles.numel() and checks_read_values(angles) and not bool(angles.isfinite().all()):
        top = float(positions.abs().max())
        raise ValueError(f"the angles p * base^(-2i / d) overflow float64 for positions up to {top:g} with "
                         f"base={base!r} and d = {dim} (largest frequency {_largest_frequency(dim, base):g}); use "
                         f"smaller positions or a base >= 1")


def rotary_angles(positions: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """``(..., n, dim / 2)``: the angle ``p * base^(-2i / dim)`` for each position ``p`` and pair ``i``
    (arguments checked by ``check_rotary_arguments``)."""
    check_rotary_arguments(positions, dim, base)
    frequencies = base ** (-torch.arange(0, dim, 2, dtype=torch.float64, device=positions.device) / dim)
    angles = positions.to(torch.float64)[..., None] * frequencies  # (..., n, dim / 2)
    _check_angles(angles, positions, dim, base)
    return angles


def rotary_cos_sin(positions: torch.Tensor, dim: int, base: float = 10000.0, dtype=torch.float32):
    """``(cos, sin)``, each ``(..., n, dim / 2)`` in ``dtype``: what ``rotate`` needs for these positions.
    A model computes them once per forward pass and hands them to every block.

    The angles, their cosines and sines are computed in float64 and only then rounded to ``dtype``:
    rounding a large angle first (position 10**6 in float32 is off by up to 0.03 rad) would turn
    into errors of that size in cos and sin."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:  # .to("float32") reads a device name
        raise ValueError(f"dtype must be a floating-point torch.dtype (e.g. torch.float32), got {dtype!r}")
    angles = rotary_angles(positions, dim, base)  # (..., n, dim / 2), float64
    return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the feature pairs of ``x`` ``(..., n, d)`` by the angles whose ``cos`` and ``sin`` are given
    (``(..., n, d / 2)``, broadcasting against x's leading axes); computed in their dtype, returned in x's."""
    d = x.shape[-1]
    pairs = x.to(cos.dtype).unflatten(-1, (d // 2, 2))  # (..., n, d / 2, 2): the pairs (x_2i, x_2i+1)
    even, odd = pairs[..., 0], pairs[..., 1]
    rotated = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)  # (..., n, d / 2, 2)
    return rotated.flatten(-2).to(x.dtype)  # (..., n, d)


def apply_rotary(x: torch.Tensor, positions: torch.Tensor | None = None, base: float = 10000.0) -> torch.Tensor:
    """Rotate the feature pairs of ``x`` ``(..., n, d)`` by their position's angles: same shape and dtype.

    ``positions`` (``n`` integers, or any shape that broadcasts against ``x.shape[:-1]``) default to
    ``0 .. n - 1``; pass ``P .. P + n - 1`` for tokens that follow ``P`` cached ones.
    """
    if not isinstance(x, torch.Tensor) or x.dim() < 2 or not x.is_floating_point():
        got = f"shape {tuple(x.shape)}, dtype {x.dtype}" if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x must be a floating-point tensor (..., n, d), got {got}")
    n, d = x.shape[-2:]
    if d % 2 or d == 0:
        raise ValueError(f"the feature size d must be even and positive (the features are rotated in pairs), got "
                         f"d = {d}")
    if positions is None:
        positions = torch.arange(n, device=x.device)
    try:
        positions = torch.as_tensor(positions, device=x.device)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"positions must be a tensor of positions (or None), got {type(positions).__name__}") from None
    try:  # against x's positions, not to a larger shape: the result has x's shape
        fits = torch.broadcast_shapes(positions.shape, x.shape[:-1]) == x.shape[:-1]
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(f"positions of shape {tuple(positions.shape)} do not broadcast against the "
                         f"{tuple(x.shape[:-1])} positions of x")
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    return rotate(x, *rotary_cos_sin(positions, d, base, compute))
