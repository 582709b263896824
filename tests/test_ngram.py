"""Interpolated Kneser–Ney (one discount per order, and modified: three) against probabilities worked out by
hand, and its invariants."""

import math
import random
from collections import Counter
from fractions import Fraction

import pytest
import torch

from attn_utils.ngram import KneserNeyLM, NeighbourGuesser
from attn_utils.tolerance import assert_close


def close(got, expected):
    """Numbers (or lists of them) equal within the float64 tolerance of the house policy."""
    assert_close(torch.tensor(got, dtype=torch.float64), torch.tensor([float(e) for e in expected]
                 if isinstance(expected, (list, tuple)) else float(expected), dtype=torch.float64))


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


# ---- modified Kneser-Ney (Chen and Goodman): D1, D2, D3+ per order ----

# <s> b b e e b e e b e | <s> b c d d | <s> b e d b b
MODIFIED_TOY = [list("bbeebeebe"), list("bcdd"), list("bedbb")]


def test_modified_discounts_and_probabilities_match_the_hand_computation():
    lm = KneserNeyLM(2, list("abcdef"), modified=True).fit(MODIFIED_TOY)
    # Bigram counts: (<s> b) 3, (b e) 4 [3 in the first sequence, 1 in the last], (b b) 2, (e e) 2, (e b) 2,
    # (b c) 1, (c d) 1, (d d) 1, (e d) 1, (d b) 1: 18 in all.
    # Count-of-counts: n1 = 5, n2 = 3, n3 = 1 (<s> b), n4 = 1 (b e). Y = 5 / (5 + 2 * 3) = 5/11,
    # D1 = 1 - 2 * 5/11 * 3/5 = 5/11, D2 = 2 - 3 * 5/11 * 1/3 = 17/11, D3+ = 3 - 4 * 5/11 * 1/1 = 13/11.
    # Unigram level, continuation counts N1+(. w): b 4 [<s>, b, e, d], d 3 [c, d, e], e 2 [b, e], c 1 [b];
    # a and f 0; 10 in all. n1 = n2 = n3 = n4 = 1, Y = 1/3, D1 = 1/3, D2 = 2 - 3 * 1/3 = 1, D3+ = 3 - 4/3 = 5/3.
    bigram = (Fraction(5, 11), Fraction(17, 11), Fraction(13, 11))
    unigram = (Fraction(1, 3), Fraction(1), Fraction(5, 3))
    close([d for triple in lm.discounts for d in triple], [*unigram, *bigram])
    assert lm.followers_by_count[1][()] == (1, 1, 2)  # c once; e twice; d and b three times or more
    # gamma() = (1/3 * 1 + 1 * 1 + 5/3 * 2) / 10 = 7/15, shared uniformly over the 6 words: 7/90 each
    # P1(b) = (4 - 5/3) / 10 + 7/90 = 28/90, P1(d) = (3 - 5/3) / 10 + 7/90 = 19/90,
    # P1(e) = (2 - 1) / 10 + 7/90 = 16/90, P1(c) = (1 - 1/3) / 10 + 7/90 = 13/90, P1(a) = P1(f) = 7/90
    p1 = {w: Fraction(n, 90) for w, n in {"a": 7, "b": 28, "c": 13, "d": 19, "e": 16, "f": 7}.items()}
    assert sum(p1.values()) == 1
    close([lm.prob(w, ["a"]) for w in "abcdef"], [p1[w] for w in "abcdef"])  # context a unseen: P1
    # After b: e 4 times, b twice, c once, c(b) = 7; gamma(b) = (D1 + D2 + D3+) / 7 = (35/11) / 7 = 5/11
    # P(e | b) = (4 - 13/11) / 7 + 5/11 * 16/90, P(b | b) = (2 - 17/11) / 7 + 5/11 * 28/90,
    # P(c | b) = (1 - 5/11) / 7 + 5/11 * 13/90, and the unseen followers get 5/11 * P1
    gamma_b = Fraction(5, 11)
    expected = {w: gamma_b * p1[w] for w in "abcdef"}
    expected["e"] += (4 - Fraction(13, 11)) / 7
    expected["b"] += (2 - Fraction(17, 11)) / 7
    expected["c"] += (1 - Fraction(5, 11)) / 7
    assert sum(expected.values()) == 1
    close([lm.prob(w, ["b"]) for w in "abcdef"], [expected[w] for w in "abcdef"])
    close(lm.prob("e", ["b"]), Fraction(31, 77) + Fraction(8, 99))  # 0.48340...
    # the first word: context <s>, b three times: (3 - 13/11) / 3 + (13/11 / 3) * P1(b)
    close(lm.prob("b", []), (3 - Fraction(13, 11)) / 3 + Fraction(13, 33) * p1["b"])
    close(lm.sequence_logprobs(["b", "e"]), [math.log((3 - 13 / 11) / 3 + 13 / 33 * 28 / 90), math.log(expected["e"])])


def test_modified_model_with_fixed_discounts_uses_the_right_discount_for_each_count():
    # one unigram model, raw counts a 1, b 2, c 3, d 5 of 11; discounts (0.25, 0.5, 0.75)
    lm = KneserNeyLM(1, list("abcde"), discounts=[(0.25, 0.5, 0.75)], modified=True).fit([list("abbcccddddd")])
    # gamma = (0.25 + 0.5 + 0.75 * 2) / 11 = 2.25 / 11, shared over 5 words
    spread = 2.25 / 11 / 5
    close([lm.prob(w) for w in "abcde"],
          [0.75 / 11 + spread, 1.5 / 11 + spread, 2.25 / 11 + spread, 4.25 / 11 + spread, spread])


def test_modified_discounts_fall_back_and_clamp_as_documented():
    # n3 = 0 (raw counts a 1, b 2, c 2): the formula for D3+ divides by zero, so all three are the single
    # discount n1 / (n1 + 2 n2) = 1/5, and the order follows the default model
    corpus = [list("abbcc")]
    modified = KneserNeyLM(1, list("abcd"), modified=True).fit(corpus)
    default = KneserNeyLM(1, list("abcd")).fit(corpus)
    close(modified.discounts[0], [0.2, 0.2, 0.2])
    close([modified.prob(w) for w in "abcd"], [default.prob(w) for w in "abcd"])
    # n1 = n2 = n3 = 1, n4 = 5 (a 1, b 2, c 3, d e f g h 4 each): Y = 1/3, D1 = 1/3, D2 = 2 - 3 * 1/3 = 1,
    # D3+ = 3 - 4 * 1/3 * 5 = -11/3, clamped to 0.05
    counts = {"a": 1, "b": 2, "c": 3, **{w: 4 for w in "defgh"}}
    lm = KneserNeyLM(1, list("abcdefghi"), modified=True).fit([[w for w, c in counts.items() for _ in range(c)]])
    close(lm.discounts[0], [1 / 3, 1.0, 0.05])
    probs = lm.next_word_probs()
    assert abs(math.fsum(probs.values()) - 1) <= 1e-12 and min(probs.values()) > 0  # i, unseen, too
    # n4 = 0 (a 1, b 2, c 3): D3+ = 3 - 0 = 3, at its ceiling: c keeps only its share of gamma
    lm = KneserNeyLM(1, list("abcd"), modified=True).fit([list("abbccc")])
    close(lm.discounts[0], [1 / 3, 1.0, 3.0])  # Y = 1/3, D2 = 2 - 3 * 1/3
    close(lm.prob("c"), (1 / 3 + 1 + 3) / 6 / 4)


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_modified_distributions_sum_to_one_for_every_context(order):
    rng = random.Random(100 + order)
    seen = list("abcdefghijklmnop")
    vocab = [*seen, "y", "z"]  # y and z never occur
    weights = [1 / (rank + 1) for rank in range(len(seen))]  # Zipf-like, so the counts spread out
    kinds = set()
    for size in (3, 30, 300):
        corpus = [rng.choices(seen, weights, k=rng.randint(1, size)) for _ in range(20)]
        lm = KneserNeyLM(order, vocab, modified=True).fit(corpus)
        kinds.update("fallback" if d1 == d2 == d3 else "three" for d1, d2, d3 in lm.discounts)
        assert all(0 < d <= k for triple in lm.discounts for k, d in enumerate(triple, 1))
        contexts = [[rng.choice(vocab) for _ in range(rng.randint(0, 5))] for _ in range(25)]
        contexts += [[], ["y"], ["z", "y", "z"], ["a"] * order]  # unseen contexts among them
        for context in contexts:
            probs = lm.next_word_probs(context)
            assert abs(math.fsum(probs.values()) - 1.0) <= 1e-12, (size, context)
            assert min(probs.values()) > 0  # the unseen words y and z too
    assert kinds == {"fallback", "three"}  # both ways of estimating were exercised


def test_the_default_model_is_unchanged_bit_for_bit():
    # recorded with the single-discount code before modified Kneser-Ney was added; prob() uses only
    # + - * / and max, so the values are exact on every platform (perplexity goes through log and exp)
    rng = random.Random(2024)
    vocab = list("abcdefgh")
    corpus = [[rng.choice(vocab[:6]) for _ in range(rng.randint(1, 40))] for _ in range(30)]
    lm = KneserNeyLM(3, vocab).fit(corpus)
    assert lm.discounts == (0.5, 0.95, 0.32142857142857145)  # no singleton, clamped, n1 / (n1 + 2 n2)
    recorded = {
        (): (0.16648490646258504, 0.16648490646258504, 0.0005452806122448979),
        ("a",): (0.1772952289023718, 0.04158094318808605, 0.0003536955322669608),
        ("a", "b"): (0.29605727159284767, 0.06076315394578885, 0.00015193577430972388),
        ("h", "h"): (0.1636904761904762, 0.1636904761904762, 0.008928571428571428),
        ("c", "a"): (0.13269523349880494, 0.19936190016547156, 0.0001768477661334804),
    }
    for context, values in recorded.items():
        assert tuple(lm.prob(w, list(context)) for w in "afh") == values, context
    close(lm.perplexity(corpus[:5]), 4.945765932107873)
    vocab, corpus = zipf_markov_corpus(0)
    lm = KneserNeyLM(3, vocab).fit(corpus[:240])
    assert lm.discounts == (0.5, 0.26119917298414885, 0.7924349881796691)
    assert lm.prob("w3", ["w1", "w2"]) == 0.009897195780333585
    assert lm.prob("w0", ["w7", "w7"]) == 0.0012079169612956003
    close(lm.perplexity(corpus[240:]), 45.79424050226316)


def zipf_markov_corpus(seed, vocab_size=50, num_sequences=300, length=40, exponent=1.1):
    """Sequences from a random second-order Markov source: after each pair of words, the next word is
    drawn from its own random ordering of the vocabulary with Zipf weights ``1 / rank ** exponent``."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(vocab_size)]
    weights = [1 / (rank + 1) ** exponent for rank in range(vocab_size)]
    successors = {}
    sequences = []
    for _ in range(num_sequences):
        s = ["<s>", "<s>"]
        for _ in range(length):
            if (s[-2], s[-1]) not in successors:
                successors[s[-2], s[-1]] = rng.sample(vocab, vocab_size)
            s.append(rng.choices(successors[s[-2], s[-1]], weights)[0])
        sequences.append(s[2:])
    return vocab, sequences


@pytest.mark.parametrize("seed", [0, 1])
def test_modified_kneser_ney_beats_one_discount_on_held_out_text(seed):
    vocab, corpus = zipf_markov_corpus(seed)  # 12,000 tokens: 9,600 to count, 2,400 to score
    train, held_out = corpus[:240], corpus[240:]
    for order in (2, 3, 4):
        one = KneserNeyLM(order, vocab).fit(train).perplexity(held_out)
        three = KneserNeyLM(order, vocab, modified=True).fit(train).perplexity(held_out)
        assert three < 0.95 * one, (order, three, one)  # 9-12% lower on these two corpora


def test_modified_bad_input_is_named():
    with pytest.raises(ValueError, match="modified must be True or False"):
        KneserNeyLM(2, ["a"], modified=1)
    with pytest.raises(ValueError, match=r"with modified=True, discounts must be 2 triples"):
        KneserNeyLM(2, ["a"], discounts=(0.5, 0.5), modified=True)  # one discount per order
    with pytest.raises(ValueError, match=r"with modified=True, discounts must be 2 triples"):
        KneserNeyLM(2, ["a"], discounts=[(0.5, 1.0, 1.5)], modified=True)  # one order short
    with pytest.raises(ValueError, match=r"0 < Dk <= k"):
        KneserNeyLM(1, ["a"], discounts=[(0.5, 2.5, 1.5)], modified=True)  # D2 above 2
    with pytest.raises(ValueError, match=r"0 < Dk <= k"):
        KneserNeyLM(1, ["a"], discounts=[(0.0, 1.0, 1.5)], modified=True)


def test_an_order_of_true_is_refused_not_read_as_a_unigram_model():
    """KneserNeyLM(True, ...) was a unigram model (True == 1) until check_positive_int (0fd2c41) refused bools."""
    for bad in (True, False, 2.0, "3"):
        with pytest.raises(ValueError, match=rf"order must be a positive integer \(1 = unigram\), got {bad!r}"):
            KneserNeyLM(bad, ["a", "b"])


def test_discounts_that_are_not_numbers_are_named():
    """Before: a string among the discounts, or a number for the list, failed in Python's words ('<' not
    supported, object of type 'float' has no len())."""
    for bad in ([0.5, "x"], 0.5, ["0.5", "0.5"], [True, 0.5]):
        with pytest.raises(ValueError, match=r"discounts must be 2 numbers in \(0, 1\), one per order"):
            KneserNeyLM(2, ["a", "b"], discounts=bad)
    assert KneserNeyLM(2, ["a", "b"], discounts=[0.5, 0.75]).fit([["a", "b"]]).discounts == (0.5, 0.75)


# ---- gap_probs: the hidden word given both sides; sample: drawing a continuation ----

GAP_TOY = [list("abcab"), list("bcad"), list("aabcd"), list("dcba"), list("cab")]  # e never occurs


@pytest.mark.parametrize("modified", [False, True])
@pytest.mark.parametrize("order", [1, 2, 3])
def test_gap_probs_is_the_normalised_probability_of_the_whole_sequence(order, modified):
    # brute force: P(left + [w] + right) = prod_i P(token_i | every token before it), through the public
    # logprob, for every w, normalised over the vocabulary (the terms that do not depend on w cancel)
    lm = KneserNeyLM(order, list("abcde"), modified=modified).fit(GAP_TOY)
    for left in ([], ["c"], list("dcbab")):  # the sequence's start, short, longer than order - 1
        for right in ([], ["a"], list("cabda")):  # none, short, longer than order - 1
            joint = {}
            for w in lm.vocab:
                tokens = [*left, w, *right]
                joint[w] = math.exp(math.fsum(lm.logprob(t, tokens[:i]) for i, t in enumerate(tokens)))
            total = math.fsum(joint.values())
            got = lm.gap_probs(left, right)
            assert list(got) == lm.vocab
            for w in lm.vocab:
                assert abs(got[w] - joint[w] / total) <= 1e-12 * joint[w] / total, (left, right, w)


def test_gap_probs_prefers_the_word_seen_between_the_neighbours_by_hand():
    # x a y twice, x b z three times, u b v three times; bigram model, D = 0.5 at both orders
    corpus = [list("xay")] * 2 + [list("xbz")] * 3 + [list("ubv")] * 3
    lm = KneserNeyLM(2, list("xaybzuv"), discounts=(0.5, 0.5)).fit(corpus)
    # continuation counts: b 2 (after x and u), the six others 1 each, of 8: P1(b) = 1.5 / 8 + 0.5 * 7 / 8 / 7 = 1/4,
    # P1 = 1/8 for the others. After x (5 times, 2 followers): P(a | x) = 1.5 / 5 + 1/5 * 1/8 = 13/40,
    # P(b | x) = 2.5 / 5 + 1/5 * 1/4 = 11/20, any other word 1/5 * 1/8 = 1/40.
    # Before y: P(y | a) = 1.5 / 2 + 1/4 * 1/8 = 25/32, P(y | b) = 0 + 0.5 * 2 / 6 * 1/8 = 1/48,
    # P(y | x) = 1/5 * 1/8 = 1/40, P(y | u) = 0.5 / 3 * 1/8 = 1/48, y, z and v are never contexts: P1(y) = 1/8
    after_x = {"a": Fraction(13, 40), "b": Fraction(11, 20), **{w: Fraction(1, 40) for w in "xyzuv"}}
    y_after = {"a": Fraction(25, 32), "b": Fraction(1, 48), "x": Fraction(1, 40), "u": Fraction(1, 48),
               **{w: Fraction(1, 8) for w in "yzv"}}
    joint = {w: after_x[w] * y_after[w] for w in lm.vocab}
    got = lm.gap_probs(["x"], ["y"])
    close([got[w] for w in lm.vocab], [joint[w] / sum(joint.values()) for w in lm.vocab])
    close(got["a"], Fraction(4875, 5297))  # 0.920...: a was seen between x and y
    assert lm.next_word_probs(["x"])["b"] > lm.next_word_probs(["x"])["a"]  # from the left alone, b is likelier
    assert got["a"] > 20 * got["b"]  # but b was never seen before y


@pytest.mark.parametrize("modified", [False, True])
@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_gap_probs_sum_to_one(order, modified):
    rng = random.Random(order)
    vocab = list("abcdefg")  # f and g never occur
    corpus = [[rng.choice(vocab[:5]) for _ in range(rng.randint(1, 30))] for _ in range(20)]
    lm = KneserNeyLM(order, vocab, modified=modified).fit(corpus)
    for _ in range(20):
        left = [rng.choice(vocab) for _ in range(rng.randint(0, 6))]
        right = [rng.choice(vocab) for _ in range(rng.randint(0, 6))]
        probs = lm.gap_probs(left, right)
        assert abs(math.fsum(probs.values()) - 1) <= 1e-12, (left, right)
        assert min(probs.values()) > 0


def test_gap_probs_bad_input_is_named():
    lm = toy_bigram()
    with pytest.raises(ValueError, match="left holds the token 'q', which is not in the vocabulary"):
        lm.gap_probs(["a", "q"], ["b"])
    with pytest.raises(ValueError, match="right holds the token 'q', which is not in the vocabulary"):
        lm.gap_probs(["a"], ["b", "q"])
    with pytest.raises(ValueError, match="left must be a sequence of tokens, got int"):
        lm.gap_probs(3, ["b"])
    with pytest.raises(RuntimeError, match="call fit"):
        KneserNeyLM(2, ["a", "b"]).gap_probs(["a"], ["b"])


def test_sample_is_reproducible_and_depends_on_the_generator():
    vocab, corpus = zipf_markov_corpus(0, num_sequences=40)
    lm = KneserNeyLM(3, vocab).fit(corpus)
    first = lm.sample(["w1"], 30, random.Random(1))
    assert len(first) == 30 and set(first) <= set(vocab)
    assert lm.sample(["w1"], 30, random.Random(1)) == first
    assert lm.sample(["w1"], 30, random.Random(2)) != first
    assert lm.sample(["w1"], 30) == lm.sample(["w1"], 30, random.Random(0))  # the default generator
    hot = lm.sample([], 50, random.Random(3), temperature=5.0)
    assert len(hot) == 50 and set(hot) <= set(vocab)


def test_sample_at_a_small_temperature_is_greedy():
    lm = toy_bigram()
    # by hand (test_bigram_probabilities_match_the_hand_computation): the first word is a (0.75), after a
    # comes b (0.8125), after b comes a (0.5 against c 0.375)
    assert lm.sample([], 5, random.Random(0), temperature=1e-3) == ["a", "b", "a", "b", "a"]
    assert lm.sample(["c"], 2, random.Random(0), temperature=1e-3) == ["a", "b"]  # after c (unseen): P1, a 0.5
    vocab, corpus = zipf_markov_corpus(1, num_sequences=40)
    lm = KneserNeyLM(3, vocab, modified=True).fit(corpus)
    tokens = ["w4", "w2"]
    for seed in (0, 1):
        new = lm.sample(tokens, 10, random.Random(seed), temperature=1e-6)
        for i, token in enumerate(new):
            probs = lm.next_word_probs(tokens + new[:i])
            assert token == max(probs, key=probs.get)


@pytest.mark.parametrize("temperature", [1.0, 0.5, 2.0])
def test_sample_draws_from_the_tempered_next_word_distribution(temperature):
    lm = KneserNeyLM(2, list("abcde"), discounts=(0.5, 0.5)).fit([list("abacabadab"), list("ecab")])
    probs = lm.next_word_probs(["a"])
    tempered = {w: p ** (1 / temperature) for w, p in probs.items()}
    tempered = {w: t / math.fsum(tempered.values()) for w, t in tempered.items()}
    rng, draws = random.Random(11), 4000
    counts = Counter(lm.sample(["a"], 1, rng, temperature=temperature)[0] for _ in range(draws))
    for w, p in tempered.items():
        assert abs(counts[w] / draws - p) <= 4 * math.sqrt(p * (1 - p) / draws), (w, counts[w], p)
    if temperature != 1.0:  # the tempered distribution is far enough from the plain one to tell them apart
        assert max(abs(counts[w] / draws - p) for w, p in probs.items()) > 0.05


def test_sample_bad_input_is_named():
    lm = toy_bigram()
    for bad in (0, -1, 2.0, True, "3"):
        with pytest.raises(ValueError, match=rf"num_tokens must be a positive integer, got {bad!r}"):
            lm.sample(["a"], bad)
    for bad in (0, -0.5, float("nan"), float("inf"), True, "1"):
        with pytest.raises(ValueError, match="temperature must be a finite number > 0"):
            lm.sample(["a"], 3, temperature=bad)
    with pytest.raises(ValueError, match="generator must be a random.Random or None, got int"):
        lm.sample(["a"], 3, generator=0)
    with pytest.raises(ValueError, match="context holds the token 'q', which is not in the vocabulary"):
        lm.sample(["q"], 3)
    with pytest.raises(RuntimeError, match="call fit"):
        KneserNeyLM(2, ["a", "b"]).sample(["a"], 3)
