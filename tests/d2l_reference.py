"""Import ``d2l.torch`` as a test-time reference, even where torchvision cannot load.

``d2l.torch`` imports torchvision at the top, but the only torchvision wheels on PyPI for
recent torch are CUDA builds that fail to load next to CPU torch. The attention code we compare
against never touches torchvision, so when the real import fails a tiny stand-in module is put
in its place (only for the test process).
"""

from __future__ import annotations

import importlib
import sys
import types


def _install_torchvision_stand_in() -> None:
    stand_in = types.ModuleType("torchvision")
    stand_in.__doc__ = "stand-in for tests: the real torchvision could not be imported"
    transforms = types.ModuleType("torchvision.transforms")
    datasets = types.ModuleType("torchvision.datasets")
    stand_in.transforms = transforms
    stand_in.datasets = datasets
    sys.modules.update({"torchvision": stand_in, "torchvision.transforms": transforms,
                        "torchvision.datasets": datasets})


def load_d2l():
    """Return the ``d2l.torch`` module, or raise ImportError if d2l is not installed."""
    try:
        importlib.import_module("torchvision")
    except Exception:  # ImportError, or a RuntimeError/OSError from a mismatched CUDA build
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        _install_torchvision_stand_in()
    return importlib.import_module("d2l.torch")
