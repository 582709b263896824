"""attn_utils.metrics against independent references: sacrebleu's corpus BLEU, d2l's sentence BLEU,
and alignment error rates worked out by hand."""

from __future__ import annotations

import math
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attn_utils.metrics import (
    alignment_error_rate,
    attention_aer,
    attention_alignment,
    bleu,
    bleu_from_statistics,
    bleu_statistics,
    bootstrap_bleu,
    corpus_bleu,
    group_references,
)

sacrebleu = pytest.importorskip("sacrebleu", reason="sacrebleu is the reference for corpus BLEU (requirements-dev.txt)")

WORDS = ["le", "chat", "noir", "dort", ".", "un", "chien", "!"]


def _sentence(rng: random.Random, max_len: int = 9) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randrange(max_len + 1)))


def _reference_bleu(hyps, refs, **kwargs) -> float:
    return sacrebleu.corpus_bleu(hyps, [refs], tokenize="none", **kwargs).score


def test_corpus_bleu_hand_values():
    assert corpus_bleu(["le chat dort ."], ["le chat dort ."]) == pytest.approx(100.0)
    assert corpus_bleu(["un chien"], ["le chat dort ."]) == 0.0  # no match at all
    assert corpus_bleu([""], ["le chat"]) == 0.0  # empty hypothesis: brevity penalty 0
    # 3 of 4 unigrams, 2 of 3 bigrams, 1 of 2 trigrams, 0 of 1 4-gram (exp smoothing: 100/(2·1));
    # equal lengths, so no brevity penalty
    got = corpus_bleu(["le chat noir dort"], ["le chat noir ."])
    assert got == pytest.approx(math.exp((math.log(75) + math.log(200 / 3) + math.log(50) + math.log(50)) / 4))
    assert got == pytest.approx(59.4604, abs=1e-4)
    # brevity penalty: 4 hypothesis tokens, all n-grams right, against 6 reference tokens → exp(1 - 6/4)
    assert corpus_bleu(["le chat noir dort"], ["le chat noir dort bien ."]) == pytest.approx(100 * math.exp(-0.5))
    # a corpus with no 4-gram at all scores 0, even when it is exact (as in sacrebleu)
    assert corpus_bleu(["le chat dort"], ["le chat dort"]) == 0.0


def test_corpus_bleu_equals_sacrebleu_on_many_random_corpora():
    rng = random.Random(0)
    checked = 0
    for _ in range(400):
        n = rng.randrange(1, 7)
        hyps = [_sentence(rng) for _ in range(n)]
        refs = [_sentence(rng) for _ in range(n)]
        if rng.random() < 0.3:  # a near copy, so high orders match too
            refs = [h if rng.random() < 0.5 else r for h, r in zip(hyps, refs)]
        expected = _reference_bleu(hyps, refs)
        assert corpus_bleu(hyps, refs) == pytest.approx(expected, abs=1e-6), (hyps, refs)
        checked += expected > 0
    assert checked > 100  # many cases with a nonzero score, not only zeros


def test_corpus_bleu_short_and_empty_hypotheses_match_sacrebleu():
    cases = [
        (["", "le chat dort ."], ["le chat", "le chat dort ."]),
        (["le", "chat"], ["le chat dort", "chat"]),
        (["le chat"], ["le chat"]),  # no 3-grams or 4-grams at all
        (["", ""], ["le", "chat"]),
        (["le chat dort ."], [""]),  # empty reference
        (["chat le"], ["le chat"]),
    ]
    for hyps, refs in cases:
        assert corpus_bleu(hyps, refs) == pytest.approx(_reference_bleu(hyps, refs), abs=1e-6), (hyps, refs)


def test_corpus_bleu_without_smoothing_and_with_several_references():
    rng = random.Random(1)
    for _ in range(150):
        n = rng.randrange(1, 5)
        hyps = [_sentence(rng) for _ in range(n)]
        refs_a = [_sentence(rng) for _ in range(n)]
        refs_b = [_sentence(rng) for _ in range(n)]
        assert corpus_bleu(hyps, refs_a, smooth="none") == pytest.approx(
            _reference_bleu(hyps, refs_a, smooth_method="none"), abs=1e-6)
        expected = sacrebleu.corpus_bleu(hyps, [refs_a, refs_b], tokenize="none").score
        assert corpus_bleu(hyps, [[a, b] for a, b in zip(refs_a, refs_b)]) == pytest.approx(expected, abs=1e-6)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.lists(st.sampled_from(WORDS), max_size=8), st.lists(st.sampled_from(WORDS), max_size=8)),
                min_size=1, max_size=5))
def test_corpus_bleu_property_against_sacrebleu(pairs):
    hyps = [" ".join(h) for h, _ in pairs]
    refs = [" ".join(r) for _, r in pairs]
    assert corpus_bleu(hyps, refs) == pytest.approx(_reference_bleu(hyps, refs), abs=1e-6)


def test_corpus_bleu_accepts_token_lists_and_rejects_bad_input():
    assert corpus_bleu([["le", "chat", "dort", "."]], ["le chat dort ."]) == pytest.approx(100.0)
    with pytest.raises(ValueError, match="2 hypotheses and 1 references"):
        corpus_bleu(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="at least one hypothesis"):
        corpus_bleu([], [])
    with pytest.raises(ValueError, match="single string"):
        corpus_bleu("le chat", "le chat")
    with pytest.raises(ValueError, match="smooth"):
        corpus_bleu(["a"], ["a"], smooth="floor")


def test_sentence_bleu_equals_d2l(d2l):
    rng = random.Random(2)
    for _ in range(500):
        pred = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 9)))
        label = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 9)))
        if rng.random() < 0.3:
            label = pred
        k = rng.randrange(1, 5)
        assert bleu(pred, label, k) == pytest.approx(d2l.bleu(pred, label, k), abs=1e-12), (pred, label, k)
    # d2l's own demo values
    assert bleu("va !", "va !", 2) == pytest.approx(1.0)
    assert bleu("il est calme .", "il est calme .", 2) == pytest.approx(1.0)
    # no brevity penalty (5 ≥ 4 tokens); unigrams 3/5, bigrams 1/4
    assert bleu("je suis chez moi .", "je suis calme .", 2) == pytest.approx(0.6 ** 0.5 * 0.25 ** 0.25)


# ---------------------------------------------------------------------------------------------
# Alignment error rate
# ---------------------------------------------------------------------------------------------

# "the red car ." → "la voiture rouge ." (+ <eos> on both sides): rows are target positions.
SURE = {(0, 0), (2, 1), (1, 2), (3, 3)}
WEIGHTS = torch.tensor([
    # the  red  car  .    <eos>
    [0.70, 0.10, 0.10, 0.05, 0.05],  # la      → the   (sure)
    [0.10, 0.50, 0.30, 0.05, 0.05],  # voiture → red   (wrong: car is sure)
    [0.05, 0.60, 0.30, 0.03, 0.02],  # rouge   → red   (sure)
    [0.05, 0.05, 0.10, 0.30, 0.50],  # .       → <eos> (past the source: no link)
    [0.10, 0.10, 0.10, 0.10, 0.60],  # <eos>   (no gold link: not scored)
])


def test_attention_alignment_takes_the_argmax_of_each_target_row():
    assert attention_alignment(WEIGHTS) == {(0, 0), (1, 1), (1, 2), (4, 3), (4, 4)}
    assert attention_alignment(WEIGHTS, src_len=4) == {(0, 0), (1, 1), (1, 2)}
    assert attention_alignment(WEIGHTS, src_len=4, targets=[0, 2]) == {(0, 0), (1, 2)}
    with pytest.raises(ValueError, match=r"\(target_steps, source_steps\)"):
        attention_alignment(torch.zeros(2, 3, 4))


def test_alignment_error_rate_hand_made_case():
    predicted = {(0, 0), (1, 1), (1, 2)}
    # |A| = 3, |S| = 4, |A∩S| = 2, P = S: AER = 1 - (2 + 2) / 7
    assert alignment_error_rate(predicted, SURE) == pytest.approx(3 / 7)
    # (1, 1) marked possible: |A∩P| = 3, AER = 1 - (2 + 3) / 7
    assert alignment_error_rate(predicted, SURE, possible={(1, 1)}) == pytest.approx(2 / 7)
    assert alignment_error_rate(SURE, SURE) == 0.0
    assert alignment_error_rate({(3, 0)}, {(0, 3)}) == 1.0
    with pytest.raises(ValueError, match="no predicted and no gold links"):
        alignment_error_rate(set(), set())


def test_attention_aer_from_weights_single_and_corpus():
    assert attention_aer(WEIGHTS, SURE, src_valid_lens=4) == pytest.approx(3 / 7)
    assert attention_aer(WEIGHTS.numpy(), SURE, possible={(1, 1)}, src_valid_lens=4) == pytest.approx(2 / 7)
    # Without src_len the "." row links to <eos> (4, 3): |A| = 4, |A∩S| = 2 → 1 - 4/8
    assert attention_aer(WEIGHTS, SURE) == pytest.approx(0.5)
    # A second, perfectly attended sentence "cats sleep" → "chats dorment": 2 links, both right.
    perfect = torch.tensor([[0.9, 0.1, 0.0], [0.2, 0.8, 0.0], [0.0, 0.0, 1.0]])
    corpus = attention_aer([WEIGHTS, perfect], [SURE, {(0, 0), (1, 1)}], src_valid_lens=[4, 2])
    # counts summed: |A∩S| = 2 + 2, |A| = 3 + 2, |S| = 4 + 2 → 1 - 8/11
    assert corpus == pytest.approx(3 / 11)
    batch = torch.stack([WEIGHTS[:3, :3], perfect])  # (batch, target, source)
    assert attention_aer(batch, [{(0, 0), (1, 2)}, {(0, 0), (1, 1)}]) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="one set of gold links per attention matrix"):
        attention_aer([WEIGHTS, perfect], [SURE])


def test_bleu_statistics_sum_to_corpus_bleu_on_any_subset():
    rng = random.Random(3)
    hyps = [_sentence(rng) for _ in range(40)]
    refs = [h if rng.random() < 0.6 else _sentence(rng) for h in hyps]
    stats = bleu_statistics(hyps, refs)
    assert stats.shape == (40, 10) and stats.dtype == torch.long
    for _ in range(20):
        rows = [rng.randrange(40) for _ in range(40)]  # a resample, with repeats
        expected = _reference_bleu([hyps[i] for i in rows], [refs[i] for i in rows])
        assert bleu_from_statistics(stats[rows].sum(dim=0)) == pytest.approx(expected, abs=1e-6)


def test_bootstrap_bleu_is_the_percentile_interval_of_sacrebleu_on_the_resamples():
    rng = random.Random(4)
    hyps = [_sentence(rng) for _ in range(30)]
    refs = [h if rng.random() < 0.5 else _sentence(rng) for h in hyps]
    got = bootstrap_bleu(hyps, refs, num_samples=200, seed=7)
    # the same resamples, scored independently by sacrebleu
    picks = torch.randint(30, (200, 30), generator=torch.Generator().manual_seed(7)).tolist()
    scores = sorted(_reference_bleu([hyps[i] for i in rows], [refs[i] for i in rows]) for rows in picks)
    low, high = torch.quantile(torch.tensor(scores, dtype=torch.float64), torch.tensor([0.025, 0.975],
                                                                                        dtype=torch.float64))
    assert got.bleu == pytest.approx(_reference_bleu(hyps, refs), abs=1e-6)
    assert got.low == pytest.approx(float(low), abs=1e-6) and got.high == pytest.approx(float(high), abs=1e-6)
    assert got.low < got.bleu < got.high  # a real spread on 30 noisy sentences
    assert bootstrap_bleu(hyps, refs, num_samples=200, seed=7) == got  # seeded: reproducible


def test_bootstrap_bleu_rejects_bad_settings():
    with pytest.raises(ValueError, match="confidence must be between 0 and 1, got 95"):
        bootstrap_bleu(["le chat"], ["le chat"], confidence=95)
    with pytest.raises(ValueError, match="num_samples must be a positive integer, got 0"):
        bootstrap_bleu(["le chat"], ["le chat"], num_samples=0)
    with pytest.raises(ValueError, match="expected 10 summed counts for max_order=4, got 3"):
        bleu_from_statistics(torch.tensor([1, 2, 3]))


def test_group_references_scores_each_source_once_against_all_its_references():
    hyps = ["le chat", "le chat", "un chien", "le chat"]
    refs = ["le chat", "un chat", "un chien", "le matou"]
    sources = ["the cat", "the cat", "a dog", "the cat"]
    grouped_hyps, grouped_refs = group_references(hyps, refs, sources)
    assert grouped_hyps == ["le chat", "un chien"]
    assert grouped_refs == [["le chat", "un chat", "le matou"], ["un chien"]]
    with pytest.raises(ValueError, match="expected as many hypotheses, references and sources, got 4, 4 and 3"):
        group_references(hyps, refs, sources[:3])


def test_bleu_orders_must_be_positive_integers():
    """Before: max_order=0 (or d2l's k=0) scored 0 or 1 silently, max_order=True was a unigram BLEU."""
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ValueError, match=rf"max_order must be a positive integer, got {bad!r}"):
            corpus_bleu(["le chat dort"], ["le chat dort"], max_order=bad)
        with pytest.raises(ValueError, match=rf"k must be a positive integer \(the longest n-gram order\), got "
                                             rf"{bad!r}"):
            bleu("le chat dort", "le chat dort", bad)
    with pytest.raises(ValueError, match="max_order must be a positive integer, got 0"):
        bleu_from_statistics(torch.tensor([1, 1]), max_order=0)
    assert corpus_bleu(["le chat dort"], ["le chat dort"], max_order=3) == pytest.approx(100.0)


def test_semeval_scores_refuse_fractional_labels_and_empty_targets():
    """Before: a label of 2.7 was read as 2 (int() truncates), and no targets at all was reported as
    'every target is Other'."""
    from attn_utils.metrics import semeval_macro_f1

    with pytest.raises(ValueError, match=r"predictions: expected label indices \(integers\) or label strings, "
                                         r"got 2.7"):
        semeval_macro_f1([2.7, 0], [2, 0])
    with pytest.raises(ValueError, match="targets: expected label indices .* got True"):
        semeval_macro_f1([1], [True])
    with pytest.raises(ValueError, match="targets is empty: the macro-F1 needs at least one example, got 0"):
        semeval_macro_f1([], [])
    assert semeval_macro_f1(torch.tensor([2, 0]), [2.0, 0]) == semeval_macro_f1([2, 0], [2, 0])


def test_bootstrap_means_by_hand_on_constant_and_two_valued_columns():
    from attn_utils.metrics import bootstrap_means

    samples = torch.stack([torch.full((50,), 3.0), torch.tensor([0.0, 1.0]).repeat(25)], dim=1)  # (50, 2)
    got = bootstrap_means(samples, num_samples=2000, seed=1)
    assert got.mean.tolist() == [3.0, 0.5]
    assert got.low[0].item() == got.high[0].item() == 3.0  # nothing varies: the interval is a point
    # a mean of 50 fair coin flips: standard error 0.5 / sqrt(50) = 0.0707, so about 0.5 -+ 1.96 * 0.0707
    assert got.low[1].item() == pytest.approx(0.5 - 1.96 * 0.0707, abs=0.03)
    assert got.high[1].item() == pytest.approx(0.5 + 1.96 * 0.0707, abs=0.03)
    again = bootstrap_means(samples, num_samples=2000, seed=1)
    assert torch.equal(again.low, got.low) and torch.equal(again.high, got.high)  # seeded


def test_bootstrap_means_resample_rows_together_so_paired_differences_stay_paired():
    from attn_utils.metrics import bootstrap_means

    torch.manual_seed(0)
    a = torch.randn(200, dtype=torch.float64)
    pair = torch.stack([a, a + 0.1], dim=1)  # the second column is the first plus 0.1, row by row
    got = bootstrap_means(pair, seed=0)
    diff = bootstrap_means(pair[:, 1] - pair[:, 0], seed=0)
    assert got.high[1] - got.low[1] == pytest.approx((got.high[0] - got.low[0]).item(), rel=1e-9)
    assert diff.low.item() == pytest.approx(0.1) and diff.high.item() == pytest.approx(0.1)
    assert got.mean.shape == (2,) and diff.mean.shape == ()


def test_bootstrap_means_refuses_what_it_cannot_resample():
    from attn_utils.metrics import bootstrap_means

    for bad, match in [(torch.tensor([1.0]), "n >= 2 rows"), ([1.0, 2.0], "samples must be a tensor"),
                       (torch.tensor([1.0, float("nan")]), "samples must be finite")]:
        with pytest.raises(ValueError, match=match):
            bootstrap_means(bad)
    with pytest.raises(ValueError, match="confidence must be between 0 and 1"):
        bootstrap_means(torch.ones(3), confidence=1.0)
