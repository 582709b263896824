"""Windows of running text to train on: a book is far longer than the context a model sees at once.

``random_windows`` cuts ``batch_size`` windows of ``length + 1`` tokens at uniform random places of a
token stream: inputs ``[:, :-1]``, next-token targets ``[:, 1:]``. Scoring a held-out text in
overlapping windows is ``attn_utils.evaluate.sliding_window_logprobs``.
"""

from __future__ import annotations

import torch

from ..checks import check_positive_int, check_stream


def random_windows(stream: torch.Tensor, batch_size: int, length: int,
                   generator: torch.Generator | None = None) -> torch.Tensor:
    """``(batch_size, length + 1)`` token windows starting at uniform random places of ``stream`` (a 1-D integer
    tensor of at least ``length + 1`` tokens): inputs ``[:, :-1]`` and next-token targets ``[:, 1:]``.
    ``generator``: a CPU ``torch.Generator`` or None."""
    check_positive_int("batch_size", batch_size)
    check_positive_int("length", length)
    check_stream(stream, "stream", length + 1)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    starts = torch.randint(len(stream) - length, (batch_size,), generator=generator)
    offsets = torch.arange(length + 1)
    return stream[(starts[:, None] + offsets).to(stream.device)]  # (batch_size, length + 1)
