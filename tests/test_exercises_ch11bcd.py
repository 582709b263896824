"""Sections 11.2-11.4's checkers: a typical wrong answer fails on the case that names its trap."""

from __future__ import annotations

import torch

from attn_utils.exercises import grade
from attn_utils.masking import causal_mask, masked_softmax


def _first_failure(label, fn) -> str:
    """The message of a failed check: it names the first case that failed."""
    result = grade(label, fn)
    assert not result.passed
    return result.message


def _causal_tiled(top_left=False, guard_rows=True, subtract_max=True):
    """Causal tiled attention with one of its typical mistakes switched on."""

    def attention(Q, K, V, block_size):
        n_q, n_k = Q.shape[-2], K.shape[-2]
        tau = Q.shape[-1] ** -0.5
        rows = []
        for i in range(0, n_q, block_size):
            Qi = Q[..., i : i + block_size, :]
            pos = torch.arange(i, i + Qi.shape[-2]) + (0 if top_left else n_k - n_q)
            m = torch.full(Qi.shape[:-1], float("-inf"), dtype=Q.dtype)
            l = torch.zeros_like(m)
            O = torch.zeros(*Qi.shape[:-1], V.shape[-1], dtype=Q.dtype)
            for j in range(0, min(n_k, int(pos[-1]) + 1), block_size):
                keys = torch.arange(j, min(j + block_size, n_k))
                S = tau * Qi @ K[..., j : j + block_size, :].transpose(-2, -1)
                S = S.masked_fill(keys > pos[:, None], float("-inf"))
                m_new = torch.maximum(m, S.amax(dim=-1))
                if subtract_max:
                    shift = torch.where(m_new == float("-inf"), 0.0, m_new)
                else:
                    shift = torch.zeros_like(m_new)
                P = torch.exp(S - shift[..., None])
                rescale = torch.exp(m - shift) if subtract_max else torch.ones_like(m)
                l = rescale * l + P.sum(dim=-1)
                O = rescale[..., None] * O + P @ V[..., j : j + block_size, :]
                m = m_new
            rows.append(O / (torch.where(l > 0, l, 1.0) if guard_rows else l)[..., None])
        return torch.cat(rows, dim=-2)

    return attention


def test_causal_tiled_attention_reference_and_traps():
    assert grade("ch11-write-causal-tiled-attention", _causal_tiled()).passed
    label = "ch11-write-causal-tiled-attention"
    assert "Case 'one new query after 39 cached positions" in _first_failure(
        label, _causal_tiled(top_left=True))
    assert "Case '6 queries, 4 keys: the first 2 queries come before every key" in _first_failure(
        label, _causal_tiled(guard_rows=False))
    assert "Case 'scores near 1000 in float32" in _first_failure(label, _causal_tiled(subtract_max=False))


def test_causal_tiled_attention_without_a_mask_fails_the_hand_case():
    def unmasked(Q, K, V, block_size):
        return torch.softmax(Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5, dim=-1) @ V

    assert "Case 'by hand: two positions" in _first_failure("ch11-write-causal-tiled-attention", unmasked)


def test_causal_attention_over_the_whole_map_fails_only_the_memory_case():
    def whole_map(Q, K, V, block_size):  # right values, but the n x n map at once
        scores = Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5
        return masked_softmax(scores, causal_mask(Q.shape[-2], K.shape[-2])) @ V

    result = grade("ch11-write-causal-tiled-attention", whole_map)
    assert result.cases_passed == result.cases_total - 1
    assert "no tensor of a quarter of the 64 x 64 map' failed: raised TensorTooLarge" in result.message


def test_merge_without_the_guard_for_empty_blocks_fails_on_the_query_that_sees_nothing():
    def unguarded(m1, l1, acc1, m2, l2, acc2):
        m = torch.maximum(m1, m2)
        w1, w2 = torch.exp(m1 - m), torch.exp(m2 - m)
        return (w1[..., None] * acc1 + w2[..., None] * acc2) / (w1 * l1 + w2 * l2)[..., None]

    assert "Case 'a query that sees nothing in either block" in _first_failure(
        "ch11-write-merge-attention-blocks", unguarded)


def _alibi(top_left=False, masked=True, sign=-1.0, sort_slopes=False):
    def attention(Q, K, V, slopes):
        n_q, n_k = Q.shape[-2], K.shape[-2]
        i = torch.arange(n_q)[:, None] + (0 if top_left else n_k - n_q)
        j = torch.arange(n_k)[None, :]
        if sort_slopes:
            slopes = slopes.sort(descending=True).values
        scores = Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5 + sign * slopes[:, None, None] * (i - j)
        if masked:
            scores = scores.masked_fill(j > i, float("-inf"))
        return torch.softmax(scores, dim=-1) @ V

    return attention


def test_alibi_attention_reference_and_traps():
    label = "ch11-modern-write-alibi-attention"
    assert grade(label, _alibi()).passed
    assert "Case 'by hand: slope 1/2" in _first_failure(label, _alibi(sign=1.0))
    assert "later keys are masked, not rewarded" in _first_failure(label, _alibi(masked=False)).split("\n")[0]
    top_left = _first_failure(label, _alibi(top_left=True))  # the hand case's query is the last of 3
    assert "Case 'by hand: slope 1/2, equal content scores, the query at position 2 of 3" in top_left
    assert "'one new query after 9 cached positions" in top_left
    assert "Case 'slopes given per head, in any order" in _first_failure(label, _alibi(sort_slopes=True))


def test_alibi_attention_that_scales_the_bias_fails_the_hand_case():
    def scaled_bias(Q, K, V, slopes):
        n_q, n_k = Q.shape[-2], K.shape[-2]
        i, j = torch.arange(n_k - n_q, n_k)[:, None], torch.arange(n_k)[None, :]
        scores = (Q @ K.transpose(-2, -1) - slopes[:, None, None] * (i - j)) / Q.shape[-1] ** 0.5
        return torch.softmax(scores.masked_fill(j > i, float("-inf")), dim=-1) @ V

    assert "Case 'by hand: slope 1/2" in _first_failure("ch11-modern-write-alibi-attention", scaled_bias)


def _grouped(interleaved=False, scaled=True, copy_cache=False):
    def step(q, K, V):
        batch, h, d_h = q.shape
        g = K.shape[1]
        if copy_cache:  # right values, but the cache repeated for every query head
            K, V = K.repeat_interleave(h // g, dim=1), V.repeat_interleave(h // g, dim=1)
            g = h
        if interleaved:  # heads 0, 1, 0, 1 paired with the key/value heads
            q = q.reshape(batch, h // g, g, d_h).transpose(1, 2)
        else:
            q = q.reshape(batch, g, h // g, d_h)
        scores = q @ K.transpose(-2, -1) / (d_h**0.5 if scaled else 1.0)
        out = torch.softmax(scores, dim=-1) @ V  # (batch, g, h/g, d_h)
        return (out.transpose(1, 2) if interleaved else out).reshape(batch, h, d_h)

    return step


def test_grouped_decode_reference_and_traps():
    label = "ch11-modern-write-grouped-decode"
    assert grade(label, _grouped()).passed
    assert "Case 'one key/value head for 6 query heads (multi-query), d_h = 32" in _first_failure(
        label, _grouped(scaled=False))
    assert "Case '4 query heads, 2 key/value heads: heads 0, 1 read group 0" in _first_failure(
        label, _grouped(interleaved=True))
    result = grade(label, _grouped(copy_cache=True))
    assert result.cases_passed == result.cases_total - 1
    assert "no copy of the cache per query head' failed: raised TensorTooLarge" in result.message


def _targets(earlier_offset=-1, shift=True, last_only=False, own_key=True):
    def targets(tokens):
        T = tokens.shape[1]
        same = tokens[:, :, None] == tokens[:, None, :]
        matches = same & torch.ones(T, T, dtype=torch.bool).tril(earlier_offset)
        if last_only:  # keep only the most recent earlier occurrence
            j = torch.arange(T)
            latest = torch.where(matches, j, -1).amax(dim=-1, keepdim=True)
            matches = matches & (j == latest)
        out = torch.zeros_like(matches)
        if shift:
            out[:, :, 1:] = matches[:, :, :-1]
        else:
            out = matches
        if not own_key:  # believes a head never attends to its own position
            out = out & ~torch.eye(T, dtype=torch.bool)
        return out

    return targets


def test_induction_targets_traps():
    label = "ch11-induction-write-targets"
    assert grade(label, _targets()).passed
    assert "Case 'no token repeats" in _first_failure(label, _targets(earlier_offset=0))
    assert "Case 'a token seen once before, at position 1: key 2" in _first_failure(label, _targets(shift=False))
    assert "Case 'a token seen twice before: both following keys" in _first_failure(label, _targets(last_only=True))
    assert "Case 'a repeated token right after itself" in _first_failure(label, _targets(own_key=False))


def test_previous_score_traps():
    label = "ch11-induction-write-previous-score"

    def main_diagonal(weights):
        return torch.diagonal(weights, dim1=-2, dim2=-1).mean(dim=(0, 2))

    def over_heads(weights):  # averages over the wrong axis
        return torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).mean(dim=(1, 2))

    def counts_query_0(weights):  # divides by T queries instead of T - 1
        below = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1)
        return below.sum(dim=(0, 2)) / (weights.shape[0] * weights.shape[-1])

    assert "Case 'an ideal previous-token head: 1'" in _first_failure(label, main_diagonal)
    assert "Case 'an ideal previous-token head: 1'" in _first_failure(label, counts_query_0)
    assert "Case 'two heads, one ideal and one uniform, batch of 2'" in _first_failure(label, over_heads)
