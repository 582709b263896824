"""Training windows and sliding-window scoring of running text, against per-token computation by hand."""

from __future__ import annotations

import math

import pytest
import torch

from attn_utils import CausalLanguageModel, MaskedLanguageModel
from attn_utils.data.windows import random_windows
from attn_utils.evaluate import (
    hidden_token_scores,
    loss_by_position,
    losses_by_window,
    ngram_losses_by_window,
    perplexity,
    predict_hidden_tokens,
    sliding_window_logprobs,
    window_starts,
)


def small_lm(vocab=20, max_len=32):
    torch.manual_seed(0)
    return CausalLanguageModel(vocab, 16, 32, 2, 2, max_len=max_len).double().eval()


def test_random_windows_are_consecutive_slices_of_the_stream():
    stream = torch.arange(100) * 3
    windows = random_windows(stream, 50, 7, torch.Generator().manual_seed(0))
    assert windows.shape == (50, 8)
    starts = windows[:, 0] // 3
    assert torch.equal(windows, (starts[:, None] + torch.arange(8)) * 3)
    assert int(starts.min()) >= 0 and int(starts.max()) <= 100 - 8
    assert len(set(starts.tolist())) > 10  # random places, not one


def test_random_windows_reach_both_ends_of_the_stream():
    windows = random_windows(torch.arange(10), 400, 8, torch.Generator().manual_seed(0))
    assert set(windows[:, 0].tolist()) == {0, 1}  # the only two starts that fit 9 tokens


def test_window_starts_by_hand():
    # 10 tokens, context 4, stride 2: targets 1..4, then 5..6 (from start 2), 7..8 (start 4), 9 (start 5)
    assert window_starts(10, 4, 2) == [(0, 0), (2, 2), (4, 2), (5, 3)]
    assert window_starts(3, 4, 2) == [(0, 0)]  # shorter than the context: one window
    assert window_starts(5, 4, 4) == [(0, 0)]  # 4 targets: the first window scores them all
    assert window_starts(6, 4, 4) == [(0, 0), (1, 3)]


@pytest.mark.parametrize("num_tokens, context, stride", [(10, 4, 2), (23, 6, 1), (23, 6, 6), (40, 8, 3), (5, 8, 4)])
def test_window_starts_score_every_token_once_with_enough_context(num_tokens, context, stride):
    scored = []
    for start, skip in window_starts(num_tokens, context, stride):
        targets = list(range(start + 1, min(start + context, num_tokens - 1) + 1))[skip:]
        if start > 0:  # after the first window, every target sees at least context - stride tokens
            assert all(t - start >= context - stride for t in targets)
        scored += targets
    assert scored == list(range(1, num_tokens))


def test_sliding_window_logprobs_equal_each_token_scored_from_its_window():
    model = small_lm()
    seq = torch.randint(20, (10,), generator=torch.Generator().manual_seed(1))
    got = sliding_window_logprobs(model, seq, context=4, stride=2)
    starts = [0, 0, 0, 0, 2, 2, 4, 4, 5]  # window_starts(10, 4, 2) for targets 1..9
    want = []
    for t, start in zip(range(1, 10), starts):
        logits, _ = model(seq[None, start:t])  # the context the window gives target t
        want.append(torch.log_softmax(logits[0, -1], -1)[seq[t]])
    torch.testing.assert_close(got, torch.stack(want))


def test_full_context_equals_one_forward_pass_and_perplexity_is_exp_mean_nll():
    model = small_lm()
    seqs = [torch.randint(20, (n,), generator=torch.Generator().manual_seed(n)) for n in (12, 7)]
    full = []
    for s in seqs:
        logits, _ = model(s[None, :-1])
        full.append(torch.log_softmax(logits[0], -1).gather(-1, s[1:, None])[:, 0])
        torch.testing.assert_close(sliding_window_logprobs(model, s, context=16), full[-1])
    want = math.exp(-torch.cat(full).mean().item())
    assert perplexity(model, seqs, context=16) == pytest.approx(want, rel=1e-9)
    model.train()
    perplexity(model, seqs, context=16)
    assert model.training  # left as it was found


def test_loss_by_position_averages_each_window_position_by_hand():
    model = small_lm()
    seqs = [torch.randint(20, (n,), generator=torch.Generator().manual_seed(n)) for n in (13, 9, 4)]
    got = loss_by_position(model, seqs, context=4)
    # windows of 5 tokens at 0, 4, 8 of the first sequence and 0, 4 of the second; the third is too short
    windows = [seqs[0][0:5], seqs[0][4:9], seqs[0][8:13], seqs[1][0:5], seqs[1][4:9]]
    want = torch.zeros(4, dtype=torch.float64)
    for w in windows:
        for i in range(4):
            logits, _ = model(w[None, :i + 1])
            want[i] -= torch.log_softmax(logits[0, -1], -1)[w[i + 1]].item()
    torch.testing.assert_close(got, want / 5)
    with pytest.raises(ValueError, match="no sequence holds a window of context \\+ 1 = 21 tokens"):
        loss_by_position(model, seqs, context=20)


@pytest.mark.parametrize("length, context", [(12, 6), (12, 5), (4, 8)])
def test_predict_hidden_tokens_hides_one_token_at_a_time_in_a_centred_window(length, context):
    torch.manual_seed(0)
    model = MaskedLanguageModel(12, 16, 32, 2, 1, max_len=16).double().eval()
    seq = torch.randint(4, 12, (length,), generator=torch.Generator().manual_seed(2))
    got = predict_hidden_tokens(model, seq, context, mask_id=1, never=(0, 1), batch_size=3)
    width = min(context, length)
    want = []
    for p in range(1, length):
        start = min(max(p - width // 2, 0), length - width)
        X = seq[start:start + width].clone()
        X[p - start] = 1
        logits = model(X[None])[0, p - start]
        logits[[0, 1]] = float("-inf")
        want.append(int(logits.argmax()))
    assert got.tolist() == want
    assert not set(got.tolist()) & {0, 1}


def test_bad_inputs_are_named():
    model = small_lm()
    with pytest.raises(ValueError, match="stream must hold at least 9 tokens"):
        random_windows(torch.arange(5), 2, 8)
    with pytest.raises(ValueError, match="1-D integer tensor"):
        random_windows(torch.zeros(20), 2, 8)
    with pytest.raises(ValueError, match="stride must be at most context=4"):
        window_starts(10, 4, 5)
    with pytest.raises(ValueError, match="sequence must hold at least 2 tokens"):
        sliding_window_logprobs(model, torch.tensor([3]), 4)
    with pytest.raises(ValueError, match="non-empty list"):
        perplexity(model, [], 4)


def test_a_batch_size_of_zero_is_named():
    """Before: range()'s 'arg 3 must not be zero'; True was a batch of one window."""
    model = small_lm()
    stream = torch.arange(12) % 20
    for bad in (0, True):
        with pytest.raises(ValueError, match=rf"batch_size must be a positive integer, got {bad!r}"):
            sliding_window_logprobs(model, stream, 4, batch_size=bad)
        with pytest.raises(ValueError, match=rf"batch_size must be a positive integer, got {bad!r}"):
            predict_hidden_tokens(model, stream, 4, mask_id=1, batch_size=bad)


def test_losses_by_window_keeps_each_window_and_its_mean_is_loss_by_position():
    model = small_lm()
    seqs = [torch.randint(20, (n,), generator=torch.Generator().manual_seed(n)) for n in (13, 9, 4)]
    rows = losses_by_window(model, seqs, context=4)
    assert rows.shape == (5, 4) and rows.dtype == torch.float64
    w = seqs[1][4:9]  # the fifth window
    logits, _ = model(w[None, :3])
    assert rows[4, 2].item() == pytest.approx(-torch.log_softmax(logits[0, -1], -1)[w[3]].item(), rel=1e-9)
    torch.testing.assert_close(rows.mean(dim=0), loss_by_position(model, seqs, context=4))


def test_ngram_losses_by_window_score_the_same_windows_with_the_window_as_context():
    from attn_utils.ngram import KneserNeyLM

    seqs = [torch.tensor([0, 1, 2, 1, 2, 0, 1, 2, 2]), torch.tensor([2, 1, 0, 1, 2])]
    lm = KneserNeyLM(3, range(3)).fit([s.tolist() for s in seqs])
    got = ngram_losses_by_window(lm, seqs, context=4)
    windows = [[0, 1, 2, 1, 2], [2, 0, 1, 2, 2], [2, 1, 0, 1, 2]]
    want = [[-math.log(lm.prob(w[j + 1], w[:j + 1])) for j in range(4)] for w in windows]
    torch.testing.assert_close(got, torch.tensor(want, dtype=torch.float64), rtol=1e-12, atol=0)
    # the window's first prediction sees one token and the boundary before it, as at a sequence start
    assert got[1, 0].item() == pytest.approx(-math.log(lm.prob(0, ["<s>", 2])), rel=1e-12)
    with pytest.raises(ValueError, match="lm must be a fitted KneserNeyLM"):
        ngram_losses_by_window(KneserNeyLM(2, range(3)), seqs, context=4)


def test_ngram_losses_by_window_read_the_networks_bos_as_the_boundary():
    """Sequences as the network reads them start with <bos> (id 9 here), which the n-gram model never counts:
    it pads a sequence's start with "<s>". With ``bos=9`` the first window's contexts begin with that
    boundary, by hand; without it the unknown token is named, with the hint."""
    from attn_utils.ngram import KneserNeyLM

    texts = [[0, 1, 2, 1, 2, 0, 1, 2, 2], [2, 1, 0, 1, 2]]
    lm = KneserNeyLM(3, range(3)).fit(texts)
    seqs = [torch.tensor([9] + t) for t in texts]
    got = ngram_losses_by_window(lm, seqs, context=4, bos=9)
    windows = [["<s>", 0, 1, 2, 1], [1, 2, 0, 1, 2], ["<s>", 2, 1, 0, 1]]
    want = [[-math.log(lm.prob(w[j + 1], w[:j + 1])) for j in range(4)] for w in windows]
    torch.testing.assert_close(got, torch.tensor(want, dtype=torch.float64), rtol=1e-12, atol=0)
    # the first prediction of a text is the n-gram model's own first-token probability
    assert got[0, 0].item() == pytest.approx(-lm.sequence_logprobs([0])[0], rel=1e-12)
    with pytest.raises(ValueError, match=r"the token 9, which is not in the n-gram model's vocabulary \(if it"):
        ngram_losses_by_window(lm, seqs, context=4)
    with pytest.raises(ValueError, match="bos must be"):
        ngram_losses_by_window(lm, seqs, context=4, bos=-1)


def test_hidden_token_scores_give_the_guess_and_the_true_tokens_log_probability():
    torch.manual_seed(0)
    model = MaskedLanguageModel(12, 16, 32, 2, 1, max_len=16).double().eval()
    seq = torch.randint(3, 12, (20,), generator=torch.Generator().manual_seed(1))
    guesses, logprobs = hidden_token_scores(model, seq, 8, mask_id=1, never=(0, 1))
    assert torch.equal(guesses, predict_hidden_tokens(model, seq, 8, mask_id=1, never=(0, 1)))
    for pos in (1, 7, 19):  # start, middle, end: the window of 8 is clamped to the sequence
        start = min(max(pos - 4, 0), 12)
        X = seq[start:start + 8].clone()
        X[pos - start] = 1
        logits = model(X[None])[0, pos - start]
        logits[[0, 1]] = float("-inf")
        assert logprobs[pos - 1].item() == pytest.approx(torch.log_softmax(logits, -1)[seq[pos]].item(), rel=1e-9)
    some_guesses, some_logprobs = hidden_token_scores(model, seq, 8, 1, (0, 1), positions=torch.tensor([19, 7]))
    assert torch.equal(some_guesses, guesses[[18, 6]]) and torch.equal(some_logprobs, logprobs[[18, 6]])
    for bad in (torch.tensor([0]), torch.tensor([20]), torch.tensor([1.5]), torch.tensor([[1]])):
        with pytest.raises(ValueError, match="positions must be 1-D integers in 1 .. 19"):
            hidden_token_scores(model, seq, 8, 1, positions=bad)
