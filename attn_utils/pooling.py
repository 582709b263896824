"""Learned-query pooling: attention pooling whose one query is a learned vector; a sequence in, one vector out.

Both classifiers of chapter 7's text sections pool this way; they differ only in how a vector is
turned into the key that the learned query is compared with:

- Zhou et al. (2016), attention-BiLSTM: ``M = tanh(H)``, ``alpha = softmax(w^T M)``, ``r = H alpha^T``
  (``projection_size=None``: no projection, the query ``w`` has the size of ``h``);
- Yang et al. (2016), hierarchical attention: ``u_t = tanh(W h_t + b)``, ``alpha_t = softmax(u_t^T u_w)``,
  ``s = sum_t alpha_t h_t`` (``projection_size=k``: ``W`` is ``k x size`` and the query ``u_w`` has size ``k``).

Padding positions get weight exactly 0 (``masked_softmax``), and a sequence with no real position
pools to zeros rather than NaN.
"""

from __future__ import annotations

import torch
from torch import nn

from .masking import masked_softmax


class LearnedQueryPooling(nn.Module):
    """``forward(H, valid_lens=None) -> (batch, size)``; the weights of the last call are in ``attention_weights``.

    ``H`` is ``(batch, steps, size)``; ``valid_lens`` is ``(batch,)`` lengths or a boolean mask
    ``(batch, steps)`` (``True`` = real position). The query is initialised from N(0, 1/size), as
    the papers initialise their context vectors randomly.
    """

    def __init__(self, size: int, projection_size: int | None = None):
        super().__init__()
        if size < 1 or (projection_size is not None and projection_size < 1):
            raise ValueError(f"size and projection_size must be positive, got {size} and {projection_size}")
        self.size = size
        self.projection = None if projection_size is None else nn.Linear(size, projection_size)
        key_size = size if projection_size is None else projection_size
        self.query = nn.Parameter(torch.randn(key_size) / key_size**0.5)
        self.attention_weights: torch.Tensor | None = None

    def forward(self, H: torch.Tensor, valid_lens: torch.Tensor | None = None) -> torch.Tensor:
        if H.dim() != 3 or H.shape[-1] != self.size:
            raise ValueError(f"LearnedQueryPooling expects H of shape (batch, steps, {self.size}), "
                             f"got {tuple(H.shape)}")
        keys = torch.tanh(H if self.projection is None else self.projection(H))  # (batch, steps, key_size)
        scores = keys @ self.query  # (batch, steps)
        weights = masked_softmax(scores, valid_lens)  # (batch, steps), 0 on padding
        self.attention_weights = weights
        return (weights.unsqueeze(-1) * H).sum(1)  # (batch, size)
