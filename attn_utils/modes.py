"""A model's mode for reading it: ``evaluation_mode(model)``, the ``with`` block in which evaluations
and generation run (no dropout), leaving the model in the mode it was in.

A model utility beside ``device.model_device``: the models, the evaluations and generation can all
use it without importing the training loop.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn


@contextmanager
def evaluation_mode(model: nn.Module) -> Iterator[nn.Module]:
    """Within the ``with`` block ``model`` is in evaluation mode (no dropout); afterwards it is back
    in the mode it was in, also when the block raises. ``model``: a ``torch.nn.Module``."""
    if not all(callable(getattr(model, name, None)) for name in ("eval", "train")) or not hasattr(model, "training"):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)
