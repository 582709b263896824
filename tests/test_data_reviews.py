"""The generated reviews in which one sentence decides (attn_utils.data.reviews)."""

from __future__ import annotations

import collections

import pytest
import torch

from attn_utils.data.reviews import (
    MAX_WORDS,
    MIN_WORDS,
    NEGATION,
    NEGATIVE_WORDS,
    OPINION_WORDS,
    POSITIVE_WORDS,
    RARE_NEGATIVE_WORDS,
    RARE_POSITIVE_WORDS,
    VERDICT_CUES,
    documents_to_tensors,
    make_review_data,
    make_reviews,
    review_label,
    review_vocab,
)

# ----------------------------------------------------------------------------------------------
# The generator
# ----------------------------------------------------------------------------------------------


def _opens_with_cue(sentence):
    text = " ".join(sentence) + " "
    return any(text.startswith(" ".join(cue) + " ") for cue in VERDICT_CUES)


def test_same_seed_same_reviews_and_another_seed_others():
    a, b, c = make_reviews(50, seed=3), make_reviews(50, seed=3), make_reviews(50, seed=4)
    assert a == b
    assert [r.sentences for r in a] != [r.sentences for r in c]


def test_sizes_balance_and_positions():
    reviews = make_reviews(2000, seed=0)
    assert all(4 <= len(r.sentences) <= 8 for r in reviews)
    assert all(MIN_WORDS <= len(s) <= MAX_WORDS for r in reviews for s in r.sentences)
    assert {len(r.sentences) for r in reviews} == set(range(4, 9))
    labels = collections.Counter(r.label for r in reviews)
    assert abs(labels[0] - labels[1]) < 150
    positions = collections.Counter(r.evidence for r in reviews)
    assert set(positions) == set(range(8))  # the verdict can be anywhere, the last sentence of 8 included
    assert all(0 <= r.evidence < len(r.sentences) for r in reviews)


def test_the_evidence_sentence_is_the_only_verdict_and_its_rule_gives_the_label():
    """The rule written out independently: the sentence that opens with a cue, its opinion word, a
    preceding 'not' flips it."""
    for r in make_reviews(1000, seed=1):
        verdicts = [i for i, s in enumerate(r.sentences) if _opens_with_cue(s)]
        assert verdicts == [r.evidence]
        verdict = r.sentences[r.evidence]
        word = verdict[r.evidence_word]
        assert word in POSITIVE_WORDS or word in NEGATIVE_WORDS
        assert sum(w in POSITIVE_WORDS or w in NEGATIVE_WORDS for w in verdict) == 1
        expected = 1 if (word in POSITIVE_WORDS) != (NEGATION in verdict[:r.evidence_word]) else 0
        assert r.label == expected == review_label(r.sentences)


def test_changing_the_verdict_changes_the_label_and_changing_a_filler_never_does():
    reviews = make_reviews(400, seed=2)
    fillers = [s for r in reviews for i, s in enumerate(r.sentences) if i != r.evidence]
    flipped_by_negation = 0
    for n, r in enumerate(reviews):
        other = next(o for o in reviews[n + 1:] + reviews[:n] if o.label != r.label)
        swapped = [list(s) for s in r.sentences]
        swapped[r.evidence] = other.sentences[other.evidence]
        assert review_label(swapped) == other.label != r.label
        for i in range(len(r.sentences)):  # every filler replaced by a filler of another review
            if i != r.evidence:
                changed = [list(s) for s in r.sentences]
                changed[i] = fillers[(7 * n + i) % len(fillers)]
                assert review_label(changed) == r.label
        verdict = list(r.sentences[r.evidence])
        if NEGATION in verdict:
            verdict.remove(NEGATION)
        else:
            verdict.insert(r.evidence_word, NEGATION)
        negated = [list(s) for s in r.sentences]
        negated[r.evidence] = verdict
        flipped_by_negation += review_label(negated) != r.label
    assert flipped_by_negation == len(reviews)


def test_fillers_carry_opinion_words_that_tell_nothing():
    reviews = make_reviews(4000, seed=5)
    opinion = set(POSITIVE_WORDS) | set(NEGATIVE_WORDS)
    def fillers(r):
        return [w for i, s in enumerate(r.sentences) if i != r.evidence for w in s]

    with_opinion = [r for r in reviews if any(w in opinion for w in fillers(r))]
    assert len(with_opinion) > 0.8 * len(reviews)
    # the verdict's opinion word alone, or the sign of all opinion words, says nothing about the label
    positive_verdict_word = [r.label for r in reviews if r.sentences[r.evidence][r.evidence_word] in POSITIVE_WORDS]
    assert 0.45 < sum(positive_verdict_word) / len(positive_verdict_word) < 0.55
    majority = [r.label == (sum(w in POSITIVE_WORDS for s in r.sentences for w in s)
                            > sum(w in NEGATIVE_WORDS for s in r.sentences for w in s)) for r in reviews]
    assert 0.45 < sum(majority) / len(majority) < 0.55
    cues_elsewhere = sum(any(w in ("overall", "balance") for w in fillers(r)) for r in reviews)
    assert cues_elsewhere > 0.1 * len(reviews)  # cue words occur in fillers too, just not at their start


def test_rare_opinion_words_come_at_the_asked_rate_and_keep_the_rule():
    rare = set(RARE_POSITIVE_WORDS) | set(RARE_NEGATIVE_WORDS)
    assert len(rare) == len(RARE_POSITIVE_WORDS) + len(RARE_NEGATIVE_WORDS) == 60
    assert not rare & (set(POSITIVE_WORDS) | set(NEGATIVE_WORDS)) and len(set(OPINION_WORDS)) == 72
    plain = make_reviews(500, seed=4)
    assert not any(w in rare for r in plain for s in r.sentences for w in s)  # rare_prob=0: none of them
    assert plain == make_reviews(500, seed=4, rare_prob=0.0)
    reviews = make_reviews(4000, seed=4, rare_prob=0.5)
    verdict_words = [r.sentences[r.evidence][r.evidence_word] for r in reviews]
    assert 0.47 < sum(w in rare for w in verdict_words) / len(verdict_words) < 0.53
    filler_words = [w for r in reviews for i, s in enumerate(r.sentences) if i != r.evidence for w in s
                    if w in OPINION_WORDS]
    assert 0.45 < sum(w in rare for w in filler_words) / len(filler_words) < 0.55  # in the fillers too
    assert all(review_label(r.sentences) == r.label for r in reviews)  # the rule knows the rare words
    rare_verdicts = [r for r, w in zip(reviews, verdict_words) if w in rare]
    positive_rare = [r.label for r in rare_verdicts if r.sentences[r.evidence][r.evidence_word] in RARE_POSITIVE_WORDS]
    assert 0.44 < sum(positive_rare) / len(positive_rare) < 0.56  # still no label from the word alone
    seen = collections.Counter(verdict_words[:1200])  # a training set of 1,200 reviews sees each rare word rarely
    assert max(seen[w] for w in rare) < 25 < min(seen[w] for w in OPINION_WORDS if w not in rare)
    assert all(w in rare for r in make_reviews(50, seed=1, rare_prob=1.0) for s in r.sentences for w in s
               if w in OPINION_WORDS)


def test_bad_generator_arguments_and_labels_without_a_verdict_are_named():
    with pytest.raises(ValueError, match="min_sentences <= max_sentences"):
        make_reviews(5, min_sentences=6, max_sentences=4)
    with pytest.raises(ValueError, match="rare_prob=1.5"):
        make_reviews(5, rare_prob=1.5)
    with pytest.raises(ValueError, match="exactly one sentence that opens with a verdict cue, found 0"):
        review_label([["the", "film", "was", "good"]])
    with pytest.raises(ValueError, match="found 2"):
        review_label([["overall", "it", "was", "good"], ["on", "balance", "it", "was", "bad"]])


def test_documents_to_tensors_pads_and_round_trips():
    reviews = make_reviews(20, seed=6)
    vocab = review_vocab(reviews)
    assert vocab.pad == 0
    ids, sentence_lens, doc_lens = documents_to_tensors(reviews, vocab, max_sentences=9, max_words=13)
    assert ids.shape == (20, 9, 13) and sentence_lens.shape == (20, 9) and doc_lens.shape == (20,)
    for n, r in enumerate(reviews):
        assert doc_lens[n] == len(r.sentences)
        for i in range(9):
            if i < len(r.sentences):
                assert sentence_lens[n, i] == len(r.sentences[i])
                assert vocab.to_tokens(ids[n, i, :len(r.sentences[i])]) == r.sentences[i]
                assert (ids[n, i, len(r.sentences[i]):] == vocab.pad).all()
            else:
                assert sentence_lens[n, i] == 0 and (ids[n, i] == vocab.pad).all()
    with pytest.raises(ValueError, match="room for 8 sentences"):
        documents_to_tensors(reviews, vocab, max_sentences=3)


def test_review_data_splits():
    data = make_review_data(60, 20, 30, seed=0)
    assert (len(data.train), len(data.val), len(data.test)) == (60, 20, 30)
    assert data.test.inputs[0].shape == (30, 8, 12)
    assert torch.equal(data.train.labels, torch.tensor([r.label for r in data.train.reviews]))
    assert torch.equal(data.test.evidence_word, torch.tensor([r.evidence_word for r in data.test.reviews]))


def test_review_counts_must_be_integers():
    """Before: make_reviews(2.5) failed in range()'s words, make_reviews(True) made one review, and a negative
    num_train in make_review_data silently cut the other splits short (a stream of num_train + num_val + num_test)."""
    for bad in (2.5, True):
        with pytest.raises(ValueError, match=rf"num must be a non-negative integer, got {bad!r}"):
            make_reviews(bad)
    with pytest.raises(ValueError, match="min_sentences must be a non-negative integer, got 4.5"):
        make_reviews(3, min_sentences=4.5)
    with pytest.raises(ValueError, match="num_train must be a non-negative integer, got -5"):
        make_review_data(num_train=-5, num_val=10, num_test=10)
    assert len(make_reviews(3)) == 3
