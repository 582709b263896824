"""Learned-query pooling: attention pooling whose one query is a learned vector; a sequence in, one vector out.

Both classifiers of chapter 7's text sections pool this way; they differ only in how a vector is
turned into the key that the learned query is compared with:

- Zhou et al. (2016), attention-BiLSTM: ``M = tanh(H)``, ``alpha = softmax(w^T M)``, ``r = H alpha^T``
  (``projection_size=None``: no projection, the query ``w`` has the size of ``h``);
- Yang et al. (2016), hierarchical attention: ``u_t = tanh(W h_t + b)``, ``alpha_t = softmax(u_t^T u_w)``,
  ``s = sum_t alpha_t h_t`` (``projection_size=k``: ``W`` is ``k x size`` and the query ``u_w`` has size ``k``).

Mean pooling is the same with equal scores: :func:`masked_mean`, the one mean over a padded batch.
Both pool through :func:`pool_by_scores`, that is :func:`attn_utils.attention.attend` with one query
per sequence: padding positions get weight exactly 0, and a sequence with no real position pools to
zeros rather than NaN.
"""

from __future__ import annotations

import torch
from torch import nn

from .checks import check_positive_int, check_weights_dtype
from .masking import masked_softmax_visible


def pool_by_scores(scores: torch.Tensor, H: torch.Tensor, valid_lens=None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(pooled (batch, size), weights (batch, steps))``: ``H`` (batch, steps, size) averaged with the weights
    ``softmax(scores)`` of ``scores`` (batch, steps) over the real steps: ``attend`` with one query.

    ``valid_lens`` is ``None``, lengths ``(batch,)`` or a boolean mask broadcastable to ``(batch, steps)``
    (``True`` = real position). The weighted sum is written out as a product and a sum over the steps,
    not as ``attend``'s matrix product: the same numbers up to rounding, and the rounding chapter 7's
    stored results were computed with (its trained accuracies move in the third decimal otherwise).
    Padding never matters, NaN included; a NaN on a real step gives NaN, as in ``attend``.
    ``scores`` must be a floating-point tensor of shape ``H.shape[:-1]``.
    """
    for name, t in (("scores", scores), ("H", H)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a tensor, got {type(t).__name__}")
    if H.dim() < 2 or scores.shape != H.shape[:-1]:
        raise ValueError(f"scores must have the shape of H without its last axis: H {tuple(H.shape)} (batch, steps, "
                         f"size) needs scores {tuple(H.shape[:-1])}, got {tuple(scores.shape)}")
    if isinstance(valid_lens, torch.Tensor) and valid_lens.dtype == torch.bool and valid_lens.dim():
        valid_lens = valid_lens.unsqueeze(-2)  # (..., steps) -> (..., 1, steps): the one query's row
    weights, visible = masked_softmax_visible(scores.unsqueeze(-2), valid_lens)  # (batch, 1, steps) each
    weights, visible = weights.squeeze(-2), visible.squeeze(-2)
    pooled = (weights.unsqueeze(-1) * H.masked_fill(~visible.unsqueeze(-1), 0.0)).sum(dim=-2)  # (batch, size)
    return pooled, weights


def masked_mean(X: torch.Tensor, valid_lens=None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mean (batch, size), weights (batch, steps))``: the mean of ``X`` (batch, steps, size) over each
    sequence's real steps, and the weights that give it, ``1 / length`` on the real steps and 0 on padding.

    Mean pooling is attention pooling with equal scores, and is computed so (``pool_by_scores`` with zero
    scores): a sequence with no real step gives zeros, and padding holding NaN changes nothing.
    ``valid_lens`` as in ``pool_by_scores``.
    """
    if not isinstance(X, torch.Tensor) or X.dim() != 3:
        got = tuple(X.shape) if isinstance(X, torch.Tensor) else type(X).__name__
        raise ValueError(f"masked_mean expects X of shape (batch, steps, size), got {got}")
    return pool_by_scores(X.new_zeros(X.shape[:2]), X, valid_lens)


class LearnedQueryPooling(nn.Module):
    """``forward(H, valid_lens=None) -> (batch, size)``; the weights of the last call are in ``attention_weights``.

    ``H`` is ``(batch, steps, size)`` in the dtype of the layer's weights; ``valid_lens`` is ``(batch,)``
    lengths in ``[0, steps]`` or a boolean mask ``(batch, steps)`` (``True`` = real position). The query
    is initialised from N(0, 1/size), as the papers initialise their context vectors randomly. ``size``
    and ``projection_size`` (or ``None``) are positive ints.
    """

    def __init__(self, size: int, projection_size: int | None = None):
        super().__init__()
        check_positive_int("size", size)
        if projection_size is not None:
            check_positive_int("projection_size", projection_size, hint="or None (no projection)")
        self.size = size
        self.projection = None if projection_size is None else nn.Linear(size, projection_size)
        key_size = size if projection_size is None else projection_size
        self.query = nn.Parameter(torch.randn(key_size) / key_size**0.5)
        self.attention_weights: torch.Tensor | None = None

    def forward(self, H: torch.Tensor, valid_lens: torch.Tensor | None = None) -> torch.Tensor:
        if not isinstance(H, torch.Tensor) or H.dim() != 3 or H.shape[-1] != self.size:
            raise ValueError(f"LearnedQueryPooling expects H of shape (batch, steps, {self.size}), "
                             f"got {tuple(H.shape) if isinstance(H, torch.Tensor) else type(H).__name__}")
        check_weights_dtype(self, H, "LearnedQueryPooling")
        keys = torch.tanh(H if self.projection is None else self.projection(H))  # (batch, steps, key_size)
        scores = keys @ self.query  # (batch, steps)
        pooled, self.attention_weights = pool_by_scores(scores, H, valid_lens)  # (batch, size), (batch, steps)
        return pooled
