"""Chapters 10 and 11.1's checkers: a typical wrong answer fails on the case that names its trap."""

from __future__ import annotations

import torch

from attn_utils.exercises import grade


def _failed_case(label, fn) -> str:
    result = grade(label, fn)
    assert not result.passed
    return result.message


def _log_p(logits):
    return torch.log_softmax(logits.float(), dim=-1)


def test_smoothed_loss_that_averages_over_the_padding_fails_on_the_padded_rows():
    def every_position(logits, labels, pad, epsilon):
        log_p = _log_p(logits)
        nll = -log_p.gather(-1, labels[..., None]).squeeze(-1)
        return ((1 - epsilon) * nll - epsilon * log_p.mean(dim=-1)).mean()

    assert "Case 'rows of 6, 2 and 4 real tokens" in _failed_case("ch10-write-smoothed-loss",
                                                                   every_position)


def test_smoothed_loss_over_the_other_tokens_fails_the_hand_case():
    def others_only(logits, labels, pad, epsilon):  # epsilon / (V - 1) on every wrong token
        log_p = _log_p(logits)
        V = logits.shape[-1]
        nll = -log_p.gather(-1, labels[..., None]).squeeze(-1)
        rest = -(log_p.sum(dim=-1) + -nll) / (V - 1)  # mean of -log p over the other tokens
        return ((1 - epsilon) * nll + epsilon * rest)[labels != pad].mean()

    assert "Case 'by hand: vocabulary 2" in _failed_case("ch10-write-smoothed-loss", others_only)


def test_smoothed_loss_through_log_of_softmax_fails_on_logits_far_apart():
    def log_of_softmax(logits, labels, pad, epsilon):
        log_p = torch.log(torch.softmax(logits.float(), dim=-1))  # log(0) = -inf
        nll = -log_p.gather(-1, labels[..., None]).squeeze(-1)
        return ((1 - epsilon) * nll - epsilon * log_p.mean(dim=-1))[labels != pad].mean()

    result = grade("ch10-write-smoothed-loss", log_of_softmax)
    assert result.cases_passed == result.cases_total - 1
    assert "Case 'logits 300 apart" in result.message


def test_smoothed_loss_with_cross_entropys_ignore_index_passes():
    def ignore_index(logits, labels, pad, epsilon):
        return torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), labels.flatten(),
                                                 ignore_index=pad, label_smoothing=epsilon)

    assert grade("ch10-write-smoothed-loss", ignore_index).passed


def _split(Z, heads):  # (batch, 1, d) -> (batch, heads, 1, d / heads)
    return Z.reshape(Z.shape[0], 1, heads, -1).transpose(1, 2)


def _cached_step(x_new, past_k, past_v, W_q, W_k, W_v, W_o, include_self=True, scale_by_d=False):
    heads, dh = past_k.shape[1], past_k.shape[-1]
    q, k, v = (_split(x_new @ W.T, heads) for W in (W_q, W_k, W_v))
    keys = torch.cat([past_k, k], dim=2) if include_self else past_k
    values = torch.cat([past_v, v], dim=2) if include_self else past_v
    scale = (heads * dh) ** 0.5 if scale_by_d else dh**0.5
    weights = torch.softmax(q @ keys.transpose(-2, -1) / scale, dim=-1)
    return (weights @ values).transpose(1, 2).reshape(x_new.shape) @ W_o.T


def test_cached_step_traps_are_named():
    assert grade("ch10-write-cached-attention-step", _cached_step).passed

    def cache_only(*args):  # the new token does not see its own key
        return _cached_step(*args, include_self=False)

    assert "Case '3 cached tokens, 2 heads'" in _failed_case("ch10-write-cached-attention-step",
                                                              cache_only)

    def model_width_scale(*args):  # 1 / sqrt(d) in place of 1 / sqrt(d / heads)
        return _cached_step(*args, scale_by_d=True)

    result = grade("ch10-write-cached-attention-step", model_width_scale)
    assert result.cases_passed == 2  # an empty cache (one key) and 1 head, where the scale is moot
    assert "Case '3 cached tokens, 2 heads'" in result.message


def _sampling(logits, temperature, top_k, stable=True, shift=True):
    if temperature == 0:
        return torch.zeros_like(logits).scatter(-1, logits.argmax(dim=-1, keepdim=True), 1.0)
    if top_k is not None and top_k < logits.shape[-1]:
        if stable:
            kept = torch.sort(logits, dim=-1, descending=True, stable=True).indices[:, :top_k]
        else:  # the threshold of the k-th largest logit keeps every tie
            kept = None
            threshold = logits.topk(top_k, dim=-1).values[:, -1:]
            logits = logits.masked_fill(logits < threshold, float("-inf"))
        if kept is not None:
            keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, kept, True)
            logits = logits.masked_fill(~keep, float("-inf"))
    if shift:
        logits = logits - logits.max(dim=-1, keepdim=True).values
    return torch.exp(logits / temperature) / torch.exp(logits / temperature).sum(-1, keepdim=True)


def test_sampling_traps_are_named():
    assert grade("ch11-write-top-k-temperature", _sampling).passed

    def keeps_ties(logits, temperature, top_k):
        return _sampling(logits, temperature, top_k, stable=False)

    assert "Case 'ties: top-k 2 keeps the lower indices" in _failed_case(
        "ch11-write-top-k-temperature", keeps_ties)

    def unshifted(logits, temperature, top_k):  # exp(z / T) overflows for a tiny T
        return _sampling(logits, temperature, top_k, shift=False)

    assert "Case 'a tiny temperature (1e-6) must not overflow'" in _failed_case(
        "ch11-write-top-k-temperature", unshifted)


def _bert_mask(tokens, maskable, choose, action, random_tokens, mask_id, at_most=False,
               labels_from_inputs=False):
    chosen = maskable & ((choose <= 0.15) if at_most else (choose < 0.15))
    inputs = tokens.clone()
    inputs[chosen & (action < 0.8)] = mask_id
    swap = chosen & (action >= 0.8) & (action < 0.9)
    inputs[swap] = random_tokens[swap]
    labels = torch.full_like(tokens, -100)
    labels[chosen] = (inputs if labels_from_inputs else tokens)[chosen]
    return torch.stack([inputs, labels])


def test_bert_mask_traps_are_named():
    assert grade("ch11-write-mlm-masking", _bert_mask).passed

    def at_most(*args):
        return _bert_mask(*args, at_most=True)

    assert "Case 'the borders 0.15, 0.8 and 0.9'" in _failed_case("ch11-write-mlm-masking", at_most)

    def labels_from_inputs(*args):
        return _bert_mask(*args, labels_from_inputs=True)

    assert "Case 'random tokens with padding'" in _failed_case("ch11-write-mlm-masking",
                                                               labels_from_inputs)
