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


def _position_aware(H, lengths, spans, W_h, P, v, *, distance="span", rows="clamped", tables=(0, 1), masked=True,
                    stable=True):
    K = (P.shape[1] - 1) // 2
    i = torch.arange(H.shape[1])
    first, last = spans[..., :1], spans[..., 1:]
    delta = {"span": (i - first).clamp(max=0) + (i - last).clamp(min=0),  # Zhang et al.'s distances
             "first": i - first,  # measured from the first token everywhere
             "flipped": (first - i).clamp(min=0) + (last - i).clamp(max=0)}[distance]  # nominal minus word
    index = {"clamped": delta.clamp(-K, K) + K,
             "unclamped": delta + K,  # an IndexError beyond +K
             "wrapped": (delta + K).clamp(max=2 * K)}[rows]  # negative rows wrap round to the end of P
    position = P[tables[0]][index[:, 0]] + P[tables[1]][index[:, 1]]
    scores = torch.tanh(H @ W_h.T + position) @ v
    if masked:
        scores = scores.masked_fill(i >= lengths[:, None], float("-inf"))
    if stable:
        alpha = torch.softmax(scores, dim=-1)
    else:
        alpha = scores.exp() / scores.exp().sum(-1, keepdim=True)
    return torch.einsum("bt,btd->bd", alpha, H)


def test_position_aware_pooling_reference_passes():
    assert grade("ch07-relation-position-aware-pooling", _position_aware).passed


def test_position_aware_pooling_traps_fail_on_their_cases():
    cases = {
        ("distance", "flipped"): "Case 'by hand: e1 = word 0, e2 = word 2",
        ("tables", (0, 0)): "Case 'e1 and e2 have tables of their own",
        ("distance", "first"): "Case 'nominals of three tokens (a word and its two markers)",
        ("rows", "unclamped"): "Case 'sentences of 15 words and K = 2",
        ("rows", "wrapped"): "Case 'sentences of 15 words and K = 2",
        ("masked", False): "Case 'lengths 5 and 8, padding holding 100",
        ("stable", False): "Case 'a long v (x 1000): no overflow, no NaN",
    }
    for (trap, value), name in cases.items():
        def wrong(*args, trap=trap, value=value):
            return _position_aware(*args, **{trap: value})

        assert name in _failed_case("ch07-relation-position-aware-pooling", wrong).split("\nAlso")[0], trap


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


def _per_class(H, doc_lens, W_s, b_s, U, beta, b, *, axis=1, shared=False, masked=True, readout="own",
               empty="zero", stable=True):
    scores = torch.tanh(H @ W_s.T + b_s) @ (U[:1].expand_as(U) if shared else U).T  # (batch, sentences, C)
    if masked:
        scores = scores.masked_fill(~(torch.arange(H.shape[1]) < doc_lens[:, None])[..., None], float("-inf"))
    if stable:
        alpha = torch.softmax(scores, dim=axis)
    else:
        alpha = scores.exp() / scores.exp().sum(axis, keepdim=True)
    if empty == "zero":
        alpha = alpha.nan_to_num()
    V = torch.einsum("bic,bid->bcd", alpha, H)
    if readout == "every":  # each logit reads every class's vector
        return torch.einsum("bcd,ed->bc", V, beta) + b
    return (V * beta).sum(-1) + b


def test_per_class_attention_reference_passes():
    assert grade("ch07-han-per-class-attention", _per_class).passed


def test_per_class_attention_traps_fail_on_their_cases():
    cases = {
        ("axis", 2): "Case 'by hand: keys (1, 0) and (0, 1)",  # a softmax over the classes
        ("shared", True): "Case 'by hand: keys (1, 0) and (0, 1)",
        ("readout", "every"): "Case 'by hand: keys (1, 0) and (0, 1)",
        ("masked", False): "Case 'documents of 3 and 1 sentences, padding sentences holding +-100",
        ("empty", "nan"): "Case 'a document without sentences gets the biases b, not NaN",
    }
    for (trap, value), name in cases.items():
        def wrong(*args, trap=trap, value=value):
            return _per_class(*args, **{trap: value})

        assert name in _failed_case("ch07-han-per-class-attention", wrong).split("\nAlso")[0], trap


def test_per_class_attention_without_the_maximum_fails_only_on_the_large_context_vectors():
    def unstable(*args):
        return _per_class(*args, stable=False)

    result = grade("ch07-han-per-class-attention", unstable)
    assert result.cases_passed == result.cases_total - 1
    assert "Case 'large context vectors (U x 1000): no overflow' failed" in result.message
