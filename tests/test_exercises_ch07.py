"""Chapter 7's checkers: the typical wrong answer of each exercise fails on the case that names its trap."""

from __future__ import annotations

import torch

from attn_utils.exercises import grade


def _failed_case(label, fn) -> str:
    result = grade(label, fn)
    assert not result.passed
    return result.message


# --- 7a: hard attention's lower bound and the log-likelihood it bounds ---------------------------


def _bound(scores, log_likelihoods):
    alpha = torch.softmax(scores, dim=-1)
    return torch.where(alpha > 0, alpha * log_likelihoods, 0.0).sum(-1)


def test_lower_bound_reference_answer_passes():
    def right(scores, log_likelihoods):
        marginal = torch.logsumexp(torch.log_softmax(scores, -1) + log_likelihoods, dim=-1)
        return torch.stack([_bound(scores, log_likelihoods), marginal], dim=-1)

    assert grade("ch07-glimpse-lower-bound", right).passed


def test_lower_bound_that_multiplies_zero_by_minus_infinity_fails_on_the_ruled_out_regions():
    def naive_bound(scores, log_likelihoods):
        alpha = torch.softmax(scores, dim=-1)
        marginal = torch.logsumexp(torch.log(alpha) + log_likelihoods, dim=-1)
        return torch.stack([(alpha * log_likelihoods).sum(-1), marginal], dim=-1)

    message = _failed_case("ch07-glimpse-lower-bound", naive_bound)
    assert "Case 'regions with score -inf and log-likelihood -inf" in message
    assert "NaN" in message


def test_marginal_through_exp_fails_on_the_large_negative_log_likelihoods():
    def through_exp(scores, log_likelihoods):
        alpha = torch.softmax(scores, dim=-1)
        marginal = torch.log((alpha * log_likelihoods.exp()).sum(-1))
        return torch.stack([_bound(scores, log_likelihoods), marginal], dim=-1)

    result = grade("ch07-glimpse-lower-bound", through_exp)
    assert result.cases_passed == result.cases_total - 1
    assert "Case 'log-likelihoods near -800" in result.message


def test_bound_returned_twice_fails_on_the_hand_worked_case():
    def jensen_ignored(scores, log_likelihoods):  # the bound taken for the log-likelihood
        bound = _bound(scores, log_likelihoods)
        return torch.stack([bound, bound], dim=-1)

    assert "Case 'by hand" in _failed_case("ch07-glimpse-lower-bound", jensen_ignored)


# --- 7b: relations ---------------------------------------------------------------------------------


def test_last_state_read_at_the_last_step_fails():
    def last_step(output, lengths):
        half = output.shape[-1] // 2
        return output[:, -1, :half] + output[:, -1, half:]

    assert "Case 'three sentences of full length" in _failed_case(
        "ch07-relation-write-last-state", last_step
    )


def test_zhou_pooling_without_the_mask_fails_on_the_padding():
    def unmasked(H, w, lengths):
        alpha = torch.softmax(torch.tanh(H) @ w, dim=-1)
        return torch.tanh(torch.einsum("bt,btd->bd", alpha, H))

    assert "Case 'padding with huge values gets weight 0'" in _failed_case(
        "ch07-relation-write-zhou-pooling", unmasked
    )


def test_macro_f1_that_ignores_the_direction_fails_on_wrong_directions():
    def typed_only(predictions, targets):
        kind_pred, kind_true = predictions // 2, targets // 2
        f1s = [
            2
            * ((kind_pred == kind_true) & (kind_true == k)).sum()
            / ((kind_pred == k).sum() + (kind_true == k).sum())
            for k in kind_true.unique()
            if k != 9
        ]
        return torch.stack(f1s).mean()

    assert "Case 'right types, wrong directions" in _failed_case(
        "ch07-relation-write-macro-f1", typed_only
    )


# --- 7c: documents ---------------------------------------------------------------------------------


def _segments(H, lengths):
    return torch.repeat_interleave(torch.arange(len(lengths)), lengths)


def test_ragged_sentence_vectors_with_one_maximum_for_the_batch_fail_on_the_large_context_vector():
    def batch_maximum(H, lengths, W_w, b_w, u_w):
        sentence = _segments(H, lengths)
        scores = torch.tanh(H @ W_w.T + b_w) @ u_w
        e = torch.exp(scores - scores.max())  # one maximum for every sentence
        total = torch.zeros(len(lengths)).index_add(0, sentence, e)
        return torch.zeros(len(lengths), H.shape[-1]).index_add(
            0, sentence, (e / total[sentence])[:, None] * H
        )

    result = grade("ch07-han-ragged-sentence-vectors", batch_maximum)
    assert result.cases_passed == result.cases_total - 1
    assert (
        "a large context vector (u x 1000): each sentence needs its own maximum" in result.message
    )
    assert "nan" in result.message


def test_ragged_sentence_vectors_padded_without_a_mask_fail_on_sentences_of_different_lengths():
    def padded_unmasked(H, lengths, W_w, b_w, u_w):
        pieces = torch.split(H, lengths.tolist())
        padded = torch.nn.utils.rnn.pad_sequence(
            pieces, batch_first=True
        )  # zeros after each sentence
        alpha = torch.softmax(torch.tanh(padded @ W_w.T + b_w) @ u_w, dim=-1)
        return torch.einsum("sw,swd->sd", alpha, padded)

    message = _failed_case("ch07-han-ragged-sentence-vectors", padded_unmasked)
    assert "Case 'by hand: W = I, b = 0" in message  # its lone word is padded with a zero word
    assert "0 of 6 cases pass" in message


def test_sentence_vectors_without_the_word_mask_fail_on_the_padded_values():
    def unmasked(H, sentence_lens, W_w, b_w, u_w):
        alpha = torch.softmax(torch.tanh(H @ W_w.T + b_w) @ u_w, dim=-1)
        return torch.einsum("bsw,bswd->bsd", alpha, H)

    assert "Case 'two documents of 3 and 2 sentences" in _failed_case(
        "ch07-han-write-sentence-vectors", unmasked
    )
