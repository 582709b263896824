"""The package's layers, read from the import statements (parsed with ``ast``: nothing is imported).

Lower layers never reach up. The models import no trainer, no data module and no evaluation: what a model
needs from them lives in the model's own module or in a small neutral one (``canvas``, ``modes``,
``losses``). The data modules import no model, only each other and the foundation. Every module of
``attn_utils`` belongs to one layer, so a new module is placed when it is added.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "attn_utils"

#: what everything may import: devices and modes, argument checks, budgets, tolerances, shared geometry
FOUNDATION = ("budgets", "canvas", "checks", "device", "modes", "tolerance")
#: the models, their layers and losses, and the decoding that reads them
MODELS = (
    "alibi", "attention", "bahdanau", "causal_attention", "decoding", "fast_attention", "glimpse", "han", "induction",
    "kernel_regression", "kv_cache", "language_models", "lookup", "losses", "luong", "masking", "multihead", "ngram",
    "online_softmax", "packed", "pooling", "positional", "registry", "relation", "rotary", "scoring", "seq2seq",
    "transformer", "triton_attention",
)
#: training: the one loop and the task trainers
TRAINING = ("training_loop", "trainers")
#: evaluation: running a model over data, the scores, measurements, checkpoints
EVALUATION = ("checkpoints", "evaluate", "measure", "metrics")
#: on top: generation (timed), figures and widgets, the course's comparisons and stored results
COURSE = ("compare", "diagrams", "plot", "sampling", "stored_results", "widgets")
#: the data generators and loaders: ``data`` and every ``data.*``
DATA = "data"
#: the package's top level, which imports every module: nothing inside the package may import it
TOP = "(the top level)"

LAYERS = {"foundation": FOUNDATION, "models": MODELS, "training": TRAINING, "evaluation": EVALUATION,
          "course": COURSE}


def imported_modules(source: str, module: str, is_package: bool = False) -> set[str]:
    """The modules of ``attn_utils`` that ``source``, the text of ``attn_utils.<module>``, imports, dotted from
    the package (``training_loop``, ``data.digits``), wherever the import stands (in a function, under
    ``TYPE_CHECKING``). ``from .data import digits`` counts as ``data``; ``from . import trainers`` as
    ``trainers``; ``import attn_utils`` as the top level. ``is_package``: the source is an ``__init__``."""
    package = ["attn_utils", *module.split(".")[:None if is_package else -1]]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            origin = ".".join(base + ([node.module] if node.module else []))
            names = [f"{origin}.{alias.name}" for alias in node.names] if origin == "attn_utils" else [origin]
        else:
            continue
        for name in names:
            if name == "attn_utils":
                found.add(TOP)
            elif name.startswith("attn_utils."):
                found.add(name.removeprefix("attn_utils."))
    return found


def _within(name: str, modules) -> bool:
    return any(name == m or name.startswith(m + ".") for m in modules)


def violations(source: str, module: str, is_package: bool = False) -> list[str]:
    """What ``attn_utils.<module>`` (its text ``source``) imports that its layer may not import."""
    imported = imported_modules(source, module, is_package)
    if _within(module, [DATA]):
        return sorted(name for name in imported if not _within(name, (DATA, *FOUNDATION)))
    if module in FOUNDATION:
        return sorted(name for name in imported if not _within(name, FOUNDATION))
    if module in MODELS:
        return sorted(name for name in imported if name == TOP or _within(name, (DATA, *TRAINING, *EVALUATION,
                                                                                *COURSE)))
    return sorted(name for name in imported if name == TOP)


def _modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (``masking``, ``data``, ``data.loader``), the top level
    and the exercise checkers apart."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[0] == "exercises" or parts == ("__init__",):
            continue
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


@pytest.mark.parametrize("module", sorted(_modules()))
def test_no_module_reaches_above_its_layer(module):
    path = _modules()[module]
    found = violations(path.read_text(encoding="utf-8"), module, is_package=path.name == "__init__.py")
    assert not found, (f"attn_utils.{module} imports {found}, above its layer: move what it needs into it, or "
                       f"into a neutral module both may import (see tests/test_layering.py)")


def test_every_module_has_one_layer():
    placed = [m for layer in LAYERS.values() for m in layer]
    assert len(placed) == len(set(placed)), f"in two layers: {sorted({m for m in placed if placed.count(m) > 1})}"
    unplaced = sorted(m for m in _modules() if not _within(m, [DATA]) and m not in placed)
    assert not unplaced, f"attn_utils.{unplaced} in no layer: add each to one of the lists in tests/test_layering.py"


def test_the_checker_catches_every_form_of_reaching_up():
    model = (
        "import torch\n"
        "from .masking import masked_softmax\n"
        "from .training_loop import fit\n"
        "from .data.digits import REGION\n"
        "from . import trainers, checks\n"
        "from .data import relations\n"
        "import attn_utils.metrics\n"
        "def later():\n"
        "    from .evaluate import accuracy\n"
        "    import attn_utils\n"
        "if TYPE_CHECKING:\n"
        "    from .checkpoints import save_checkpoint\n"
    )
    assert violations(model, "glimpse") == [TOP, "checkpoints", "data", "data.digits", "evaluate", "metrics",
                                            "trainers", "training_loop"]
    assert violations("from .masking import masked_softmax\nfrom .checks import check_tokens\n", "glimpse") == []
    data = "from .vocab import Vocab\nfrom ..canvas import REGION\nfrom ..glimpse import MODES\nfrom .. import relation"
    assert violations(data, "data.digits") == ["glimpse", "relation"]
    assert violations("from ..checks import check_stream\nfrom . import vocab\n", "data.windows") == []
    assert violations("from .loader import load_translation_data\nfrom ..seq2seq import Encoder\n", "data",
                      is_package=True) == ["seq2seq"]
    assert violations("from .masking import lengths_to_mask\n", "device") == ["masking"]
    assert violations("from .trainers import train_nw\nfrom .data import Vocab\n", "widgets") == []
