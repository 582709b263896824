"""Shared fixtures: the d2l reference module and the devices to test on."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import matplotlib
import pytest
import torch

# Without CUDA the Triton kernels (attn_utils.triton_attention) run through Triton's interpreter, which
# Triton takes up only if the variable is set before it is first imported: here, before any test module.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

matplotlib.use("Agg")
from matplotlib import pyplot as plt

sys.path.insert(0, str(Path(__file__).resolve().parent))  # so tests can import d2l_reference
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # and the repository's tools/

from d2l_reference import load_d2l
from simulated_accelerator import ACCELERATOR, SimulatedAccelerator


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


@pytest.fixture(params=["cpu", "cuda", "mps", "simulated"])
def any_device(request):
    """Every device type: CPU always, CUDA and MPS where present (skipped cleanly where absent), and on a
    machine without CUDA a simulated accelerator (``simulated_accelerator``): the test runs with
    ``torch.device("cuda")`` on the CPU, and any tensor it or the package leaves on the CPU beside one
    "on the GPU" raises, as on CUDA."""
    if request.param == "simulated":
        if "cuda" in ACCELERATORS:
            pytest.skip("this machine has CUDA: the cuda variant runs instead")
        with SimulatedAccelerator():
            yield ACCELERATOR
        return
    if request.param != "cpu" and request.param not in ACCELERATORS:
        pytest.skip(f"no {request.param} device on this machine")
    yield torch.device(request.param)


@pytest.fixture
def gpu_device():
    """An accelerator: CUDA or MPS where present, else the simulated one (``any_device``)."""
    if ACCELERATORS:
        yield torch.device(ACCELERATORS[0])
        return
    with SimulatedAccelerator():
        yield ACCELERATOR


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
