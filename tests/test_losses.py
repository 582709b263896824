"""The losses' one convention (labels equal to IGNORE_INDEX do not count), and the numbers of the book's runs:
each loss returns, to the last bit, what the formula the stored runs were made with returns."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from attn_utils.losses import (
    IGNORE_INDEX,
    causal_lm_loss,
    classifier_loss,
    masked_lm_loss,
    sequence_loss,
    token_cross_entropy,
)
from attn_utils.masking import lengths_to_mask


def _batch(seed=0, batch=16, steps=9, vocab=37):
    gen = torch.Generator().manual_seed(seed)
    logits = (3 * torch.randn(batch, steps, vocab, generator=gen)).requires_grad_()
    labels = torch.randint(1, vocab, (batch, steps), generator=gen)
    lengths = torch.randint(1, steps + 1, (batch,), generator=gen)
    labels[~lengths_to_mask(lengths, steps)] = 0  # padding (0) after each row's length
    return logits, labels, lengths


def test_positions_labelled_ignore_index_do_not_count():
    logits, labels, _ = _batch()
    targets = labels.masked_fill(labels == 0, IGNORE_INDEX)
    per_token = token_cross_entropy(logits, targets, reduction="none")  # (batch * steps,)
    assert per_token.shape == (labels.numel(),)
    assert bool((per_token[targets.reshape(-1) == IGNORE_INDEX] == 0).all())
    by_hand = F.cross_entropy(logits[labels != 0].float(), labels[labels != 0])
    torch.testing.assert_close(token_cross_entropy(logits, targets), by_hand)
    # a padding id and valid lengths say the same as IGNORE_INDEX labels
    torch.testing.assert_close(sequence_loss(logits, labels, pad=0), by_hand)
    with pytest.raises(ValueError, match="every label is IGNORE_INDEX"):
        token_cross_entropy(logits, torch.full_like(labels, IGNORE_INDEX))
    with pytest.raises(ValueError, match="reduction must be one of"):
        token_cross_entropy(logits, targets, reduction="sum")
    with pytest.raises(ValueError, match="expected logits"):
        token_cross_entropy(logits[0], targets[0])


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
@pytest.mark.parametrize("with_lengths", [False, True])
def test_sequence_loss_is_the_stored_runs_masked_mean_to_the_last_bit(label_smoothing, with_lengths):
    """The translators' loss as the book's runs computed it: every position's loss, times a 0/1 mask, summed and
    divided by the count. Equal to the last bit, gradients included (torch's own mean adds in another order)."""
    logits, labels, lengths = _batch(seed=1, batch=64, steps=13, vocab=301)
    mask = lengths_to_mask(lengths, labels.shape[1]) if with_lengths else labels != 0
    losses = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none",
                             label_smoothing=label_smoothing)
    stored = (losses * mask.reshape(-1)).sum() / mask.sum()
    (stored_grad,) = torch.autograd.grad(stored, logits)
    ours = sequence_loss(logits, labels, lengths if with_lengths else None, pad=0, label_smoothing=label_smoothing)
    (our_grad,) = torch.autograd.grad(ours, logits)
    assert torch.equal(ours, stored) and torch.equal(our_grad, stored_grad)


def test_language_model_losses_are_torchs_mean_to_the_last_bit():
    logits, labels, _ = _batch(seed=2, batch=32, steps=20, vocab=500)
    targets = labels.masked_fill(labels == 0, IGNORE_INDEX)
    stored = F.cross_entropy(logits.float().reshape(-1, 500), targets.reshape(-1), ignore_index=IGNORE_INDEX)
    assert torch.equal(masked_lm_loss(logits, targets), stored)
    chosen = targets != IGNORE_INDEX
    assert torch.equal(masked_lm_loss(logits[chosen], targets),
                       F.cross_entropy(logits[chosen].float(), targets[chosen], ignore_index=IGNORE_INDEX))

    tokens = torch.cat([torch.ones(32, 1, dtype=torch.long), labels], dim=1)  # <bos> = 1, padding 0 at the ends

    def model(X):
        return logits[:, :X.shape[1]], None

    expected = F.cross_entropy(logits.float().reshape(-1, 500), targets.reshape(-1), ignore_index=IGNORE_INDEX)
    assert torch.equal(causal_lm_loss(model, tokens, pad=0), expected)


def test_classifier_loss_counts_every_example_or_uses_the_models_own_objective():
    logits = torch.randn(6, 4)
    labels = torch.tensor([0, 1, 2, 3, 0, 1])

    class Plain(torch.nn.Module):
        def forward(self, x):
            return x

    objective, cross_entropy, out = classifier_loss(Plain(), [logits], labels)
    assert objective is cross_entropy and out is logits
    torch.testing.assert_close(cross_entropy, F.cross_entropy(logits, labels))

    class Own(Plain):
        def training_loss(self, x, labels):
            return torch.tensor(7.0), torch.tensor(1.0), x

    assert classifier_loss(Own(), [logits], labels)[0].item() == 7.0
