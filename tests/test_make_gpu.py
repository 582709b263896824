"""``make test-gpu``: the CUDA path's one command (it needs a GPU, so CI checks what it runs and that it
refuses without one)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def test_make_test_gpu_runs_unit_tests_and_notebooks_on_cuda_in_the_given_python():
    plan = subprocess.run(["make", "-n", "test-gpu", "PY=python3"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=True).stdout
    command = " ".join(plan.replace("\\\n", " ").split())
    assert "ATTN_UTILS_QUICK=1 ATTN_UTILS_DEVICE=cuda python3 -m pytest" in command
    assert "--nbval-lax" in command and " tests chapters " in command
    assert "pip" not in command and "venv" not in command  # it installs nothing


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: make test-gpu would run")
def test_make_test_gpu_refuses_without_a_gpu():
    result = subprocess.run(["make", "-s", "test-gpu", f"PY={sys.executable}"], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode != 0
    assert "make test-gpu needs a CUDA GPU" in result.stderr and torch.__version__ in result.stderr
