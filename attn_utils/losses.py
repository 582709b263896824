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

from .checks import check_probability, check_tokens, checks_read_values
from .masking import lengths_to_mask

IGNORE_INDEX = -100  # label of the positions that do not count in a loss (torch's cross-entropy default)
REDUCTIONS = ("mean", "none")


def _integer(t: torch.Tensor) -> bool:
    return not (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool)


def check_logits_and_labels(logits: torch.Tensor, labels: torch.Tensor) -> None:
    """Raise unless ``logits`` are floating-point ``(batch, steps, vocab)`` and ``labels`` integer ``(batch, steps)``
    (float labels would be read as class probabilities, complex logits lose their imaginary part)."""
    if not isinstance(logits, torch.Tensor) or not isinstance(labels, torch.Tensor) \
            or not logits.is_floating_point() or not _integer(labels):
        raise ValueError(f"expected floating-point logits and integer labels (tensors), got "
                         f"{getattr(logits, 'dtype', type(logits).__name__)} and "
                         f"{getattr(labels, 'dtype', type(labels).__name__)}")
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
    in which no position counts is a ``ValueError`` saying ``none_counts``. Labels lie in ``[0, vocab)``
    or are ``IGNORE_INDEX`` (checked where ``checks.checks_read_values`` says); ``label_smoothing`` in [0, 1].
    """
    check_logits_and_labels(logits, labels)
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    check_probability("label_smoothing", label_smoothing, one_allowed=True)
    if not bool((labels != IGNORE_INDEX).any()):
        raise ValueError(none_counts)
    _check_label_range(labels, logits.shape[-1])
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1),
                           ignore_index=IGNORE_INDEX, reduction=reduction, label_smoothing=label_smoothing)


def _check_label_range(labels: torch.Tensor, classes: int) -> None:
    """Raise unless every label is a class index in ``[0, classes)`` or ``IGNORE_INDEX`` (read only where
    ``checks_read_values(labels)`` says: torch's own error is an ``IndexError``, or a device-side assert)."""
    if labels.numel() and checks_read_values(labels):
        counted = labels[labels != IGNORE_INDEX]
        if counted.numel() and not (int(counted.min()) >= 0 and int(counted.max()) < classes):
            raise ValueError(f"labels must be class indices in [0, {classes}) or IGNORE_INDEX ({IGNORE_INDEX}), got "
                             f"{int(counted.min())}..{int(counted.max())}")


def sequence_loss(logits: torch.Tensor, labels: torch.Tensor, valid_len: torch.Tensor | None = None,
                  pad: int = 0, label_smoothing: float = 0.0) -> torch.Tensor:
    """Mean cross-entropy over the real target tokens.

    ``logits`` ``(batch, steps, vocab)``, ``labels`` ``(batch, steps)``. Real tokens are the first
    ``valid_len`` of each row, or, without ``valid_len``, those that are not ``pad``; the others
    (logits and labels alike) do not count: their labels become ``IGNORE_INDEX``. ``valid_len`` is an
    integer tensor ``(batch,)`` with values in ``[0, steps]``, ``pad`` an int.
    """
    check_logits_and_labels(logits, labels)
    _check_pad(pad)
    if valid_len is not None:
        if not isinstance(valid_len, torch.Tensor) or not _integer(valid_len) or valid_len.shape != labels.shape[:1]:
            raise ValueError(f"valid_len must be an integer tensor ({labels.shape[0]},), one length per row, got "
                             f"{getattr(valid_len, 'dtype', type(valid_len).__name__)} "
                             f"{tuple(getattr(valid_len, 'shape', ()))}")
        if valid_len.numel() and checks_read_values(valid_len) and not (
                int(valid_len.min()) >= 0 and int(valid_len.max()) <= labels.shape[1]):
            raise ValueError(f"valid_len must lie in [0, {labels.shape[1]}] (the steps), got "
                             f"{int(valid_len.min())}..{int(valid_len.max())}")
    if valid_len is None:
        counted = labels != pad  # (batch, steps)
    else:
        counted = lengths_to_mask(valid_len.to(labels.device), labels.shape[1])  # (batch, steps)
    targets = labels.masked_fill(~counted, IGNORE_INDEX)
    losses = token_cross_entropy(logits, targets, label_smoothing=label_smoothing, reduction="none",
                                 none_counts="the batch has no target token to learn from (every label is padding)")
    return losses.sum() / (targets != IGNORE_INDEX).sum()  # (batch * steps,) -> the mean over real tokens


def _check_pad(pad) -> None:
    if isinstance(pad, bool) or not isinstance(pad, int):
        raise ValueError(f"pad must be the padding token's id (an int), got {type(pad).__name__} {pad!r:.40}")


def causal_lm_loss(model: nn.Module, tokens: torch.Tensor, pad: int) -> torch.Tensor:
    """Mean cross-entropy of predicting ``tokens[:, 1:]`` from ``tokens[:, :-1]`` (``<pad>`` targets do
    not count). ``tokens`` ``(batch, steps)`` start with ``<bos>``; padding sits at the end of each row, so
    with the causal mask no real position ever sees it. ``model(X)`` returns ``(logits, cache)``
    (a ``CausalLanguageModel``)."""
    check_tokens(tokens, "tokens")
    _check_pad(pad)
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
    if not isinstance(logits, torch.Tensor) or not isinstance(labels, torch.Tensor):
        raise ValueError(f"expected logits and labels as tensors, got {type(logits).__name__} and "
                         f"{type(labels).__name__}")
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
    used instead: the loop minimises the objective and records the cross-entropy. ``inputs`` is a list or tuple of
    tensors (one input ``X``: ``(X,)``), ``labels`` class indices in ``[0, classes)``.
    """
    if isinstance(inputs, torch.Tensor) or not isinstance(inputs, Sequence):  # *X would pass each row
        raise ValueError(f"inputs must be a list or tuple of tensors (one input X: (X,)), got {type(inputs).__name__}")
    if not isinstance(labels, torch.Tensor) or labels.dim() != 1 or not _integer(labels):
        raise ValueError(f"labels must be a 1-D integer tensor of class indices, got "
                         f"{getattr(labels, 'dtype', type(labels).__name__)} {tuple(getattr(labels, 'shape', ()))}")
    if hasattr(model, "training_loss"):
        objective, cross_entropy, logits = model.training_loss(*inputs, labels=labels)
        return objective, cross_entropy, logits
    logits = model(*inputs)
    if not isinstance(logits, torch.Tensor) or logits.dim() != 2 or logits.shape[0] != labels.shape[0]:
        raise ValueError(f"model(*inputs) must return logits (batch, classes) with one row per label "
                         f"({labels.shape[0]}), got {tuple(getattr(logits, 'shape', ()))}")
    if labels.numel() and checks_read_values(labels) and not (
            int(labels.min()) >= 0 and int(labels.max()) < logits.shape[1]):  # -100 too: every example counts
        raise ValueError(f"labels must be class indices in [0, {logits.shape[1]}), got "
                         f"{int(labels.min())}..{int(labels.max())}")
    cross_entropy = F.cross_entropy(logits, labels)
    return cross_entropy, cross_entropy, logits
