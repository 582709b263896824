"""Checkers for chapter 11.1 (GPT and BERT): the sampling distribution with temperature and top-k, and
BERT's masking scheme given its random draws.

Expected results come from ``attn_utils.sampling.sampling_probs`` and ``attn_utils.language_models.bert_mask``.
"""

from __future__ import annotations

import torch

from ..language_models import bert_mask
from ..sampling import sampling_probs
from .core import Case, register, seeded_randn


@register("ch11-write-top-k-temperature")
def top_k_temperature_cases(device: torch.device) -> list[Case]:
    def case(name, logits, temperature, top_k):
        return Case(name, (logits, temperature, top_k), sampling_probs(logits, temperature, top_k), atol=1e-6)

    logits = seeded_randn(3, 10, seed=1, scale=2.0)
    ties = torch.tensor([[1.0, 3.0, 3.0, 0.0, 3.0, -2.0], [0.5, 0.5, 0.5, 0.5, 0.5, 0.5]])
    return [
        case("temperature 1, no top-k: the plain softmax", logits, 1.0, None),
        case("temperature 0.5 sharpens", logits, 0.5, None),
        case("temperature 3 flattens", logits, 3.0, None),
        case("top-k 3 at temperature 1", logits, 1.0, 3),
        case("top-k 4 at temperature 0.7", logits, 0.7, 4),
        case("temperature 0: greedy, a one-hot of the argmax", logits, 0.0, None),
        case("top-k 1: greedy too", logits, 1.0, 1),
        case("top-k as large as the vocabulary keeps everything", logits, 1.0, 10),
        case("top-k larger than the vocabulary keeps everything", logits, 1.0, 50),
        case("a tiny temperature (1e-6) must not overflow", logits, 1e-6, None),
        case("large logits (near 1000) at temperature 0.01", 1000 + logits, 0.01, None),
        case("ties: top-k 2 keeps the lower indices among equal logits", ties, 1.0, 2),
        case("ties: temperature 0 picks the first maximum", ties, 0.0, None),
    ]


def _draws(batch: int, steps: int, seed: int, vocab: int = 50):
    """Tokens 5..vocab-1 with padding at the end of each row, and uniform draws in [0, 1)."""
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(5, vocab, (batch, steps), generator=gen)
    lengths = torch.randint(1, steps + 1, (batch,), generator=gen)
    tokens[torch.arange(steps) >= lengths[:, None]] = 0  # padding
    choose = torch.rand(batch, steps, generator=gen)
    action = torch.rand(batch, steps, generator=gen)
    random_tokens = torch.randint(5, vocab, (batch, steps), generator=gen)
    return tokens, tokens != 0, choose, action, random_tokens


@register("ch11-write-mlm-masking")
def mlm_masking_cases(device: torch.device) -> list[Case]:
    def case(name, tokens, maskable, choose, action, random_tokens, mask_id=4):
        expected = torch.stack(bert_mask(tokens, maskable, choose, action, random_tokens, mask_id))
        return Case(name, (tokens, maskable, choose, action, random_tokens, mask_id), expected)

    tokens, maskable, choose, action, random_tokens = _draws(4, 12, seed=1)
    row = torch.tensor([[7, 8, 9, 10, 11, 12]])
    border = torch.tensor([[0.0, 0.15, 0.1499, 0.5, 0.02, 0.01]])  # 0.15 itself is not chosen
    actions = torch.tensor([[0.0, 0.3, 0.8, 0.85, 0.9, 0.7999]])  # 0.8 -> random, 0.9 -> unchanged
    replacements = torch.tensor([[20, 21, 22, 23, 24, 25]])
    everything = torch.zeros(4, 12)  # every maskable position chosen
    return [
        case("random tokens with padding", tokens, maskable, choose, action, random_tokens),
        case("every maskable token chosen: padding stays untouched", tokens, maskable, everything, action,
             random_tokens),
        case("nothing chosen (all draws 0.5): labels all -100", tokens, maskable, torch.full((4, 12), 0.5), action,
             random_tokens),
        case("the borders 0.15, 0.8 and 0.9", row, torch.ones_like(row, dtype=torch.bool), border, actions,
             replacements),
        case("a position that is not maskable is never chosen", row, torch.tensor([[True, False, True, False, True,
                                                                                    False]]), border, actions,
             replacements),
        case("another mask id (99)", tokens, maskable, choose, action, random_tokens, 99),
    ]
