"""Chapters 5-6's checkers: the typical wrong answer of each exercise fails on the case that names its trap."""

from __future__ import annotations

import torch

from attn_utils.exercises import grade


def _first_failure(label, fn) -> str:
    result = grade(label, fn)
    assert not result.passed
    return result.message.split("\nAlso failing")[0]  # the first failing case only


# ch05-backward-states ---------------------------------------------------------------------------

def _reverse_within(x, lens):
    steps = torch.arange(x.shape[1])
    real = steps < lens[:, None]
    source = torch.where(real, lens[:, None] - 1 - steps, steps)
    return x.gather(1, source[..., None].expand_as(x)), real


def test_backward_states_that_flip_the_padded_batch_fail_the_hand_case():
    def flip_everything(x, lens, rnn):  # the padding is read first, before each sentence's last word
        outputs, _ = rnn(x.flip(1))
        return outputs.flip(1) * (torch.arange(x.shape[1]) < lens[:, None])[..., None]

    assert "Case 'by hand: every step adds 1/4" in _first_failure("ch05-backward-states", flip_everything)


def test_backward_states_not_reversed_back_fail_the_hand_case():
    def not_reversed_back(x, lens, rnn):
        reversed_x, real = _reverse_within(x, lens)
        outputs, _ = rnn(reversed_x)
        return outputs * real[..., None]

    assert "Case 'by hand: every step adds 1/4" in _first_failure("ch05-backward-states", not_reversed_back)


def test_backward_states_with_states_at_the_padding_fail_where_padding_is_huge():
    def padding_kept(x, lens, rnn):  # right at real positions, but the padding's states are not zeroed
        reversed_x, _ = _reverse_within(x, lens)
        outputs, _ = rnn(reversed_x)
        back, _ = _reverse_within(outputs, lens)
        return back

    message = _first_failure("ch05-backward-states", padding_kept)
    assert "Case 'by hand: every step adds 1/4" in message  # the padded zeros of the hand case


# ch05-attention-aer -------------------------------------------------------------------------------

def _aer(weights, src_valid_lens, sure, possible, *, score_all=False, keep_end=False, mean=False, p_is_s=False):
    best = weights.argmax(-1)
    rows = torch.ones_like(best, dtype=torch.bool) if score_all else possible.any(-1)
    linked = rows if keep_end else rows & (best < src_valid_lens[:, None])
    predicted = torch.zeros_like(sure).scatter_(-1, best[..., None], linked[..., None])
    possible = sure if p_is_s else possible

    def rate(a, s, p):
        return 1 - ((a & s).sum() + (a & p).sum()).double() / (a.sum() + s.sum()).double()

    if mean:
        return torch.stack([rate(a, s, p) for a, s, p in zip(predicted, sure, possible)]).mean()
    return rate(predicted, sure, possible)


def test_aer_traps_fail_on_their_cases():
    cases = {
        "score_all": "Case 'a French word with no gold link is not scored",
        "keep_end": "Case 'rows whose strongest weight is on <eos>",
        "p_is_s": "Case 'rows with only possible links are scored",
        "mean": "Case 'counts summed over the corpus",
    }
    for trap, name in cases.items():
        def wrong(weights, src_valid_lens, sure, possible, trap=trap):
            return _aer(weights, src_valid_lens, sure, possible, **{trap: True})

        assert name in _first_failure("ch05-attention-aer", wrong), trap
    assert grade("ch05-attention-aer", _aer).passed


def test_aer_rows_scored_by_sure_links_only_fail_on_possible_links():
    def sure_rows_only(weights, src_valid_lens, sure, possible):
        return _aer(weights, src_valid_lens, sure, sure | (possible & sure.any(-1, keepdim=True)))

    assert "Case 'rows with only possible links are scored" in _first_failure("ch05-attention-aer", sure_rows_only)


# ch06-window-context ------------------------------------------------------------------------------

def _window(h_t, enc, src_valid_lens, centres, W_a, window, *, rounded=False, clamped=False, gaussian=True,
            renormalise=False):
    batch, S, _ = enc.shape
    positions = torch.floor(centres + 0.5).long()[..., None] + torch.arange(-window, window + 1)
    distance = positions - centres[..., None]
    inside = positions < src_valid_lens[:, None, None]
    if not rounded:
        inside &= distance.abs() <= window
    if clamped:  # positions before 0 read position 0 again (counted twice)
        positions = positions.clamp(min=0)
    else:
        inside &= positions >= 0
    states = enc[torch.arange(batch)[:, None, None], positions.clamp(0, S - 1)]
    scores = (states @ (h_t @ W_a)[..., None])[..., 0]
    weights = torch.softmax(scores.masked_fill(~inside, float("-inf")), dim=-1)
    if gaussian:
        weights = weights * torch.exp(-(distance**2) / (2 * (window / 2) ** 2))
    if renormalise:
        weights = weights / weights.sum(-1, keepdim=True)
    return (weights[..., None] * states).sum(-2)


def test_window_context_traps_fail_on_their_cases():
    assert grade("ch06-window-context", _window).passed
    cases = {
        "gaussian": (False, "Case 'by hand: states 0..4"),
        "renormalise": (True, "Case 'by hand: states 0..4"),
        "rounded": (True, "Case 'fractional centres 1.5 and 2.5"),
        "clamped": (True, "Case 'centres 0 and 0.4: the window runs off the start"),
    }
    for trap, (value, name) in cases.items():
        def wrong(*args, trap=trap, value=value):
            return _window(*args, **{trap: value})

        assert name in _first_failure("ch06-window-context", wrong), trap


def test_window_context_from_every_score_fails_only_the_large_case():
    def every_score(h_t, enc, src_valid_lens, centres, W_a, window):  # the chapter's way: all S scores, masked
        scores = (h_t @ W_a) @ enc.transpose(1, 2)  # (batch, Q, S)
        s = torch.arange(enc.shape[1])
        distance = s - centres[..., None]
        inside = (distance.abs() <= window) & (s < src_valid_lens[:, None, None])
        weights = torch.softmax(scores.masked_fill(~inside, float("-inf")), dim=-1)
        return (weights * torch.exp(-(distance**2) / (2 * (window / 2) ** 2))) @ enc

    result = grade("ch06-window-context", every_score)
    assert result.cases_passed == result.cases_total - 1
    assert "no tensor of 2 x 64 x 4000 scores' failed: raised TensorTooLarge" in result.message


# ch06-coverage-weights ----------------------------------------------------------------------------

def _coverage(h_t, enc, src_valid_lens, W_a, v_a, w_c, *, coverage="sum", swapped=False, masked=True):
    d = enc.shape[-1]
    W_q, W_k = (W_a[:, d:], W_a[:, :d]) if swapped else (W_a[:, :d], W_a[:, d:])
    keys, queries = enc @ W_k.T, h_t @ W_q.T
    padding = torch.arange(enc.shape[1]) >= src_valid_lens[:, None]

    def weights_at(t, cov):
        scores = torch.tanh(keys + queries[:, t, None] + cov[..., None] * w_c) @ v_a
        return torch.softmax(scores.masked_fill(padding, float("-inf")) if masked else scores, dim=-1)

    if coverage == "one pass":  # every step's weights without coverage, summed, then scored once more
        plain = torch.stack([weights_at(t, torch.zeros(enc.shape[:2])) for t in range(h_t.shape[1])], dim=1)
        earlier = plain.cumsum(dim=1) - plain
        return torch.stack([weights_at(t, earlier[:, t]) for t in range(h_t.shape[1])], dim=1)
    total, last, steps = torch.zeros(enc.shape[:2]), torch.zeros(enc.shape[:2]), []
    for t in range(h_t.shape[1]):
        a_t = weights_at(t, {"sum": total, "last": last, "none": 0 * total}[coverage])
        steps.append(a_t)
        total, last = total + a_t, a_t
    return torch.stack(steps, dim=1)


def test_coverage_weights_reference_passes_and_equals_the_concat_score_without_coverage():
    from attn_utils.exercises.ch06 import coverage_weights_reference
    from attn_utils.masking import masked_softmax
    from attn_utils.scoring import concat_score

    assert grade("ch06-coverage-weights", _coverage).passed
    g = torch.Generator().manual_seed(0)
    h_t, enc, W_a, v_a = (torch.randn(*shape, generator=g) for shape in ((2, 3, 4), (2, 5, 4), (4, 8), (4,)))
    lens = torch.tensor([5, 3])
    plain = masked_softmax(concat_score(h_t, enc, lambda x: x @ W_a.T, lambda x: (x @ v_a)[..., None]), lens)
    torch.testing.assert_close(coverage_weights_reference(h_t, enc, lens, W_a, v_a, torch.zeros(4)), plain)


def test_coverage_weights_traps_fail_on_their_cases():
    cases = {
        ("coverage", "none"): "Case 'by hand: weights (3/4, 1/4) at t = 0",
        ("coverage", "last"): "Case 'by hand: weights (3/4, 1/4) at t = 0",
        ("coverage", "one pass"): "Case 'six steps with a strong coverage term",
        ("swapped", True): "Case 'w_c = 0: no coverage, the concat weights of every step",
        ("masked", False): "Case 'lengths 4 and 2, padding holding +-100",
    }
    for (trap, value), name in cases.items():
        def wrong(*args, trap=trap, value=value):
            return _coverage(*args, **{trap: value})

        assert name in _first_failure("ch06-coverage-weights", wrong), trap
