"""Picking a device and seeding every random number generator the course uses.

The device is chosen in this order: an explicit argument, the environment variable
``ATTN_UTILS_DEVICE``, then the best available accelerator (CUDA, then Apple MPS, then CPU).
"""

from __future__ import annotations

import os
import random

import numpy as np
import torch

from .checks import SEED_RANGE, check_bool, check_non_negative_int

DEVICE_ENV_VAR = "ATTN_UTILS_DEVICE"
_AUTO = "auto"


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def available_devices() -> list[str]:
    """Device types usable on this machine, best first (``cpu`` is always last)."""
    found = []
    if torch.cuda.is_available():
        found.append("cuda")
    if _mps_available():
        found.append("mps")
    found.append("cpu")
    return found


def get_device(preferred: str | torch.device | None = None) -> torch.device:
    """Return the device to compute on.

    ``preferred`` may be ``"cuda"``, ``"cuda:1"``, ``"mps"``, ``"cpu"`` or ``"auto"``; when it is
    ``None`` the environment variable ``ATTN_UTILS_DEVICE`` is read, and when that is unset too the
    best available device is taken. Asking for a device this machine lacks raises ``ValueError``
    naming what is available, rather than failing later inside torch.
    """
    source = "argument"
    choice = preferred
    if choice is None:
        choice = os.environ.get(DEVICE_ENV_VAR) or _AUTO
        source = f"environment variable {DEVICE_ENV_VAR}" if os.environ.get(DEVICE_ENV_VAR) else "default"
    if isinstance(choice, torch.device):
        choice = str(choice)
    if not isinstance(choice, str):
        raise ValueError(f"preferred must be a device name ('auto', 'cpu', 'cuda', 'cuda:N' or 'mps'), a "
                         f"torch.device or None, got {type(choice).__name__} {choice!r:.40}")
    choice = choice.strip().lower()
    if choice == _AUTO:
        return torch.device(available_devices()[0])
    try:
        device = torch.device(choice)
    except RuntimeError as err:
        raise ValueError(
            f"device {choice!r} (from the {source}) is not a device name; expected 'auto', 'cpu', "
            f"'cuda', 'cuda:N' or 'mps'"
        ) from err
    if device.type not in available_devices():
        raise ValueError(
            f"device {choice!r} (from the {source}) is not available here; available: "
            f"{', '.join(available_devices())}"
        )
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise ValueError(
            f"device {choice!r} (from the {source}) does not exist: this machine has "
            f"{torch.cuda.device_count()} CUDA device(s)"
        )
    return device


def model_device(model: torch.nn.Module, default: torch.device | None = None) -> torch.device | None:
    """The device of ``model``'s parameters (its first one); ``default`` for a model without any. ``model``: a
    ``torch.nn.Module`` (or anything with ``parameters()``)."""
    if not callable(getattr(model, "parameters", None)):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    first = next(model.parameters(), None)
    return default if first is None else first.device


def try_gpu(i: int = 0) -> torch.device:
    """d2l's name: the ``i``-th CUDA device (``i`` an int >= 0) if it exists, else the CPU."""
    check_non_negative_int("i", i)
    if torch.cuda.device_count() >= i + 1:
        return torch.device(f"cuda:{i}")
    return torch.device("cpu")


def set_seed(seed: int = 0, deterministic: bool = False) -> None:
    """Seed Python, NumPy and torch (all devices) so a notebook gives the same numbers each run.

    ``deterministic=True`` also asks torch for deterministic kernels, which some CUDA operations
    lack (they then raise instead of running nondeterministically). ``seed``: an int in [-2**63, 2**64) (torch's
    range); ``deterministic``: a bool.
    """
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError(f"seed must be an int, got {type(seed).__name__} {seed!r}")
    if not SEED_RANGE[0] <= seed < SEED_RANGE[1]:
        raise ValueError(f"seed must be an int in [-2**63, 2**64) (torch's range), got {seed}")
    check_bool("deterministic", deterministic)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # seeds CUDA and MPS generators too
    if deterministic:
        torch.use_deterministic_algorithms(True, warn_only=False)
        if torch.cuda.is_available():
            torch.backends.cudnn.benchmark = False
