"""Device choice and seeding."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from simulated_accelerator import simulated

from attn_utils.device import DEVICE_ENV_VAR, available_devices, get_device, set_seed, try_gpu


def test_auto_picks_best_available(monkeypatch):
    monkeypatch.delenv(DEVICE_ENV_VAR, raising=False)
    assert get_device().type == available_devices()[0]
    assert available_devices()[-1] == "cpu"


def test_order_is_cuda_then_mps_then_cpu(monkeypatch):
    import attn_utils.device as device_module

    monkeypatch.delenv(DEVICE_ENV_VAR, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(device_module, "_mps_available", lambda: True)
    assert available_devices() == ["mps", "cpu"]
    assert get_device() == torch.device("mps")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert available_devices() == ["cuda", "mps", "cpu"]
    assert get_device() == torch.device("cuda")
    monkeypatch.setattr(device_module, "_mps_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert get_device() == torch.device("cpu")


def test_argument_overrides_environment(monkeypatch):
    monkeypatch.setenv(DEVICE_ENV_VAR, "cuda" if "cuda" not in available_devices() else "cpu")
    assert get_device("cpu") == torch.device("cpu")


def test_environment_variable_is_read(monkeypatch):
    monkeypatch.setenv(DEVICE_ENV_VAR, "cpu")
    assert get_device() == torch.device("cpu")
    monkeypatch.setenv(DEVICE_ENV_VAR, "auto")
    assert get_device().type == available_devices()[0]


def test_unavailable_device_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError,
                       match=r"device 'cuda' \(from the argument\) is not available here; available: .*cpu"):
        get_device("cuda")
    monkeypatch.setenv(DEVICE_ENV_VAR, "cuda")
    with pytest.raises(ValueError, match=rf"environment variable {DEVICE_ENV_VAR}"):
        get_device()


def test_nonsense_device_name(monkeypatch):
    with pytest.raises(ValueError, match=r"'gpu0' .* is not a device name"):
        get_device("gpu0")


def test_accepts_torch_device():
    assert get_device(torch.device("cpu")) == torch.device("cpu")


def test_try_gpu_falls_back_to_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    assert try_gpu() == torch.device("cpu")


def test_set_seed_repeats_every_generator():
    set_seed(123)
    first = (random.random(), np.random.rand(), torch.rand(1).item())
    set_seed(123)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == first
    set_seed(124)
    assert torch.rand(1).item() != first[2]


def test_set_seed_rejects_non_integers():
    with pytest.raises(ValueError, match="seed must be an int"):
        set_seed(1.5)


def test_accelerator_is_chosen_when_present(gpu_device, monkeypatch):
    if simulated(gpu_device):
        pytest.skip("get_device() detects real hardware (test_order_is_cuda_then_mps_then_cpu covers the choice)")
    monkeypatch.delenv(DEVICE_ENV_VAR, raising=False)
    assert get_device().type == gpu_device.type
    assert torch.ones(2, device=get_device()).sum().item() == 2.0
