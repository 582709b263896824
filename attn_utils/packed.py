"""Run a ``batch_first`` recurrent layer over padded rows so that padding changes nothing."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


def run_packed(rnn: nn.RNNBase, X: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The outputs of ``rnn`` (``batch_first``) over the first ``lengths[n]`` steps of each row of ``X``.

    ``X`` ``(N, steps, in)`` -> ``(N, steps, directions * hidden)``. The sequences are packed, so a
    backward direction starts at each row's own last step and padded steps change nothing; their
    outputs are 0, and so is every output of a row of length 0 (``pack_padded_sequence`` refuses those).
    """
    N, steps, _ = X.shape
    directions = 2 if rnn.bidirectional else 1
    out = X.new_zeros(N, steps, directions * rnn.hidden_size)
    rows = (lengths > 0).nonzero().squeeze(1)  # the non-empty rows
    if rows.numel():
        packed = pack_padded_sequence(X[rows], lengths[rows].cpu(), batch_first=True, enforce_sorted=False)
        H, _ = rnn(packed)
        out[rows] = pad_packed_sequence(H, batch_first=True, total_length=steps)[0]  # (rows, steps, dir * h)
    return out
