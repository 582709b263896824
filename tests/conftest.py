"""Shared fixtures: the d2l reference module and the devices to test on."""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib
import pytest
import torch

matplotlib.use("Agg")
from matplotlib import pyplot as plt

sys.path.insert(0, str(Path(__file__).resolve().parent))  # so tests can import d2l_reference
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # and the repository's tools/

from d2l_reference import load_d2l


def _accelerators() -> list[str]:
    found = []
    if torch.cuda.is_available():
        found.append("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        found.append("mps")
    return found


ACCELERATORS = _accelerators()


@pytest.fixture(scope="session")
def d2l():
    """d2l's torch module (a test-time reference only)."""
    return load_d2l()


@pytest.fixture(params=["cpu"] + ["cuda", "mps"])
def any_device(request):
    """Every device type: CPU always, CUDA and MPS where present (skipped cleanly where absent)."""
    if request.param != "cpu" and request.param not in ACCELERATORS:
        pytest.skip(f"no {request.param} device on this machine")
    return torch.device(request.param)


@pytest.fixture
def gpu_device():
    """An accelerator (CUDA or MPS); tests that use it skip cleanly where there is none."""
    if not ACCELERATORS:
        pytest.skip("no CUDA or MPS device on this machine")
    return torch.device(ACCELERATORS[0])


@pytest.fixture
def one_thread():
    """Run a test on one torch thread: tiny models are fastest so, and xdist workers do not compete for cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")
