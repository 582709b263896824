"""Chapter 4's checkers: the typical wrong answer of each exercise fails on the case that names its trap."""

from __future__ import annotations

import torch

from attn_utils.exercises import grade


def _first_failure(label, fn) -> str:
    result = grade(label, fn)
    assert not result.passed
    return result.message.split("\nAlso failing")[0]  # the first failing case only


# ch04-write-gnmt-penalty ------------------------------------------------------------------------

def _kept(tokens, eos):
    """True up to and including each candidate's first eos (everywhere when it has none)."""
    is_eos = tokens == eos
    return is_eos.cumsum(-1) - is_eos.long() == 0


def _scores(total, length, alpha):
    return total / ((5 + length) / 6) ** alpha


def test_gnmt_scores_written_as_a_loop_pass():
    def one_by_one(tokens, logprobs, alpha, eos):
        out = torch.empty(tokens.shape[:-1], dtype=logprobs.dtype)
        for b in range(tokens.shape[0]):
            for k in range(tokens.shape[1]):
                row = tokens[b, k].tolist()
                n = row.index(eos) + 1 if eos in row else len(row)
                out[b, k] = logprobs[b, k, :n].sum() / ((5 + n) / 6) ** alpha
        return out

    assert grade("ch04-write-gnmt-penalty", one_by_one).passed


def test_the_chapters_length_rule_or_a_length_without_eos_fails_the_hand_case():
    def chapter_rule(tokens, logprobs, alpha, eos):  # score / L^alpha
        kept = _kept(tokens, eos)
        return torch.where(kept, logprobs, 0.0).sum(-1) / kept.sum(-1).to(logprobs.dtype) ** alpha

    def eos_not_counted(tokens, logprobs, alpha, eos):
        kept = _kept(tokens, eos)
        return _scores(torch.where(kept, logprobs, 0.0).sum(-1), kept.sum(-1).to(logprobs.dtype) - 1, alpha)

    for wrong in (chapter_rule, eos_not_counted):
        assert "Case 'by hand: <eos> alone" in _first_failure("ch04-write-gnmt-penalty", wrong)


def test_gnmt_scores_that_mask_by_a_product_fail_on_the_infinite_padding():
    def product(tokens, logprobs, alpha, eos):  # -inf * 0 is NaN
        kept = _kept(tokens, eos)
        return _scores((logprobs * kept).sum(-1), kept.sum(-1).to(logprobs.dtype), alpha)

    def everything(tokens, logprobs, alpha, eos):  # the length is right, but the sum runs past the end
        return _scores(logprobs.sum(-1), _kept(tokens, eos).sum(-1).to(logprobs.dtype), alpha)

    for wrong in (product, everything):
        assert "Case 'alpha = 0.6, padded after <eos> with <pad>" in _first_failure("ch04-write-gnmt-penalty", wrong)


def test_gnmt_scores_that_keep_every_non_pad_token_fail_when_the_decoder_ran_on():
    def non_pad(tokens, logprobs, alpha, eos):
        kept = tokens != 0
        return _scores(torch.where(kept, logprobs, 0.0).sum(-1), kept.sum(-1).to(logprobs.dtype), alpha)

    assert "Case 'the decoder ran on after <eos>" in _first_failure("ch04-write-gnmt-penalty", non_pad)


def test_gnmt_scores_that_end_at_argmax_fail_on_candidates_without_eos():
    def first_eos_by_argmax(tokens, logprobs, alpha, eos):  # argmax of all-False is 0: length 1
        length = (tokens == eos).long().argmax(-1) + 1
        kept = torch.arange(tokens.shape[-1], device=tokens.device) < length[..., None]
        return _scores(torch.where(kept, logprobs, 0.0).sum(-1), length.to(logprobs.dtype), alpha)

    assert "Case 'no <eos> within the 6 steps" in _first_failure("ch04-write-gnmt-penalty", first_eos_by_argmax)


def test_gnmt_scores_with_a_float32_penalty_fail_the_float64_case():
    def integer_lengths(tokens, logprobs, alpha, eos):  # (5 + L) / 6 on int64 gives float32
        kept = _kept(tokens, eos)
        return _scores(torch.where(kept, logprobs, 0.0).sum(-1), kept.sum(-1), alpha)

    message = _first_failure("ch04-write-gnmt-penalty", integer_lengths)
    assert "Case 'float64: 3 sources x 4 beams" in message and "largest difference" in message
