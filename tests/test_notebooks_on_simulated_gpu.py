"""Notebooks run with the device forced to CUDA, on the simulated accelerator: a CPU tensor that meets
a model "on the GPU" fails here as it would in Colab. ``make test-gpu`` runs every notebook on a real
GPU; CI, which has none, runs the ones whose figures and evaluations move data between devices."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
import torch

from tools import execute_notebooks

TESTS = Path(__file__).resolve().parent
CHAPTERS = TESTS.parent / "chapters"
NOTEBOOKS = ["part2_seq2seq/06_luong_attention.ipynb", "part3_transformer/10_transformer.ipynb",
             "part3_transformer/11a_gpt_and_bert.ipynb"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="a real GPU is here: make test-gpu runs every notebook on it")
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_with_its_models_on_the_simulated_gpu(name, tmp_path, monkeypatch):
    startup = tmp_path / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-simulated-gpu.py").write_text(
        f"import sys\nsys.path.insert(0, {str(TESTS)!r})\n"
        "from simulated_accelerator import activate_in_this_process\nactivate_in_this_process()\n")
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path))  # the kernel runs the startup file above
    monkeypatch.setenv("ATTN_UTILS_DEVICE", "cuda")
    monkeypatch.setenv("ATTN_UTILS_QUICK", "1")
    path = CHAPTERS / name
    nb = nbformat.read(path, as_version=4)
    execute_notebooks.run(nb, path.parent, timeout=900)  # raises CellExecutionError naming the cell
    setup = next(c for c in nb.cells if c.cell_type == "code")
    printed = "".join(o.get("text", "") for o in setup.outputs)
    assert "cuda" in printed, f"the setup cell should have picked the simulated GPU; it printed {printed!r}"
