"""Run a ``batch_first`` recurrent layer over padded rows so that padding changes nothing."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .checks import check_step_lengths


def run_packed(rnn: nn.RNNBase, X: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The outputs of ``rnn`` (``batch_first``) over the first ``lengths[n]`` steps of each row of ``X``.

    ``X`` ``(N, steps, in)`` -> ``(N, steps, directions * hidden)``. The sequences are packed, so a
    backward direction starts at each row's own last step and padded steps change nothing; their
    outputs are 0, and so is every output of a row of length 0 (``pack_padded_sequence`` refuses those).
    ``lengths`` is an integer (not bool) tensor ``(N,)`` with values in ``[0, steps]``.
    """
    if not getattr(rnn, "batch_first", False):
        raise ValueError(f"run_packed needs a recurrent layer built with batch_first=True, got {type(rnn).__name__}")
    if not isinstance(X, torch.Tensor) or X.dim() != 3:
        raise ValueError(f"X must be a tensor (N, steps, features), got "
                         f"{tuple(X.shape) if isinstance(X, torch.Tensor) else type(X).__name__}")
    check_step_lengths("lengths", lengths, X.shape[0], 0, X.shape[1], "the steps of X")
    N, steps, _ = X.shape
    directions = 2 if rnn.bidirectional else 1
    out = X.new_zeros(N, steps, directions * rnn.hidden_size)
    rows = (lengths > 0).nonzero().squeeze(1)  # the non-empty rows
    if rows.numel():
        packed = pack_padded_sequence(X[rows], lengths[rows].cpu(), batch_first=True, enforce_sorted=False)
        H, _ = rnn(packed)
        out[rows] = pad_packed_sequence(H, batch_first=True, total_length=steps)[0]  # (rows, steps, dir * h)
    return out
