"""Interpolated Kneser–Ney against probabilities worked out by hand, and its invariants."""

import math
import random

import pytest

from attn_utils.ngram import KneserNeyLM, NeighbourGuesser


def toy_bigram():
    return KneserNeyLM(2, ["a", "b", "c"], discounts=(0.5, 0.5)).fit([["a", "b", "a", "b", "c"]])


def test_bigram_probabilities_match_the_hand_computation():
    # Bigrams with the boundary: (<s> a) (a b) (b a) (a b) (b c). Continuation counts N1+(. w): a 2, b 1, c 1 of 4,
    # 3 distinct words, so P1(w) = max(N - 0.5, 0) / 4 + 0.5 * 3 / 4 / 3: a 0.5, b 0.25, c 0.25.
    lm = toy_bigram()
    assert [lm.prob(w, ["c"]) for w in "abc"] == pytest.approx([0.5, 0.25, 0.25])  # context c unseen: P1
    # after a: c(a b) = 2 of c(a) = 2, one distinct follower: 1.5 / 2 + 0.5 * 1 / 2 * P1
    assert [lm.prob(w, ["a"]) for w in "abc"] == pytest.approx([0.125, 0.8125, 0.0625])
    # after b: a once, c once of 2, two distinct followers: 0.5 / 2 + 0.5 * 2 / 2 * P1
    assert [lm.prob(w, ["b"]) for w in "abc"] == pytest.approx([0.5, 0.125, 0.375])
    # the first word's context is the boundary: 0.5 / 1 + 0.5 * 1 / 1 * P1(a)
    assert lm.prob("a", []) == pytest.approx(0.75)
    assert lm.perplexity([["a", "b"]]) == pytest.approx(math.exp(-(math.log(0.75) + math.log(0.8125)) / 2))
    assert lm.sequence_logprobs(["a", "b"]) == pytest.approx([math.log(0.75), math.log(0.8125)])


def test_trigram_uses_continuation_counts_below_the_top_order():
    lm = KneserNeyLM(3, ["a", "b", "c"], discounts=(0.5, 0.5, 0.5)).fit([["a", "b", "c", "a", "b", "b"]])
    # top-order trigrams: (<s> <s> a) (<s> a b) (a b c) (b c a) (c a b) (a b b)
    # bigram level, continuation counts N1+(. v w): (<s> a) 1, (a b) 2 [<s>, c], (b c) 1, (c a) 1, (b b) 1
    # unigram level from the bigram types: a 2 [<s>, c], b 2 [a, b], c 1 [b] of 5; 3 distinct words
    p1 = {w: max(n - 0.5, 0) / 5 + 0.5 * 3 / 5 / 3 for w, n in {"a": 2, "b": 2, "c": 1}.items()}
    assert sum(p1.values()) == pytest.approx(1.0)
    # bigram context b: N1+(. b c) = 1, N1+(. b b) = 1, total 2, two distinct followers
    p2_b = {w: max({"c": 1, "b": 1}.get(w, 0) - 0.5, 0) / 2 + 0.5 * 2 / 2 * p1[w] for w in "abc"}
    # trigram context (a, b): c once, b once, total 2, two followers
    expected = {w: max({"c": 1, "b": 1}.get(w, 0) - 0.5, 0) / 2 + 0.5 * 2 / 2 * p2_b[w] for w in "abc"}
    assert {w: lm.prob(w, ["a", "b"]) for w in "abc"} == pytest.approx(expected)
    # an unseen trigram context (c, c) falls back to the bigram level, itself unseen for c: P1
    assert lm.prob("a", ["c", "c"]) == pytest.approx(max(1 - 0.5, 0) / 1 + 0.5 * 1 / 1 * p1["a"])


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_every_context_gets_a_distribution(order):
    rng = random.Random(order)
    vocab = list("abcdefg")
    corpus = [[rng.choice(vocab[:5]) for _ in range(rng.randint(1, 30))] for _ in range(20)]
    lm = KneserNeyLM(order, vocab).fit(corpus)
    for _ in range(30):
        context = [rng.choice(vocab) for _ in range(rng.randint(0, 5))]
        probs = lm.next_word_probs(context)
        assert sum(probs.values()) == pytest.approx(1.0)
        assert min(probs.values()) > 0  # the unseen words f and g too
    assert all(0 < d < 1 for d in lm.discounts)


def test_estimated_discounts_follow_the_singleton_formula():
    lm = KneserNeyLM(1, ["a", "b", "c", "d"]).fit([["a", "b", "b", "c", "c", "d", "d", "d"]])
    # unigram raw counts: a 1, b 2, c 2, d 3: n1 = 1, n2 = 2, D = 1 / (1 + 4)
    assert lm.discounts == pytest.approx((0.2,))
    assert lm.prob("a") == pytest.approx((1 - 0.2) / 8 + 0.2 * 4 / 8 / 4)


def test_more_context_helps_on_a_repetitive_text():
    text = list("the cat sat on the mat. " * 20)
    vocab = sorted(set(text))
    ppl = [KneserNeyLM(n, vocab).fit([text]).perplexity([text]) for n in (1, 2, 3)]
    assert ppl[0] > ppl[1] > ppl[2] > 1.0


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="order must be a positive integer"):
        KneserNeyLM(0, ["a"])
    with pytest.raises(ValueError, match="not in the vocabulary"):
        KneserNeyLM(2, ["a"]).fit([["a", "z"]])
    with pytest.raises(RuntimeError, match="call fit"):
        KneserNeyLM(2, ["a"]).prob("a")
    with pytest.raises(ValueError, match="discounts must be 2 numbers"):
        KneserNeyLM(2, ["a"], discounts=(0.5,))
    with pytest.raises(ValueError, match="list of token sequences"):
        KneserNeyLM(2, ["a"]).fit("aaa")
    with pytest.raises(ValueError, match="at least one token"):
        KneserNeyLM(2, ["a"]).fit([[], []])
    with pytest.raises(ValueError, match="boundary token"):
        KneserNeyLM(2, ["<s>"])
    with pytest.raises(ValueError, match="word 'q' is not in the vocabulary"):
        toy_bigram().prob("q", ["a"])


def test_the_neighbour_guesser_backs_off_from_both_sides_to_one_to_none():
    guesser = NeighbourGuesser([["x", "a", "y"], ["x", "a", "y"], ["x", "b", "z"], ["w", "c", "z"], ["w", "c", "q"]])
    assert guesser.guess("x", "y") == "a"  # seen between x and y
    assert guesser.guess("x", "z") == "b"  # the pair is known
    assert guesser.guess("w", "y") == "c"  # pair unseen: the left neighbour w is followed by c twice
    assert guesser.guess("v", "z") == "b"  # only the right side is known: b and c once each before z, b first
    assert guesser.guess("v", "v") == "x"  # nothing known: the most frequent word (x, three times)
    assert guesser.guess("<s>", "a") == "x"  # a sequence's start is the left neighbour <s>
    assert guesser.guess("x", None) == "a"  # one side only: after x come a twice and b once
    assert guesser.guess(None, "z") == "b"  # before z: b and c once each, b counted first
    assert guesser.guess(None, None) == "x"
