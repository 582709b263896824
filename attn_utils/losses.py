"""The course's training losses: cross-entropy over the tokens that count, and over labelled examples.

**One convention for the positions that do not count**: their label is ``IGNORE_INDEX`` (-100).
It is PyTorch's own (``F.cross_entropy`` and ``nn.CrossEntropyLoss`` ignore -100 by default), so a
reader's plain torch code and these losses agree; it travels with the labels, so there is no second
tensor (a mask, lengths) to keep aligned with them, and it survives selecting positions (BERT's head
predicts only the chosen ones, ``(count, vocab)``); and BERT's masking writes it already
(``language_models.bert_mask``). A padding id or valid lengths become it with one ``masked_fill``:

* ``sequence_loss``: the translators' label-smoothed loss, padding (``pad`` or ``valid_len``) ignored;
* ``causal_lm_loss``: a decoder-only model's next-token loss, ``<pad>`` targets ignored;
* ``masked_lm_loss``: an encoder-only model's loss at the positions BERT's masking chose;
* ``classifier_loss``: chapter 7's classifiers, one label per example, every example counting.

The three token losses reduce to ``token_cross_entropy``. Its two reductions give the same mean but
add in another order: ``sequence_loss`` adds the per-token losses and divides by their count, the
language models' losses take torch's own mean, each as when the book's stored runs were made, so
those runs reproduce to the last bit (``tests/test_losses.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F

from .checks import check_tokens
from .masking import lengths_to_mask

IGNORE_INDEX = -100  # label of the positions that do not count in a loss (torch's cross-entropy default)
REDUCTIONS = ("mean", "none")


def check_logits_and_labels(logits: torch.Tensor, labels: torch.Tensor) -> None:
    """Raise unless ``logits`` are ``(batch, steps, vocab)`` and ``labels`` ``(batch, steps)``."""
    if logits.dim() != 3 or labels.shape != logits.shape[:2]:
        raise ValueError(f"expected logits (batch, steps, vocab) and labels (batch, steps), got "
                         f"{tuple(logits.shape)} and {tuple(labels.shape)}")


def token_cross_entropy(logits: torch.Tensor, labels: torch.Tensor, *, label_smoothing: float = 0.0,
                        reduction: str = "mean",
                        none_counts: str = "no position counts in the loss (every label is IGNORE_INDEX)"):
    """Cross-entropy of ``logits`` ``(batch, steps, vocab)`` against ``labels`` ``(batch, steps)`` at the
    positions whose label is not ``IGNORE_INDEX``, computed in float32 at least.

    ``reduction="mean"``: their mean, a scalar (torch's own reduction); ``"none"``: one loss per
    position, ``(batch * steps,)`` in row-major order, 0 where the label is ``IGNORE_INDEX``. A batch
    in which no position counts is a ``ValueError`` saying ``none_counts``.
    """
    check_logits_and_labels(logits, labels)
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    if not bool((labels != IGNORE_INDEX).any()):
        raise ValueError(none_counts)
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1),
                           ignore_index=IGNORE_INDEX, reduction=reduction, label_smoothing=label_smoothing)


def sequence_loss(logits: torch.Tensor, labels: torch.Tensor, valid_len: torch.Tensor | None = None,
                  pad: int = 0, label_smoothing: float = 0.0) -> torch.Tensor:
    """Mean cross-entropy over the real target tokens.

    ``logits`` ``(batch, steps, vocab)``, ``labels`` ``(batch, steps)``. Real tokens are the first
    ``valid_len`` of each row, or, without ``valid_len``, those that are not ``pad``; the others
    (logits and labels alike) do not count: their labels become ``IGNORE_INDEX``.
    """
    check_logits_and_labels(logits, labels)
    if valid_len is None:
        counted = labels != pad  # (batch, steps)
    else:
        counted = lengths_to_mask(valid_len.to(labels.device), labels.shape[1])  # (batch, steps)
    targets = labels.masked_fill(~counted, IGNORE_INDEX)
    losses = token_cross_entropy(logits, targets, label_smoothing=label_smoothing, reduction="none",
                                 none_counts="the batch has no target token to learn from (every label is padding)")
    return losses.sum() / (targets != IGNORE_INDEX).sum()  # (batch * steps,) -> the mean over real tokens


def causal_lm_loss(model: nn.Module, tokens: torch.Tensor, pad: int) -> torch.Tensor:
    """Mean cross-entropy of predicting ``tokens[:, 1:]`` from ``tokens[:, :-1]`` (``<pad>`` targets do
    not count). ``tokens`` ``(batch, steps)`` start with ``<bos>``; padding sits at the end of each row, so
    with the causal mask no real position ever sees it. ``model(X)`` returns ``(logits, cache)``
    (a ``CausalLanguageModel``)."""
    check_tokens(tokens, "tokens")
    if tokens.shape[1] < 2:
        raise ValueError(f"tokens must have at least 2 steps (an input and a target), got shape {tuple(tokens.shape)}")
    logits, _ = model(tokens[:, :-1])  # (batch, steps - 1, vocab)
    targets = tokens[:, 1:].masked_fill(tokens[:, 1:] == pad, IGNORE_INDEX)
    return token_cross_entropy(logits, targets,
                               none_counts="the batch has no target token to learn from (every target is padding)")


def masked_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the chosen positions only (``labels != IGNORE_INDEX``).

    ``logits`` ``(batch, steps, vocab)`` with ``labels`` ``(batch, steps)``, or the logits of the chosen
    positions only, ``(count, vocab)`` (``model(X, valid_lens, predict_at=labels != IGNORE_INDEX)``).
    """
    if logits.dim() == 2 and logits.shape[0] == int((labels != IGNORE_INDEX).sum()):
        labels = labels[labels != IGNORE_INDEX]  # (count,), the same row-major order
        logits = logits.unsqueeze(0)
        labels = labels.unsqueeze(0)
    return token_cross_entropy(logits, labels, none_counts="no position was chosen for prediction (every label is "
                                                           "IGNORE_INDEX): the loss is undefined")


def classifier_loss(model: nn.Module, inputs: Sequence[torch.Tensor], labels: torch.Tensor):
    """``(objective, cross_entropy, logits)`` of one batch of a classifier (``model(*inputs)`` returns
    logits ``(batch, classes)``, ``labels`` ``(batch,)``: every example counts).

    A model whose training objective is not plain cross-entropy (hard attention, trained with
    REINFORCE) defines ``training_loss(*inputs, labels=...)`` returning the same triple, and that is
    used instead: the loop minimises the objective and records the cross-entropy.
    """
    if hasattr(model, "training_loss"):
        objective, cross_entropy, logits = model.training_loss(*inputs, labels=labels)
        return objective, cross_entropy, logits
    logits = model(*inputs)
    cross_entropy = F.cross_entropy(logits, labels)
    return cross_entropy, cross_entropy, logits
