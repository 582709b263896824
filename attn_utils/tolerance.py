"""How close two floating-point results must be to count as the same: one policy for the exercise
checkers and the tests, on every device.

The same computation done in another order (another device, another number of threads, a fused
kernel) differs in its last bits. By how much depends on three things, and the tolerance follows
each of them:

* **the precision the arithmetic really ran in**: float64, float32, float16, bfloat16, or TF32. On
  CUDA, float32 matrix products and cuDNN's kernels (recurrent layers, convolutions) may round their
  inputs to TF32, float16's 10-bit mantissa, when ``torch.backends.cuda.matmul.allow_tf32`` or
  ``torch.backends.cudnn.allow_tf32`` is set; the latter is on by default, so float32 on CUDA counts
  as TF32 unless all are off (``full_float32()`` turns them off for a block of code);
* **the size of the values**: rounding errors are relative to the largest magnitude that enters the
  computation, so the absolute tolerance is ``rtol * scale``, where ``scale`` is that magnitude (at
  least 1). A score of 30 carries thirty times the absolute error of a score of 1;
* **nothing else**: the CPU, MPS and CUDA with TF32 off share float32's tolerance.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import torch

from .checks import check_device

#: relative tolerance per precision; the absolute one is ``rtol * scale``. float32's is about 840 units
#: of its rounding (2^-23): sums of a few hundred terms in any order stay well inside it, while
#: a wrong formula (a missing scale, a mask off by one) is off by far more. TF32 and float16 round every
#: input to 11 significant bits (about 5e-4), which a dot product of length d turns into a few times
#: that; bfloat16 keeps 8 bits.
RTOL = {
    "float64": 1e-10,
    "float32": 1e-4,
    "tf32": 1e-2,
    "float16": 1e-2,
    "bfloat16": 5e-2,
}


def _tf32_switches() -> list[tuple[object, str, object]]:
    """``(object, attribute, value that turns TF32 off)`` for every switch this torch has: the
    ``fp32_precision`` settings of matrix products, cuDNN's recurrent layers and convolutions (torch
    2.9 and later, where reading the older ``allow_tf32`` flags can raise), else those flags."""
    b = torch.backends
    newer = (b.cuda.matmul, getattr(b.cudnn, "rnn", None), getattr(b.cudnn, "conv", None))
    if all(hasattr(x, "fp32_precision") for x in newer):
        return [(x, "fp32_precision", "ieee") for x in newer]
    return [(b.cuda.matmul, "allow_tf32", False), (b.cudnn, "allow_tf32", False)]


def tf32_enabled() -> bool:
    """Whether float32 work on CUDA may run in TF32 (matrix products or cuDNN kernels)."""
    if torch.get_float32_matmul_precision() != "highest":
        return True
    return any(getattr(obj, name) in (True, "tf32") for obj, name, _ in _tf32_switches())


def precision(dtype: torch.dtype, device: torch.device | str = "cpu") -> str:
    """The precision float arithmetic in ``dtype`` on ``device`` really runs in: a key of ``RTOL``.

    Integer and boolean dtypes have none: they raise ``ValueError`` (compare them exactly). ``device``: a device
    or its name.
    """
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"dtype must be a torch.dtype, got {type(dtype).__name__} {dtype!r:.40}")
    device = check_device("device", device)
    if not dtype.is_floating_point:
        raise ValueError(f"{dtype} is not a floating-point dtype: compare such tensors exactly")
    name = str(dtype).replace("torch.", "")
    if name == "half":
        name = "float16"
    if name == "float32" and device.type == "cuda" and tf32_enabled():
        return "tf32"
    if name not in RTOL:
        raise ValueError(f"no tolerance for dtype {dtype}; known: {', '.join(RTOL)}")
    return name


def tolerance(dtype: torch.dtype, device: torch.device | str = "cpu", scale: float = 1.0) -> dict:
    """``{"atol": ..., "rtol": ...}`` for results in ``dtype`` computed on ``device`` from values of
    magnitude up to ``scale`` (taken as at least 1); pass it to ``torch.allclose`` or
    ``torch.testing.assert_close``. ``scale`` is a number (or a one-element tensor), not a bool or a string."""
    if isinstance(scale, (bool, str, bytes)) or scale is None:
        raise ValueError(f"scale must be a finite magnitude >= 0, got {scale!r}")
    scale = float(scale)
    if not scale >= 0 or scale == float("inf"):
        raise ValueError(f"scale must be a finite magnitude >= 0, got {scale!r}")
    rtol = RTOL[precision(dtype, device)]
    return {"atol": rtol * max(scale, 1.0), "rtol": rtol}


def least_precise(dtypes: Iterable[torch.dtype]) -> torch.dtype:
    """The floating-point dtype with the fewest mantissa bits among ``dtypes`` (torch dtypes; float32 if none is
    floating-point)."""
    dtypes = list(dtypes)
    if not all(isinstance(d, torch.dtype) for d in dtypes):
        raise ValueError(f"dtypes must be torch dtypes, got {dtypes!r:.80}")
    floats = [d for d in dtypes if d.is_floating_point]
    return max(floats, key=lambda d: torch.finfo(d).eps, default=torch.float32)


def magnitude(*tensors) -> float:
    """The largest finite absolute value among the floating-point tensors given (0.0 if none; other arguments
    are ignored)."""
    largest = 0.0
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel():
            finite = t.detach()[torch.isfinite(t.detach())]
            if finite.numel():
                largest = max(largest, finite.abs().max().item())
    return largest


def assert_close(actual: torch.Tensor, expected: torch.Tensor, scale: float | None = None,
                 device: torch.device | str | None = None, msg: str | None = None) -> None:
    """``torch.testing.assert_close`` with the tolerance of this policy.

    The precision is that of the less precise of the two tensors on ``device`` (default: the device
    ``actual`` was computed on); ``scale`` defaults to the largest magnitude of ``expected``. Both are
    compared in float64 on the CPU, so ``expected`` may be a CPU reference of another dtype. Both are tensors.
    """
    for name, t in (("actual", actual), ("expected", expected)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a tensor, got {type(t).__name__}")
    device = actual.device if device is None else check_device("device", device)
    dtype = least_precise((actual.dtype, expected.dtype))
    scale = magnitude(expected) if scale is None else scale
    torch.testing.assert_close(actual.detach().cpu().double(), expected.detach().cpu().double(),
                               **tolerance(dtype, device, scale), equal_nan=True, msg=msg)


@contextlib.contextmanager
def full_float32() -> Iterator[None]:
    """Run a block with TF32 off on CUDA (matrix products and cuDNN), restoring both flags after it.

    The exercise checkers call the reader's function inside it: they check the reader's formula, and
    float32 then means float32 on every device. Does nothing where CUDA is absent but the flags exist.
    """
    switches = _tf32_switches()
    saved = [getattr(obj, name) for obj, name, _ in switches]
    matmul_precision = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        for obj, name, off in switches:
            setattr(obj, name, off)
        yield
    finally:
        torch.set_float32_matmul_precision(matmul_precision)
        for (obj, name, _), value in zip(switches, saved):
            setattr(obj, name, value)
