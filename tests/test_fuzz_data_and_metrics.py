"""Fuzzing the argument checks of the data, metrics and evaluation modules: the scores (BLEU and its intervals,
the alignment error rate, macro-F1, hit rates, spreads), the n-gram models, running a model over data
(translation, classification, running text), the data generators and loaders (vocabularies, arrays, batches,
splits, the generated corpora, canvases, dates), the stored results and comparisons, measurements, budgets,
tolerances, devices and seeds, checkpoints and the losses.

The property is that of ``test_fuzz_more_arguments``: a call returns a documented result (checked against the
value it must have where that is cheap: probabilities that sum to 1, a score recomputed another way, arrays that
decode back) or raises ``ValueError`` (or ``TypeError``, or the exception its docstring documents) whose message
names the offending argument; it never hangs and never returns NaN silently. Each test is parametrized by the
argument it spoils (None: a valid call) and draws the rest valid, so a regression that refuses valid input
fails too. Tiny corpora, models and sizes built here, never the large data files; derandomized (``FUZZ``).

The regression tests after the fuzz tests each pin one defect the fuzzing found, by name."""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
import math
import random
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fuzz_arguments import FUZZ
from test_fuzz_more_arguments import INF, NAN, NOT_BOOLS, NOT_COUNTS, NOT_POSITIVE_INTS, draw_arguments, expect
from torch import nn
from torch.nn import functional as F

from attn_utils import budgets, checkpoints, compare, device, evaluate, measure, metrics, modes, stored_results
from attn_utils import losses as L
from attn_utils import tolerance as T
from attn_utils.bahdanau import make_bahdanau
from attn_utils.data import (
    batching,
    bundled,
    cache,
    dates,
    digits,
    generate,
    grammar,
    loader,
    moby_dick,
    paths,
    relations,
    reviews,
    semeval,
    splits,
    subwords,
    tatoeba,
    text,
    vocab,
    windows,
)
from attn_utils.ngram import BOUNDARY, KneserNeyLM, NeighbourGuesser
from attn_utils.training_loop import History

#: values that are no seed (``checks.check_seed``)
NOT_SEEDS = [True, 1.5, "0", None, 2**70, -(2**63) - 1]
#: values that are no probability in [0, 1]
NOT_SHARES = [-0.1, 1.5, NAN, INF, "0.5", True, None]
SEEDS = st.integers(-5, 2**20)
WORDS = ["the", "cat", "sat", "on", "a", "mat"]
SENTENCES = st.lists(st.sampled_from(WORDS), max_size=6).map(" ".join)


def close(a, b, tol=1e-9) -> bool:
    return abs(a - b) <= tol * max(1.0, abs(b))


# ---------------------------------------------------------------------------------------------
# metrics: BLEU, its intervals, by length and paired
# ---------------------------------------------------------------------------------------------


def _parallel(data, n):
    """``n`` hypotheses and references (a string, or a list of strings, each)."""
    hyps = data.draw(st.lists(SENTENCES, min_size=n, max_size=n), label="hypotheses")
    refs = data.draw(st.lists(st.one_of(SENTENCES, st.lists(SENTENCES, min_size=1, max_size=3)), min_size=n,
                              max_size=n), label="references")
    return hyps, refs


@pytest.mark.parametrize("spoiled", [None, "hypotheses", "references", "max_order", "smooth"])
@settings(FUZZ, max_examples=15)
@given(st.integers(1, 4), st.data())
def test_corpus_bleu_is_a_score_in_0_100_or_names_the_argument(spoiled, n, data):
    hyps, refs = _parallel(data, n)
    good = {"max_order": st.integers(1, 4), "smooth": st.sampled_from(["exp", "none"])}
    bad = {"hypotheses": ([None, "a b", 3, iter(["a"]), [1] * n, ["a"] * (n + 1)], "hypothes|single string"),
           "references": ([None, "a b", [{"a": 1}] * n, [[1]] * n, [[]] * n, ["a"] * (n + 1)],
                          "reference|single string"),
           "max_order": (NOT_POSITIVE_INTS, "max_order must be a positive integer"),
           "smooth": (["EXP", None, 1, ["exp"]], "smooth must be 'exp' or 'none'")}
    kwargs, named = draw_arguments(data, {"hypotheses": st.just(hyps), "references": st.just(refs), **good}, bad,
                                   spoiled)

    def validate(score):
        assert isinstance(score, float) and 0.0 <= score <= 100.0, score
        statistics = metrics.bleu_statistics(kwargs["hypotheses"], kwargs["references"], kwargs["max_order"])
        assert score == metrics.bleu_from_statistics(statistics.sum(dim=0), kwargs["max_order"], kwargs["smooth"])
        if all(isinstance(r, str) and r == h and len(h.split()) >= kwargs["max_order"] for h, r in zip(hyps, refs)):
            assert close(score, 100.0), score  # every hypothesis is its reference

    expect(lambda: metrics.corpus_bleu(**kwargs), named, validate)


@pytest.mark.parametrize("spoiled", [None, "statistics"])
@settings(FUZZ, max_examples=15)
@given(st.integers(1, 4), st.data())
def test_bleu_from_statistics_reads_counts_or_names_them(spoiled, max_order, data):
    totals = data.draw(st.lists(st.integers(0, 9), min_size=max_order, max_size=max_order), label="totals")
    matches = [data.draw(st.integers(0, t), label="matches") for t in totals]
    lengths = data.draw(st.lists(st.integers(0, 9), min_size=2, max_size=2), label="lengths")
    good = torch.tensor(matches + totals + lengths)
    negative = torch.cat([good[:-1], torch.tensor([-1])])
    more_matches_than_ngrams = torch.cat([good[:max_order] + 10, good[max_order:]])
    bad = {"statistics": ([good.tolist(), good[None].repeat(2, 1), good.float(), torch.cat([good, good]), negative,
                           more_matches_than_ngrams, good.bool()], "statistics|summed counts")}
    kwargs, named = draw_arguments(data, {"statistics": st.just(good)}, bad, spoiled)
    expect(lambda: metrics.bleu_from_statistics(kwargs["statistics"], max_order), named,
           lambda score: 0.0 <= score <= 100.0 + 1e-9)


@pytest.mark.parametrize("spoiled", [None, "num_samples", "confidence", "seed"])
@settings(FUZZ, max_examples=10)
@given(st.integers(1, 4), st.data())
def test_bootstrap_bleu_gives_an_ordered_interval_or_names_the_argument(spoiled, n, data):
    hyps, refs = _parallel(data, n)
    good = {"num_samples": st.integers(1, 20), "confidence": st.sampled_from([0.5, 0.9, 0.95]), "seed": SEEDS}
    bad = {"num_samples": (NOT_POSITIVE_INTS, "num_samples must be a positive integer"),
           "confidence": ([0, 1, 1.5, -0.1, NAN, INF, "0.9", True, None], "confidence must be between 0 and 1"),
           "seed": (NOT_SEEDS, "seed must be an integer seed")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(interval):
        assert 0.0 <= interval.low <= interval.high <= 100.0 + 1e-9, interval
        assert interval.bleu == metrics.corpus_bleu(hyps, refs)

    expect(lambda: metrics.bootstrap_bleu(hyps, refs, **kwargs), named, validate)


@pytest.mark.parametrize("spoiled", [None, "samples", "confidence", "num_samples", "seed"])
@settings(FUZZ, max_examples=10)
@given(st.integers(2, 6), st.integers(0, 3), st.data())
def test_bootstrap_means_brackets_the_mean_or_names_the_argument(spoiled, rows, columns, data):
    shape = (rows,) if columns == 0 else (rows, columns)
    samples = torch.randn(shape, generator=torch.Generator().manual_seed(data.draw(SEEDS, label="draw")))
    good = {"samples": st.just(samples), "confidence": st.sampled_from([0.5, 0.95]), "num_samples": st.integers(1, 30),
            "seed": SEEDS}
    bad = {"samples": ([samples.tolist(), samples[:1], samples.to(torch.complex64), torch.zeros(rows, 0),
                        torch.full(shape, NAN), None], "samples must"),
           "confidence": ([0, 1, NAN, "0.5", True], "confidence must be between 0 and 1"),
           "num_samples": (NOT_POSITIVE_INTS, "num_samples must be a positive integer"),
           "seed": (NOT_SEEDS, "seed must be an integer seed")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(interval):
        assert torch.allclose(interval.mean, samples.double().mean(dim=0), rtol=1e-12, atol=1e-12)
        assert bool((interval.low <= interval.high + 1e-12).all()), interval
        assert bool((interval.low >= samples.double().min(dim=0).values - 1e-12).all())

    expect(lambda: metrics.bootstrap_means(**kwargs), named, validate)


@pytest.mark.parametrize("spoiled", [None, "lengths", "buckets", "num_samples", "seed"])
@settings(FUZZ, max_examples=10)
@given(st.integers(1, 5), st.data())
def test_bleu_by_length_covers_each_bucket_or_names_the_argument(spoiled, n, data):
    hyps, refs = _parallel(data, n)
    good = {"lengths": st.lists(st.integers(1, 12), min_size=n, max_size=n),
            "buckets": st.sampled_from([((1, 4), (5, None)), ((1, 12),), ((2, 2), (3, 6))]),
            "num_samples": st.sampled_from([None, 3]), "seed": SEEDS}
    bad = {"lengths": ([[NAN] * n, [1.5] * n, ["3"] * n, [True] * n, [-1] * n, None, [1] * (n + 1)], "lengths"),
           "buckets": (["x", [(0, 5)], [(5, 1)], [(1, None), (2, 3)], [], None], "buckets"),
           "num_samples": ([0, -1, True, 2.0], "num_samples must be a positive integer"),
           "seed": (NOT_SEEDS, "seed must be an integer seed")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(rows):
        counted = sum(any(splits.in_bucket(m, b) for b in kwargs["buckets"]) for m in kwargs["lengths"])
        assert sum(r["pairs"] for r in rows) == counted
        assert all(0.0 <= r["bleu"] <= 100.0 for r in rows), rows

    expect(lambda: metrics.bleu_by_length(hyps, refs, **kwargs), named, validate)


@pytest.mark.parametrize("spoiled", [None, "runs_a", "references", "confidence", "seed", "lengths"])
@settings(FUZZ, max_examples=8)
@given(st.integers(1, 4), st.data())
def test_paired_bootstrap_bleu_compares_runs_or_names_the_argument(spoiled, n, data):
    _, refs = _parallel(data, n)
    runs = data.draw(st.lists(st.lists(SENTENCES, min_size=n, max_size=n), min_size=1, max_size=2), label="runs")
    good = {"runs_a": st.just(runs), "references": st.just(refs), "confidence": st.just(0.9), "seed": SEEDS,
            "lengths": st.lists(st.integers(1, 9), min_size=n, max_size=n)}
    bad = {"runs_a": ([None, "a", ["a"] * n, [[]], [["a"] * (n + 1)]], "runs_a|hypothes"),
           "references": ([None, "a", ["a"] * (n + 1)], "reference|hypothesis per reference"),
           "confidence": ([1.0, NAN, "0.9"], "confidence must be between 0 and 1"),
           "seed": (NOT_SEEDS, "seed must be an integer seed"), "lengths": ([[NAN] * n, [0.5] * n, None], "lengths")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def run():
        lengths = kwargs.pop("lengths")
        overall = metrics.paired_bootstrap_bleu(kwargs["runs_a"], runs, kwargs["references"], num_samples=5,
                                                confidence=kwargs["confidence"], seed=kwargs["seed"])
        rows = metrics.paired_bleu_by_length(kwargs["runs_a"], runs, kwargs["references"], lengths, [(1, 4), (5, None)],
                                             num_samples=5, seed=kwargs["seed"])
        return overall, rows

    def validate(result):
        overall, rows = result
        assert overall.difference == 0.0 and overall.low == overall.high == 0.0 and overall.a_wins == 0.0  # A is B
        assert sum(r["pairs"] for r in rows) == n

    expect(run, named, validate)


# ---------------------------------------------------------------------------------------------
# metrics: alignments, classification, several seeds
# ---------------------------------------------------------------------------------------------

LINKS = st.sets(st.tuples(st.integers(0, 3), st.integers(0, 3)), max_size=5)
BAD_LINKS = [None, "ab", [0, 1], [(0, 0.5)], [(0,)], 3, [("0", "1")], [(True, 0)]]


@pytest.mark.parametrize("spoiled", [None, "predicted", "sure", "possible"])
@settings(FUZZ, max_examples=15)
@given(st.data())
def test_alignment_error_rate_lies_in_0_1_or_names_the_links(spoiled, data):
    good = {"predicted": LINKS, "sure": LINKS.filter(bool), "possible": st.one_of(st.none(), LINKS)}
    bad = {name: ([v for v in BAD_LINKS if v is not None or name != "possible"], name) for name in good}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(aer):
        assert 0.0 <= aer <= 1.0, aer
        if kwargs["predicted"] == kwargs["sure"]:
            assert aer == 0.0

    expect(lambda: metrics.alignment_error_rate(**kwargs), named, validate)


@pytest.mark.parametrize("spoiled", [None, "weights", "src_len", "targets"])
@settings(FUZZ, max_examples=15)
@given(st.integers(0, 4), st.integers(1, 4), st.data())
def test_attention_alignment_links_each_row_to_its_argmax_or_names_the_argument(spoiled, rows, cols, data):
    weights = torch.rand(rows, cols, generator=torch.Generator().manual_seed(data.draw(SEEDS, label="draw")))
    good = {"weights": st.just(weights), "src_len": st.one_of(st.none(), st.integers(0, cols)),
            "targets": st.one_of(st.none(), st.sets(st.integers(0, rows - 1)) if rows else st.just(set()))}
    nan_weights = weights.clone().reshape(-1)
    nan_weights[:1] = NAN
    bad = {"weights": ([nan_weights.reshape(rows, cols) if rows else torch.full((1, cols), NAN), torch.zeros(2, 0),
                        weights > 0.5, weights.to(torch.complex64), "ab", weights[None], torch.rand(3)],
                       "attention weights"),
           "src_len": ([1.5, NAN, "1", True], "src_len must be an integer"),
           "targets": ([[0.5], ["0"], [True], [rows], [-1]], "target")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(links):
        best = weights.argmax(dim=-1).tolist()
        limit = cols if kwargs["src_len"] is None else kwargs["src_len"]
        wanted = range(rows) if kwargs["targets"] is None else kwargs["targets"]
        assert links == {(best[j], j) for j in wanted if best[j] < limit}

    expect(lambda: metrics.attention_alignment(**kwargs), named, validate)


@pytest.mark.parametrize("spoiled", [None, "attention", "sure", "possible", "src_valid_lens"])
@settings(FUZZ, max_examples=12)
@given(st.integers(1, 3), st.data())
def test_attention_aer_lies_in_0_1_or_names_the_argument(spoiled, n, data):
    gen = torch.Generator().manual_seed(data.draw(SEEDS, label="draw"))
    attention = [torch.rand(4, 4, generator=gen) for _ in range(n)]
    good = {"attention": st.just(attention), "sure": st.lists(LINKS.filter(bool), min_size=n, max_size=n),
            "possible": st.one_of(st.none(), st.lists(LINKS, min_size=n, max_size=n)),
            "src_valid_lens": st.one_of(st.none(), st.lists(st.integers(0, 4), min_size=n, max_size=n))}
    bad = {"attention": ([None, "x", attention + attention], "attention|one set of gold links"),
           "sure": ([None, [[0, 1]] * n, [[(0, 0)]] * (n + 1), "ab"], "sure|one set of gold links"),
           "possible": ([[[(0, 0)]] * (n + 1), [[1]] * n, "ab"], "possible"),
           "src_valid_lens": ([[1.5] * n, [NAN] * n, [2] * (n + 1), 3], "src_valid_lens")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)
    expect(lambda: metrics.attention_aer(**kwargs), named, lambda aer: 0.0 <= aer <= 1.0)


@pytest.mark.parametrize("spoiled", [None, "predictions", "targets"])
@settings(FUZZ, max_examples=15)
@given(st.integers(1, 6), st.data())
def test_semeval_macro_f1_lies_in_0_1_or_names_the_argument(spoiled, n, data):
    labels = st.lists(st.integers(0, 18), min_size=n, max_size=n)
    as_strings = st.booleans()
    targets = data.draw(labels.filter(lambda ls: any(v != 18 for v in ls)), label="targets")
    good = {"predictions": labels, "targets": st.just(targets)}
    bad_values = [None, "Other", torch.zeros(2, 2, dtype=torch.long), [True] * n, [2.5] * n, [19] * n,
                  ["Nope"] * n, [0] * (n + 1)]
    bad = {"predictions": (bad_values, "predictions|as many predictions as targets"),
           "targets": (bad_values, "targets|as many predictions as targets|every target is Other")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)
    if data.draw(as_strings, label="strings") and spoiled is None:
        kwargs = {k: [relations.LABELS[v] for v in vs] for k, vs in kwargs.items()}

    def validate(score):
        assert 0.0 <= score <= 1.0, score
        if kwargs["predictions"] == kwargs["targets"]:
            assert score == 1.0

    expect(lambda: metrics.semeval_macro_f1(**kwargs), named, validate)


@pytest.mark.parametrize("spoiled", [None, "weights", "evidence"])
@settings(FUZZ, max_examples=12)
@given(st.integers(1, 5), st.integers(1, 4), st.data())
def test_evidence_hit_rate_counts_argmax_hits_or_names_the_argument(spoiled, n, positions, data):
    weights = torch.rand(n, positions, generator=torch.Generator().manual_seed(data.draw(SEEDS, label="draw")))
    evidence = torch.tensor(data.draw(st.lists(st.integers(0, positions - 1), min_size=n, max_size=n), label="ev"))
    bad = {"weights": ([weights.tolist(), (weights * 10).long(), torch.full_like(weights, NAN), weights[None],
                        weights[:0]], "weights"),
           "evidence": ([evidence.float(), evidence > 0, evidence + positions, evidence - positions, evidence[None],
                         evidence.tolist()], "evidence")}
    kwargs, named = draw_arguments(data, {"weights": st.just(weights), "evidence": st.just(evidence)}, bad, spoiled)
    hits = sum(int(w.argmax()) == int(e) for w, e in zip(weights, evidence))
    expect(lambda: metrics.evidence_hit_rate(**kwargs), named, lambda rate: rate == pytest.approx(hits / n))


@pytest.mark.parametrize("spoiled", [None, "values"])
@settings(FUZZ, max_examples=15)
@given(st.data())
def test_spread_gives_mean_min_max_or_names_the_values(spoiled, data):
    numbers = st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=5)
    good = {"values": st.one_of(numbers, numbers.map(torch.tensor), numbers.map(np.array),
                                numbers.map(lambda vs: [torch.tensor(v) for v in vs]))}
    bad = {"values": (["123", None, [True], [NAN], [], 3.0, ["1"], [1j], torch.ones(2, 2), {"a": 1.0},
                       [torch.tensor(True)], np.array(["1.5"])], "values|spread needs")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(s):
        values = [float(v) for v in kwargs["values"]]
        assert (s.min, s.max) == (min(values), max(values)) and s.min - 1e-6 <= s.mean <= s.max + 1e-6

    expect(lambda: metrics.spread(**kwargs), named, validate)


@pytest.mark.parametrize("spoiled", [None, "history", "level"])
@settings(FUZZ, max_examples=10)
@given(st.data())
def test_steps_to_reach_finds_the_first_step_or_names_the_argument(spoiled, data):
    values = data.draw(st.lists(st.floats(0, 1), min_size=1, max_size=5), label="values")
    history = History(eval_steps=list(range(10, 10 * len(values) + 1, 10)), evals={"val_accuracy": values})
    bad = {"history": ([None, {"val_accuracy": values}, values], "history"),
           "level": ([NAN, "0.5", None, True], "level")}
    kwargs, named = draw_arguments(data, {"history": st.just(history), "level": st.floats(-1, 2)}, bad, spoiled)

    def validate(step):
        assert step == next((10 * (i + 1) for i, v in enumerate(values) if v >= kwargs["level"]), None)

    expect(lambda: metrics.steps_to_reach(**kwargs), named, validate)


# ---------------------------------------------------------------------------------------------
# n-gram models
# ---------------------------------------------------------------------------------------------

VOCAB = list("abcde")
CORPUS = st.lists(st.lists(st.sampled_from(VOCAB[:4]), max_size=6), min_size=1, max_size=5).filter(
    lambda seqs: any(seqs))


@pytest.mark.parametrize("spoiled", [None, "order", "vocab", "discounts", "modified", "sequences", "context", "word"])
@settings(FUZZ, max_examples=12)
@given(st.integers(1, 3), st.data())
def test_kneser_ney_probabilities_sum_to_one_or_name_the_argument(spoiled, order, data):
    good = {"order": st.just(order), "vocab": st.just(VOCAB), "discounts": st.just(None),
            "modified": st.booleans(), "sequences": CORPUS,
            "context": st.lists(st.sampled_from(VOCAB + [BOUNDARY]), max_size=4), "word": st.sampled_from(VOCAB)}
    bad = {"order": (NOT_POSITIVE_INTS, "order must be a positive integer"),
           "vocab": ([None, [["a"]], 3, [BOUNDARY, "a"], []], "vocab|boundary token"),
           "discounts": ([[NAN] * order, [True] * order, ["0.5"] * order, [0.5] * (order + 1), 0.5], "discounts"),
           "modified": (NOT_BOOLS, "modified must be True or False"),
           "sequences": ([None, "ab", [1, 2], [[]], [["z"]], [[["a"]]], [b"ab"]], "sequences|not in the vocabulary"),
           "context": ([None, ["z"], [["a"]], 3, torch.tensor([0, 1])], "context"),
           "word": (["z", ["a"], None, BOUNDARY], "word .* not in the vocabulary")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def run():
        lm = KneserNeyLM(kwargs["order"], kwargs["vocab"], kwargs["discounts"], modified=kwargs["modified"])
        lm.fit(kwargs["sequences"])
        return lm, lm.next_word_probs(kwargs["context"]), lm.prob(kwargs["word"], kwargs["context"])

    def validate(result):
        lm, probs, p = result
        assert math.fsum(probs.values()) == pytest.approx(1.0, abs=1e-12) and min(probs.values()) > 0
        assert p == pytest.approx(probs[kwargs["word"]], rel=1e-12)
        assert 1.0 <= lm.perplexity(kwargs["sequences"]) < INF

    expect(run, named, validate)


@functools.cache
def _fitted_bigram() -> KneserNeyLM:
    return KneserNeyLM(2, VOCAB).fit([list("abcab"), list("cabd"), list("ee")])


@pytest.mark.parametrize("spoiled", [None, "num_tokens", "temperature", "generator", "left", "right"])
@settings(FUZZ, max_examples=10)
@given(st.data())
def test_kneser_ney_samples_and_fills_gaps_or_names_the_argument(spoiled, data):
    tokens = st.lists(st.sampled_from(VOCAB), max_size=3)
    good = {"num_tokens": st.integers(1, 4), "temperature": st.sampled_from([1e-300, 0.5, 1.0, 1e300]),
            "generator": st.sampled_from([None, random.Random(3)]), "left": tokens, "right": tokens}
    bad = {"num_tokens": (NOT_POSITIVE_INTS, "num_tokens must be a positive integer"),
           "temperature": ([0, -1.0, NAN, INF, True, "1"], "temperature must be a finite number > 0"),
           "generator": ([3, torch.Generator(), "r"], "generator must be a random.Random"),
           "left": ([None, 3, ["z"], [["a"]]], "left|context"), "right": ([None, ["z"], b"ab"], "right")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)
    lm = _fitted_bigram()

    def run():
        new = lm.sample(kwargs["left"], kwargs["num_tokens"], kwargs["generator"], kwargs["temperature"])
        return new, lm.gap_probs(kwargs["left"], kwargs["right"])

    def validate(result):
        new, gap = result
        assert len(new) == kwargs["num_tokens"] and set(new) <= set(VOCAB)
        assert math.fsum(gap.values()) == pytest.approx(1.0, abs=1e-12) and set(gap) == set(VOCAB)

    expect(run, named, validate)


@pytest.mark.parametrize("spoiled", [None, "sequences", "left", "right"])
@settings(FUZZ, max_examples=10)
@given(st.data())
def test_neighbour_guesser_guesses_a_seen_word_or_names_the_argument(spoiled, data):
    good = {"sequences": CORPUS, "left": st.sampled_from(VOCAB + [BOUNDARY, None]),
            "right": st.sampled_from(VOCAB + [BOUNDARY, None])}
    bad = {"sequences": ([None, "ab", [1, 2], [[]], [[["a"]]]], "sequences"), "left": ([["a"], {"a"}], "left"),
           "right": ([["a"], torch.zeros(2).numpy()], "right")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(word):
        assert word in {t for s in kwargs["sequences"] for t in s}

    expect(lambda: NeighbourGuesser(kwargs["sequences"]).guess(kwargs["left"], kwargs["right"]), named, validate)


# ---------------------------------------------------------------------------------------------
# evaluate: running text, masked tokens, classification, translation
# ---------------------------------------------------------------------------------------------


class BigramLM(nn.Module):
    """Logits ``(batch, steps, vocab)`` that depend on each position's own token only: every window, however
    cut, must give each token the log-probability a full pass gives it."""

    def __init__(self, vocab_size: int = 6):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, vocab_size)
        nn.init.normal_(self.embed.weight, generator=torch.Generator().manual_seed(0))

    def forward(self, X):
        return self.embed(X)


_LM = BigramLM()


def _stream(data, low: int = 2, high: int = 12) -> torch.Tensor:
    return torch.tensor(data.draw(st.lists(st.integers(0, 5), min_size=low, max_size=high), label="tokens"))


def _next_logprobs(tokens: torch.Tensor) -> torch.Tensor:
    """``(len - 1,)``: log P(token t + 1 | token t) under ``_LM``."""
    with torch.no_grad():
        return torch.log_softmax(_LM.embed.weight[tokens[:-1]], dim=-1).gather(-1, tokens[1:, None])[:, 0]


@pytest.mark.parametrize("spoiled", [None, "sequence", "context", "stride", "batch_size"])
@settings(FUZZ, max_examples=10)
@given(st.data())
def test_sliding_window_logprobs_scores_every_token_once_or_names_the_argument(spoiled, data):
    sequence = _stream(data)
    context = data.draw(st.integers(1, 6), label="context")
    good = {"sequence": st.just(sequence), "context": st.just(context),
            "stride": st.one_of(st.none(), st.integers(1, context)), "batch_size": st.integers(1, 4)}
    bad = {"sequence": ([sequence.float(), sequence > 2, sequence[None], sequence.tolist(), sequence[:1]], "sequence"),
           "context": (NOT_POSITIVE_INTS, "context must be a positive integer"),
           "stride": ([0, -1, True, 2.0, context + 1], "stride must be"),
           "batch_size": (NOT_POSITIVE_INTS, "batch_size must be a positive integer")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)
    expect(lambda: evaluate.sliding_window_logprobs(_LM, **kwargs), named,
           lambda logp: torch.allclose(logp, _next_logprobs(sequence), atol=1e-6) or pytest.fail(str(logp)))


@pytest.mark.parametrize("spoiled", [None, "sequences", "context"])
@settings(FUZZ, max_examples=8)
@given(st.data())
def test_losses_by_window_read_each_window_or_name_the_argument(spoiled, data):
    sequences = [_stream(data, 4, 10) for _ in range(data.draw(st.integers(1, 2), label="texts"))]
    as_lists = data.draw(st.booleans(), label="lists")
    good = {"sequences": st.just([s.tolist() for s in sequences] if as_lists else sequences),
            "context": st.integers(1, 3)}
    bad = {"sequences": ([sequences[0], None, "ab", [sequences[0][None]], (s for s in sequences)], "sequences"),
           "context": (NOT_POSITIVE_INTS + [20], "context")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(losses):
        windows = evaluate.position_windows(sequences, kwargs["context"])
        assert losses.shape == (len(windows), kwargs["context"]) and losses.dtype == torch.float64
        for row, window in zip(losses, windows):
            assert torch.allclose(row, -_next_logprobs(window).double(), atol=1e-6)

    expect(lambda: evaluate.losses_by_window(_LM, **kwargs), named, validate)


@pytest.mark.parametrize("spoiled", [None, "mask_id", "never", "positions", "context", "batch_size"])
@settings(FUZZ, max_examples=10)
@given(st.data())
def test_hidden_token_scores_hide_each_token_or_name_the_argument(spoiled, data):
    sequence = _stream(data, 2, 8)
    good = {"mask_id": st.integers(0, 5), "never": st.lists(st.integers(0, 5), max_size=3, unique=True),
            "positions": st.one_of(st.none(), st.lists(st.integers(1, len(sequence) - 1), min_size=1, max_size=4)),
            "context": st.integers(1, 8), "batch_size": st.integers(1, 3)}
    bad = {"mask_id": ([-1, 1.5, True, "0", None], "mask_id"),
           "never": ([[-1], [1.5], "ab", [True], [6], list(range(6)), None], "never"),
           "positions": ([[0], [len(sequence)], [1.0], "1", [[1]]], "positions"),
           "context": (NOT_POSITIVE_INTS, "context"), "batch_size": (NOT_POSITIVE_INTS, "batch_size")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(result):
        guesses, logprobs = result
        where = range(1, len(sequence)) if kwargs["positions"] is None else kwargs["positions"]
        scores = _LM.embed.weight[kwargs["mask_id"]].detach().clone()  # what the model sees at a hidden place
        scores[kwargs["never"]] = -INF
        assert guesses.tolist() == [int(scores.argmax())] * len(where)
        want = torch.log_softmax(scores, -1)[sequence[list(where)]]
        assert torch.allclose(logprobs, want, atol=1e-6), (logprobs, want)

    expect(lambda: evaluate.hidden_token_scores(_LM, sequence, **kwargs), named, validate)


@pytest.mark.parametrize("spoiled", [None, "sequences", "count", "seed", "gaps"])
@settings(FUZZ, max_examples=8)
@given(st.data())
def test_draw_and_fill_gaps_stay_inside_the_texts_or_name_the_argument(spoiled, data):
    sequences = [_stream(data, 2, 8) for _ in range(data.draw(st.integers(1, 3), label="texts"))]
    good = {"sequences": st.just(sequences), "count": st.integers(1, 5), "seed": SEEDS, "gaps": st.just(None)}
    bad = {"sequences": ([sequences[0], None, [s[:1] for s in sequences]], "sequences"),
           "count": (NOT_POSITIVE_INTS, "count must be a positive integer"), "seed": (NOT_SEEDS, "seed"),
           "gaps": ([[(len(sequences), 1)], [(-1, 1)], [1], [(0, 1.0)], [(True, 1)], [(0, 0)]], "gaps|positions")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def run():
        gaps = evaluate.draw_gaps(kwargs["sequences"], kwargs["count"], kwargs["seed"])
        assert all(0 <= c < len(sequences) and 1 <= p < len(sequences[c]) for c, p in gaps), gaps
        gaps = gaps if kwargs["gaps"] is None else kwargs["gaps"]
        return gaps, evaluate.fill_gaps(_LM, kwargs["sequences"], gaps, 4, mask_id=0)

    def validate(result):
        gaps, (guesses, logprobs) = result
        assert guesses.shape == logprobs.shape == (len(gaps),) and bool(logprobs.isfinite().all())
        assert bool((logprobs <= 0).all())

    expect(run, named, validate)


@pytest.mark.parametrize("spoiled", [None, "inputs", "labels", "batch_size"])
@settings(FUZZ, max_examples=8)
@given(st.integers(1, 6), st.data())
def test_predict_and_accuracy_read_the_model_or_name_the_argument(spoiled, n, data):
    model = nn.Linear(3, 4)
    X = torch.randn(n, 3, generator=torch.Generator().manual_seed(data.draw(SEEDS, label="draw")))
    labels = torch.tensor(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n), label="labels"))
    good = {"inputs": st.sampled_from([(X,), [X]]), "labels": st.just(labels), "batch_size": st.integers(1, 4)}
    bad = {"inputs": ([X, [], [X.tolist()], (X, X[:0]), (X[:0],)], "inputs"),
           "labels": ([labels.float(), labels > 1, labels[None], labels[:-1] if n > 1 else labels[:0], labels.tolist()],
                      "labels|one row per label"),
           "batch_size": (NOT_POSITIVE_INTS, "batch_size must be a positive integer")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def run():
        predictions, _ = evaluate.predict(model, kwargs["inputs"], kwargs["batch_size"])
        return predictions, evaluate.accuracy(model, kwargs["inputs"], kwargs["labels"], kwargs["batch_size"])

    def validate(result):
        predictions, acc = result
        with torch.no_grad():
            assert predictions.tolist() == model(X).argmax(-1).tolist()
        assert acc == pytest.approx((predictions == labels).float().mean().item())

    expect(run, named, validate)


@functools.cache
def _tiny_translator():
    data = loader.load_translation_data("dates", num_examples=40, verbose=False)
    torch.manual_seed(0)
    return data, make_bahdanau(len(data.src_vocab), len(data.tgt_vocab), 4, 4).eval()


@pytest.mark.parametrize("spoiled", [None, "sentences", "data", "batch_size", "device", "beam_size", "max_len"])
@settings(FUZZ, max_examples=4)
@given(st.data())
def test_translate_returns_one_translation_per_sentence_or_names_the_argument(spoiled, data):
    corpus, model = _tiny_translator()
    typed = st.lists(st.sampled_from(["march 3 , 2021", "12 / 05 / 88", "the 3rd of may , 1999", ""]), max_size=3)
    good = {"sentences": st.one_of(typed, typed.map(lambda ss: [s.split() for s in ss])), "data": st.just(corpus),
            "batch_size": st.integers(1, 3), "device": st.sampled_from([None, "cpu", torch.device("cpu")]),
            "beam_size": st.integers(1, 2), "max_len": st.one_of(st.none(), st.integers(1, 6))}
    bad = {"sentences": (["march 3", None, [1, 2], [["march", 3]], {"march": 1}], "sentences|single string"),
           "data": ([None, corpus.train, "dates"], "data"),
           "batch_size": (NOT_POSITIVE_INTS, "batch_size"), "device": (["gpu", 0, ""], "device"),
           "beam_size": (NOT_POSITIVE_INTS, "beam_size"), "max_len": (NOT_POSITIVE_INTS[:-1], "max_len")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(translations):
        assert len(translations) == len(kwargs["sentences"])
        for sentence, t in zip(kwargs["sentences"], translations):
            assert t.source == (sentence if isinstance(sentence, list) else corpus.tokenize(sentence))
            assert all(isinstance(token, str) for token in t.tokens) and t.text == " ".join(t.tokens)

    expect(lambda: evaluate.translate(model, **kwargs), named, validate)


@pytest.mark.parametrize("spoiled", [None, "split", "num_samples", "seed", "keep_hypotheses", "buckets"])
@settings(FUZZ, max_examples=4)
@given(st.data())
def test_bleu_report_gives_intervals_or_names_the_argument(spoiled, data):
    corpus, model = _tiny_translator()
    good = {"split": st.sampled_from(["test", "val"]), "num_samples": st.integers(1, 5), "seed": SEEDS,
            "keep_hypotheses": st.booleans(), "buckets": st.sampled_from([None, [(1, 5), (6, None)]])}
    bad = {"split": (["tests", None, 0], "split must be one of"),
           "num_samples": (NOT_POSITIVE_INTS, "num_samples must be a positive integer"),
           "seed": (NOT_SEEDS, "seed"), "keep_hypotheses": (NOT_BOOLS, "keep_hypotheses must be True or False"),
           "buckets": (["x", [(0, 1)]], "buckets")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(report):
        assert 0.0 <= report["bleu_low"] <= report["bleu_high"] <= 100.0
        assert report["pairs"] == len(corpus.pairs(kwargs["split"]))
        assert ("hypotheses" in report) == kwargs["keep_hypotheses"]

    expect(lambda: evaluate.bleu_report(model, corpus, **kwargs), named, validate)


# ---------------------------------------------------------------------------------------------
# data: vocabularies, arrays, batches, windows, splits, corpora
# ---------------------------------------------------------------------------------------------

TOKEN_LISTS = st.lists(st.lists(st.sampled_from(WORDS), max_size=5), max_size=5)


@pytest.mark.parametrize("spoiled", [None, "tokens", "min_freq", "reserved_tokens"])
@settings(FUZZ, max_examples=12)
@given(st.data())
def test_vocab_maps_tokens_to_indices_and_back_or_names_the_argument(spoiled, data):
    good = {"tokens": st.one_of(TOKEN_LISTS, st.lists(st.sampled_from(WORDS), max_size=8)),
            "min_freq": st.integers(0, 3),
            "reserved_tokens": st.lists(st.sampled_from(vocab.RESERVED_TOKENS), unique=True).map(tuple)}
    bad = {"tokens": (["the cat", None, 3, [["a"], "bc"], ["a", ["b"]], [1, "a"], [{"a"}]], "tokens"),
           "min_freq": (NOT_COUNTS + [NAN, 1.5], "min_freq must be a non-negative integer"),
           "reserved_tokens": (["<pad>", None, 5], "reserved_tokens")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(v):
        flat = [t for line in kwargs["tokens"] for t in line] if kwargs["tokens"] and isinstance(
            kwargs["tokens"][0], list) else list(kwargs["tokens"])
        reserved = list(dict.fromkeys(kwargs["reserved_tokens"]))
        assert v.idx_to_token[:len(reserved)] == reserved and vocab.UNK in v
        for token in set(flat):
            kept = flat.count(token) >= kwargs["min_freq"] or token in reserved
            assert v[token] == (v.idx_to_token.index(token) if kept else v.unk)
        assert v.to_tokens(list(range(len(v)))) == v.idx_to_token and v[v.idx_to_token] == list(range(len(v)))

    expect(lambda: vocab.Vocab(**kwargs), named, validate)


_VOCAB = vocab.Vocab(WORDS, reserved_tokens=vocab.RESERVED_TOKENS)


@pytest.mark.parametrize("bad", [1.7, True, "3", None, -1, len(_VOCAB), [torch.tensor([1.5])], np.float64(2.0)],
                         ids=repr)
def test_vocab_to_tokens_names_indices_that_are_no_integers_in_range(bad):
    with pytest.raises(ValueError, match=r"^ind(ices must be integers|ex -?\d+ is out of range)"):
        _VOCAB.to_tokens(bad)
    assert _VOCAB.to_tokens([np.int64(4), torch.tensor(5)]) == _VOCAB.idx_to_token[4:6]


@pytest.mark.parametrize("bad", [torch.tensor(4), np.array(["the"]), {"the"}], ids=repr)
def test_vocab_lookup_names_a_tensor_or_an_unhashable_token(bad):
    with pytest.raises(ValueError, match="tokens must be a token or a list/tuple of tokens"):
        _VOCAB[bad]
    assert _VOCAB[["the", ("cat", "dog")]] == [_VOCAB["the"], [_VOCAB["cat"], _VOCAB.unk]]


@pytest.mark.parametrize("spoiled", [None, "sentences", "vocab", "num_steps", "is_tgt"])
@settings(FUZZ, max_examples=12)
@given(st.data())
def test_build_array_pads_each_sentence_or_names_the_argument(spoiled, data):
    good = {"sentences": TOKEN_LISTS, "vocab": st.just(_VOCAB), "num_steps": st.integers(1, 6),
            "is_tgt": st.booleans()}
    bad = {"sentences": (["the cat", ["the cat"], None, [3], ("the", "cat")], "sentences"),
           "vocab": ([None, vocab.Vocab(WORDS), {"the": 0}], "vocab"),
           "num_steps": (NOT_POSITIVE_INTS, "num_steps must be a positive integer"),
           "is_tgt": (NOT_BOOLS, "is_tgt must be True or False")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(result):
        array, valid_len = result
        n, tgt = kwargs["num_steps"], kwargs["is_tgt"]
        assert array.shape == (len(kwargs["sentences"]), n + tgt) and array.dtype == torch.long
        for row, length, sentence in zip(array.tolist(), valid_len.tolist(), kwargs["sentences"]):
            assert length == tgt + min(len(sentence) + 1, n)
            words = _VOCAB.to_tokens(row[tgt:])
            assert words[:min(len(sentence), n)] == sentence[:n]
            assert words[length - tgt:] == ["<pad>"] * (n + tgt - length)

    expect(lambda: batching.build_array(**kwargs), named, validate)


@pytest.mark.parametrize("spoiled", [None, "tokens", "num_steps"])
@settings(FUZZ, max_examples=8)
@given(st.data())
def test_pad_or_truncate_gives_num_steps_tokens_or_names_the_argument(spoiled, data):
    good = {"tokens": st.lists(st.sampled_from(WORDS), max_size=6), "num_steps": st.integers(0, 6)}
    bad = {"tokens": (["the cat", b"ab"], "tokens"), "num_steps": (NOT_COUNTS + [NAN], "num_steps")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(out):
        n, tokens = kwargs["num_steps"], kwargs["tokens"]
        assert len(out) == n and out[:min(n, len(tokens))] == tokens[:n] and set(out[len(tokens):]) <= {"<pad>"}

    expect(lambda: batching.pad_or_truncate(**kwargs), named, validate)


@pytest.mark.parametrize("spoiled", [None, "lengths", "batch_size", "seed", "shuffle", "drop_last", "epoch"])
@settings(FUZZ, max_examples=10)
@given(st.data())
def test_bucket_batch_sampler_batches_equal_lengths_or_names_the_argument(spoiled, data):
    lengths = data.draw(st.lists(st.integers(1, 4), max_size=12), label="lengths")
    good = {"lengths": st.sampled_from([lengths, torch.tensor(lengths, dtype=torch.long)]),
            "batch_size": st.integers(1, 5), "seed": SEEDS, "shuffle": st.booleans(), "drop_last": st.booleans(),
            "epoch": st.integers(0, 3)}
    bad = {"lengths": ([[NAN], [1.5, 2], torch.ones(2, 2), None, ["3"], [True]], "lengths"),
           "batch_size": (NOT_POSITIVE_INTS, "batch_size must be a positive integer"),
           "seed": (NOT_SEEDS, "seed"), "shuffle": (NOT_BOOLS, "shuffle"), "drop_last": (NOT_BOOLS, "drop_last"),
           "epoch": (NOT_COUNTS, "epoch")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)
    epoch = kwargs.pop("epoch")

    def validate(batches):
        size = kwargs["batch_size"]
        assert all(len({lengths[i] for i in b}) == 1 and 0 < len(b) <= size for b in batches)
        seen = sorted(i for b in batches for i in b)
        if kwargs["drop_last"]:
            assert all(len(b) == size for b in batches) and len(set(seen)) == len(seen)
        else:
            assert seen == list(range(len(lengths)))

    expect(lambda: batching.BucketBatchSampler(**kwargs).batches(epoch), named, validate)


@pytest.mark.parametrize("spoiled", [None, "stream", "batch_size", "length", "generator"])
@settings(FUZZ, max_examples=8)
@given(st.data())
def test_random_windows_are_slices_of_the_stream_or_name_the_argument(spoiled, data):
    stream = torch.arange(data.draw(st.integers(2, 20), label="size")) * 3
    good = {"stream": st.just(stream), "batch_size": st.integers(1, 4), "length": st.integers(1, len(stream) - 1),
            "generator": st.sampled_from([None, torch.Generator().manual_seed(1)])}
    bad = {"stream": ([stream.float(), stream > 3, stream[None], stream.tolist()], "stream"),
           "batch_size": (NOT_POSITIVE_INTS, "batch_size"),
           "length": (NOT_POSITIVE_INTS + [len(stream)], "length|stream"),
           "generator": ([1, random.Random(0), "g"], "generator")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(windows_):
        assert windows_.shape == (kwargs["batch_size"], kwargs["length"] + 1)
        for row in windows_:
            assert torch.equal(row, stream[int(row[0]) // 3:int(row[0]) // 3 + kwargs["length"] + 1])

    expect(lambda: windows.random_windows(**kwargs), named, validate)


def _corpus(data, with_alignments=False) -> text.ParallelCorpus:
    """A corpus of distinct English sentences (so every group holds one pair)."""
    english = data.draw(st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(tuple), min_size=4,
                                 max_size=12, unique=True), label="english")
    return text.ParallelCorpus([list(e) for e in english], [["le"] * len(e) for e in english],
                               [[(0, 0)] for _ in english] if with_alignments else None)


@pytest.mark.parametrize("spoiled", [None, "corpus", "num_val", "num_test", "num_train", "max_eval_len", "seed",
                                     "buckets"])
@settings(FUZZ, max_examples=10)
@given(st.data())
def test_split_by_source_holds_out_whole_sentences_or_names_the_argument(spoiled, data):
    corpus = _corpus(data)
    size = len(corpus)
    good = {"corpus": st.just(corpus), "num_val": st.integers(0, 2), "num_test": st.integers(0, 2),
            "num_train": st.one_of(st.none(), st.integers(0, size - 4)), "max_eval_len": st.sampled_from([None, 4, 9]),
            "seed": SEEDS, "buckets": st.just(None)}
    bad = {"corpus": ([None, corpus.src, "abc"], "corpus"), "num_val": (NOT_COUNTS, "num_val"),
           "num_test": (NOT_COUNTS + [size + 1], "num_test|cannot fill a test set"),
           "num_train": ([-1, True, 1.5, size + 1], "num_train"),
           "max_eval_len": ([0, -1, True, 2.5, "4"], "max_eval_len"), "seed": (NOT_SEEDS, "seed"),
           "buckets": (["x", [(0, 5)], [(1, None), (2, 3)], [(3, 1)]], "buckets|either max_eval_len or buckets")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)
    if spoiled == "buckets":
        kwargs["max_eval_len"] = None

    def validate(split):
        parts = [split.train, split.val, split.test]
        assert len(split.val) == kwargs["num_val"] and len(split.test) == kwargs["num_test"]
        assert sum(map(len, parts)) == len(set().union(*parts))  # disjoint
        if kwargs["num_train"] is None:
            assert sorted(i for p in parts for i in p) == list(range(size))
        else:
            assert len(split.train) == kwargs["num_train"]
        limit = kwargs["max_eval_len"] or INF
        assert all(len(corpus.src[i]) <= limit for i in split.val + split.test)

    expect(lambda: splits.split_by_source(**kwargs), named, validate)


@pytest.mark.parametrize("spoiled", [None, "text", "with_alignments", "ends_with_newline", "indices"])
@settings(FUZZ, max_examples=10)
@given(st.data())
def test_parse_pairs_reads_back_what_was_written_or_names_the_argument(spoiled, data):
    corpus = _corpus(data, with_alignments=True)
    written = "".join(f"{' '.join(e)}\t{' '.join(f)}\t{text.format_alignment(a)}\n"
                      for e, f, a in zip(corpus.src, corpus.tgt, corpus.alignments))
    good = {"text": st.just(written), "with_alignments": st.just(True), "ends_with_newline": st.booleans(),
            "indices": st.lists(st.integers(0, len(corpus) - 1), max_size=4)}
    bad = {"text": ([None, written.encode(), written.splitlines()], "text must be a string"),
           "with_alignments": (NOT_BOOLS, "with_alignments"), "ends_with_newline": (NOT_BOOLS, "ends_with_newline"),
           "indices": ([[-1], [len(corpus)], [0.0], [True], ["0"], None], "indices")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)
    indices = kwargs.pop("indices")

    def validate(subset):
        assert subset.src == [corpus.src[i] for i in indices] and subset.tgt == [corpus.tgt[i] for i in indices]
        assert subset.alignments == [corpus.alignments[i] for i in indices]

    expect(lambda: text.parse_pairs(**kwargs).subset(indices), named, validate)


@pytest.mark.parametrize("spoiled", [None, "source", "num_steps", "min_freq", "seed", "num_examples", "verbose",
                                     "num_train"])
@settings(FUZZ, max_examples=5)
@given(st.data())
def test_load_translation_data_builds_consistent_arrays_or_names_the_argument(spoiled, data):
    good = {"source": st.sampled_from(["dates", "grammar"]), "num_steps": st.one_of(st.none(), st.integers(1, 12)),
            "min_freq": st.integers(0, 2), "seed": SEEDS, "num_examples": st.integers(20, 40),
            "verbose": st.just(False), "num_train": st.just(None)}
    bad = {"source": ([None, "Dates", ["dates"]], "source must be one of"),
           "num_steps": (NOT_POSITIVE_INTS[:-1], "num_steps must be a positive integer"),
           "min_freq": (NOT_COUNTS + [NAN], "min_freq must be a non-negative integer"), "seed": (NOT_SEEDS, "seed"),
           "num_examples": ([0, -1, True, 2.5], "num_examples must be a positive integer"),
           "verbose": (["no", 1, None], "verbose must be True or False"),
           "num_train": ([-1, True, 10**6, 0], "num_train|training set is empty")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(d):
        for split in loader.SPLITS:
            src, dec_input, src_valid_lens, label = d.arrays(split)
            assert src.shape == dec_input.shape == label.shape == (len(d.pairs(split)), d.num_steps)
            assert bool((src_valid_lens >= 1).all()) and bool((src_valid_lens <= d.num_steps).all())
        assert d.sizes()["train"] > 0

    expect(lambda: loader.load_translation_data(**kwargs), named, validate)


@pytest.mark.parametrize("spoiled", [None, "src_sentences", "tgt_sentences", "split", "batch_size", "seed",
                                     "shuffle", "bucket", "min_length"])
@settings(FUZZ, max_examples=6)
@given(st.data())
def test_translation_data_methods_work_or_name_the_argument(spoiled, data):
    corpus, _ = _tiny_translator()
    typed = st.lists(st.sampled_from(["march 3 , 2021", "12 / 05 / 88", ""]), min_size=1, max_size=2)
    n = data.draw(st.integers(1, 2), label="n")
    good = {"src_sentences": typed.filter(lambda s: len(s) == n),
            "tgt_sentences": st.sampled_from([None, ["2021"] * n]),
            "split": st.sampled_from(loader.SPLITS), "batch_size": st.integers(1, 8), "seed": SEEDS,
            "shuffle": st.sampled_from([None, True, False]), "bucket": st.booleans(), "min_length": st.integers(0, 9)}
    bad = {"src_sentences": (["march 3", None, [1]], "src_sentences"),
           "tgt_sentences": (["2021", [3] * n, ["2021"] * (n + 1)], "tgt_sentences|as many target sentences"),
           "split": (["Train", None, ["train"]], "split must be one of"),
           "batch_size": (NOT_POSITIVE_INTS, "batch_size must be a positive integer"),
           "seed": (NOT_SEEDS, "seed"), "shuffle": (["yes", 1], "shuffle"), "bucket": (NOT_BOOLS, "bucket"),
           "min_length": (NOT_COUNTS, "min_length")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def run():
        built = corpus.build(kwargs["src_sentences"], kwargs["tgt_sentences"])
        batches = list(corpus.dataloader(kwargs["split"], kwargs["batch_size"], kwargs["shuffle"], kwargs["seed"],
                                         kwargs["bucket"]))
        return built, batches, corpus.unseen_pairs(kwargs["min_length"])

    def validate(result):
        (src, dec_input, lens, label), batches, unseen = result
        assert src.shape == (n, corpus.num_steps) and dec_input.shape == label.shape == src.shape
        assert sum(len(b[0]) for b in batches) == len(corpus.pairs(kwargs["split"]))
        assert all(len(corpus.corpus.src[i]) >= kwargs["min_length"] for i in unseen)

    expect(run, named, validate)


# ---------------------------------------------------------------------------------------------
# data: the generated corpora, canvases and dates; the readers of files; running text
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("spoiled", [None, "num_train", "seed", "distractor_prob", "rare_prob", "distractors",
                                     "filler"])
@settings(FUZZ, max_examples=6)
@given(st.data())
def test_make_relation_corpus_marks_the_cue_or_names_the_argument(spoiled, data):
    good = {"num_train": st.integers(1, 4), "num_val": st.integers(0, 2), "num_test": st.integers(0, 2),
            "seed": SEEDS, "distractor_prob": st.sampled_from([0.0, 0.5, 1, 1.0]),
            "rare_prob": st.sampled_from([0, 0.5]),
            "distractors": st.integers(1, 3), "filler": st.integers(0, 2)}
    bad = {"num_train": (NOT_COUNTS, "num_train"), "seed": (NOT_SEEDS, "seed"),
           "distractor_prob": (NOT_SHARES, "distractor_prob"), "rare_prob": (NOT_SHARES, "rare_prob"),
           "distractors": ([0, 4, 2.0, True, "1"], "distractors"), "filler": (NOT_COUNTS + [1.5], "filler")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(corpus):
        examples = corpus.train + corpus.val + corpus.test
        assert [len(corpus.train), len(corpus.val), len(corpus.test)] == [kwargs[k] for k in (
            "num_train", "num_val", "num_test")]
        assert len({e.tokens for e in examples}) == len(examples)
        for e in examples:
            start, stop = e.cue_span
            assert e.label in relations.LABELS and start <= e.evidence < stop
            assert e.tokens.index("</e1>") < e.evidence < e.tokens.index("<e2>")
        tensors = relations.relation_tensors(examples, relations.relation_vocab(examples))
        assert tensors.lengths.tolist() == [len(e.tokens) for e in examples]

    expect(lambda: relations.make_relation_corpus(**kwargs), named, validate)


_RELATIONS = relations.make_relation_corpus(3, 0, 0).train


@pytest.mark.parametrize("spoiled", [None, "examples", "vocab"])
@settings(FUZZ, max_examples=6)
@given(st.data())
def test_relation_tensors_decode_back_or_name_the_argument(spoiled, data):
    good = {"examples": st.just(_RELATIONS), "vocab": st.just(relations.relation_vocab(_RELATIONS))}
    bad = {"examples": ([["the cat"], None, "abc", _RELATIONS[0]], "example"),
           "vocab": ([None, vocab.Vocab(["the"]), {"<pad>": 0}], "vocab")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(tensors):
        for row, n, label, e in zip(tensors.tokens, tensors.lengths, tensors.labels, _RELATIONS):
            assert kwargs["vocab"].to_tokens(row[:n]) == list(e.tokens) and relations.LABELS[label] == e.label

    expect(lambda: relations.relation_tensors(**kwargs), named, validate)


@pytest.mark.parametrize("spoiled", [None, "num", "seed", "distractor_rate", "rare_prob", "min_sentences"])
@settings(FUZZ, max_examples=6)
@given(st.data())
def test_make_reviews_follow_their_rule_or_name_the_argument(spoiled, data):
    good = {"num": st.integers(0, 4), "seed": SEEDS, "distractor_rate": st.sampled_from([0.0, 0.5, 1]),
            "rare_prob": st.sampled_from([0.0, 0.3]), "min_sentences": st.integers(1, 4)}
    bad = {"num": (NOT_COUNTS, "num must be a non-negative integer"), "seed": (NOT_SEEDS, "seed"),
           "distractor_rate": (NOT_SHARES, "distractor_rate"), "rare_prob": (NOT_SHARES, "rare_prob"),
           "min_sentences": ([0, -1, 9, True, 2.5], "min_sentences")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(rs):
        assert len(rs) == kwargs["num"]
        for r in rs:
            assert reviews.review_label(r.sentences) == r.label
            assert r.sentences[r.evidence][r.evidence_word] in reviews.OPINION_WORDS
        if rs:
            ids, sentence_lens, doc_lens = reviews.documents_to_tensors(rs, reviews.review_vocab(rs))
            assert doc_lens.tolist() == [len(r.sentences) for r in rs]

    expect(lambda: reviews.make_reviews(**kwargs), named, validate)


_REVIEWS = reviews.make_reviews(3)


@pytest.mark.parametrize("spoiled", [None, "documents", "vocab", "max_sentences", "max_words"])
@settings(FUZZ, max_examples=6)
@given(st.data())
def test_documents_to_tensors_pad_each_document_or_name_the_argument(spoiled, data):
    docs = [r.sentences for r in _REVIEWS]
    good = {"documents": st.sampled_from([_REVIEWS, docs]), "vocab": st.just(reviews.review_vocab(_REVIEWS)),
            "max_sentences": st.sampled_from([None, 8, 9]), "max_words": st.sampled_from([None, 12, 13])}
    bad = {"documents": ([["the film was good"], [[" ".join(s) for s in d] for d in docs], None, "abc", [[[1]]]],
                         "documents"),
           "vocab": ([None, vocab.Vocab(["the"])], "vocab"),
           "max_sentences": ([1, -1, True, 8.5], "max_sentences|room for"),
           "max_words": ([1, -1, True, 12.5], "max_words|room for")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(result):
        ids, sentence_lens, doc_lens = result
        for n, doc in enumerate(docs):
            assert doc_lens[n] == len(doc)
            for i, sentence in enumerate(doc):
                assert kwargs["vocab"].to_tokens(ids[n, i, :sentence_lens[n, i]]) == sentence

    expect(lambda: reviews.documents_to_tensors(**kwargs), named, validate)


@pytest.mark.parametrize("spoiled", [None, "num", "seed", "grid", "split", "distractors", "noise"])
@settings(FUZZ, max_examples=5)
@given(st.data())
def test_digit_canvases_frame_the_evidence_or_name_the_argument(spoiled, data):
    good = {"num": st.integers(1, 3), "seed": st.integers(0, 2**20), "grid": st.integers(2, 3),
            "split": st.sampled_from(["train", "val", "test"]), "distractors": st.integers(0, 3),
            "noise": st.sampled_from([0.0, 0, 0.3, np.float32(0.1)])}
    bad = {"num": (NOT_POSITIVE_INTS, "num must be a positive integer"),
           "seed": (NOT_SEEDS + [-1], "seed"), "grid": ([1, 0, True, 2.5], "grid"),
           "split": (["Train", None, ["train"]], "split must be one of"), "distractors": ([-1, 9, True], "distractors"),
           "noise": ([-0.1, NAN, INF, True, "0.1"], "noise")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(result):
        images, labels, evidence = result
        g = kwargs["grid"]
        assert images.shape == (kwargs["num"], 1, 10 * g, 10 * g) and bool(((images >= 0) & (images <= 1)).all())
        digit_ids, frames, again = digits.canvas_layout(kwargs["num"], kwargs["seed"], g, kwargs["split"],
                                                        kwargs["distractors"])
        assert torch.equal(again, evidence) and frames.eq(1).sum(dim=1).tolist() == [1] * kwargs["num"]
        assert (frames >= 2).sum(dim=1).tolist() == [kwargs["distractors"]] * kwargs["num"]
        framed = digit_ids[torch.arange(kwargs["num"]), evidence].numpy()
        assert labels.tolist() == digits.load_digit_images()[1][framed].tolist()

    expect(lambda: digits.make_digit_canvases(**kwargs), named, validate)


@pytest.mark.parametrize("spoiled", [None, "digit_ids", "frames", "grid"])
@settings(FUZZ, max_examples=5)
@given(st.data())
def test_draw_canvases_draws_a_layout_or_names_the_argument(spoiled, data):
    digit_ids, frames, _ = digits.canvas_layout(2, data.draw(st.integers(0, 99), label="layout"), 2)
    good = {"digit_ids": st.just(digit_ids), "frames": st.just(frames), "grid": st.just(2)}
    bad = {"digit_ids": ([digit_ids.float(), digit_ids + 5000, digit_ids - 5000, digit_ids[0], digit_ids.tolist()],
                         "digit_ids"),
           "frames": ([frames + 6, frames - 1, frames.float(), frames[:, :2], frames > 0], "frames"),
           "grid": ([3, 1, True, 2.0], "grid|shape")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)
    expect(lambda: digits.draw_canvases(**kwargs), named,
           lambda images: images.shape == (2, 1, 20, 20) or pytest.fail(str(images.shape)))


@pytest.mark.parametrize("spoiled", [None, "date", "fmt"])
@settings(FUZZ, max_examples=10)
@given(st.data())
def test_format_date_writes_the_iso_date_or_names_the_argument(spoiled, data):
    good = {"date": st.dates(dates.FIRST_DAY, dates.LAST_DAY), "fmt": st.sampled_from(list(dates.DATE_FORMATS))}
    bad = {"date": ([datetime.date(1949, 12, 31), datetime.date(2050, 1, 1), "2021-03-03", None, 20210303], "date"),
           "fmt": (["iso", None, ["slashes"]], "date format")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(result):
        source, target, links = result
        assert dates.iso_date(target) == kwargs["date"].isoformat()
        assert dates.tokenize_date(" ".join(source)) == source
        assert all(0 <= i < len(source) and 0 <= j < len(target) for i, j in links)

    expect(lambda: dates.format_date(**kwargs), named, validate)


@pytest.mark.parametrize("spoiled", [None, "name", "num_examples", "seed"])
@settings(FUZZ, max_examples=6)
@given(st.data())
def test_bundled_corpora_generate_aligned_pairs_or_name_the_argument(spoiled, data):
    good = {"name": st.sampled_from(sorted(bundled.BUNDLED)), "num_examples": st.integers(1, 5),
            "seed": st.one_of(st.none(), SEEDS)}
    bad = {"name": (["Dates", None, ["dates"]], "bundled corpus"),
           "num_examples": ([0, -1, True, 2.5, "3"], "num_examples"), "seed": ([True, 1.5, "0", 2**70], "seed")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(corpus):
        assert len(corpus) == kwargs["num_examples"] and corpus.alignments is not None
        for src, tgt, links in zip(corpus.src, corpus.tgt, corpus.alignments):
            assert all(0 <= i < len(src) and 0 <= j < len(tgt) for i, j in links)
        generate = {"dates": dates.generate_dates, "grammar": grammar.generate_grammar}[kwargs["name"]]
        seed = bundled.BUNDLED[kwargs["name"]].seed if kwargs["seed"] is None else kwargs["seed"]
        assert corpus.src == [en for en, _, _ in generate(kwargs["num_examples"], seed)]

    expect(lambda: bundled.load_bundled(**kwargs), named, validate)


#: functions of a path, each with the arguments it needs besides it
PATH_ARGUMENTS = {
    "load_semeval path": ("path", lambda v: semeval.load_semeval(v)),
    "load_semeval_splits folder": ("folder", lambda v: semeval.load_semeval_splits(v)),
    "find_local_copy path": ("data_path", lambda v: tatoeba.find_local_copy(v)),
    "load_tatoeba data_path": ("data_path", lambda v: tatoeba.load_tatoeba(v, verbose=False)),
    "sha1_of path": ("path", lambda v: cache.sha1_of(v)),
    "download cache_dir": ("cache_dir", lambda v: cache.download("http://example.invalid/x", "0", v)),
    "find_results_file start": ("start", lambda v: stored_results.find_results_file("x.json", v)),
    "save_checkpoint path": ("path", lambda v: checkpoints.save_checkpoint(v, nn.Linear(1, 1), require_config=False)),
    "load_checkpoint path": ("path", lambda v: checkpoints.load_checkpoint(v)),
    "write_snapshots out_dir": ("out_dir", lambda v: generate.write_snapshots(v)),
    "check_snapshots data_dir": ("data_dir", lambda v: generate.check_snapshots(v)),
}


@pytest.mark.parametrize("bad", [3, ["a"], b"x", 1.5], ids=repr)
@pytest.mark.parametrize("entry", list(PATH_ARGUMENTS))
def test_paths_that_are_no_string_or_path_are_named(entry, bad):
    name, call = PATH_ARGUMENTS[entry]
    with pytest.raises(ValueError, match=rf"^{name} must be a string"):
        call(bad)


@pytest.mark.parametrize("spoiled", [None, "url", "sha1", "filename", "timeout"])
@settings(FUZZ, max_examples=5)
@given(st.data())
def test_download_names_a_bad_argument_before_fetching(spoiled, data):
    body = b"pairs\n"
    good = {"url": st.just("http://example.invalid/fra-eng.zip"), "sha1": st.just(hashlib.sha1(body).hexdigest()),
            "filename": st.sampled_from([None, "copy.zip"]), "timeout": st.sampled_from([1, 30.0])}
    bad = {"url": ([None, "", 3], "url"), "sha1": ([None, ""], "sha1"), "filename": (["", 3], "filename"),
           "timeout": ([0, -1, NAN, INF, True, "30"], "timeout")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    class Response:
        def __init__(self):
            self.chunks = [body, b""]

        def read(self, _):
            return self.chunks.pop(0)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def run():
        original, cache.fetch = cache.fetch, lambda url, timeout: Response()
        try:
            with tempfile.TemporaryDirectory() as folder:
                return cache.download(cache_dir=folder, **kwargs).read_bytes()
        finally:
            cache.fetch = original

    expect(run, named, lambda saved: saved == body or pytest.fail(str(saved)))


@pytest.mark.parametrize("spoiled", [None, "text", "total_nats", "num_characters", "ids", "split"])
@settings(FUZZ, max_examples=8)
@given(st.data())
def test_running_text_helpers_count_and_decode_or_name_the_argument(spoiled, data):
    alphabet = "ab c."
    tokenized = subwords.TokenizedText(
        "characters", 3 + len(alphabet), [torch.tensor([1, 3, 4])], [torch.tensor([1, 5])], [torch.tensor([1, 6, 7])],
        {"train": ["ab"], "val": [" "], "test": ["c."]}, lambda s: [3 + alphabet.index(c) for c in s],
        lambda ids: "".join(alphabet[i - 3] for i in ids))
    good = {"text": st.text("Ab ,.'’", max_size=12), "total_nats": st.floats(0, 1e6),
            "num_characters": st.integers(1, 99),
            "ids": st.lists(st.integers(0, 7), max_size=6), "split": st.sampled_from(["train", "val", "test"])}
    bad = {"text": ([None, b"ab", ["ab"]], "text must be a string"),
           "total_nats": ([-1.0, NAN, INF, True, "3", None], "total_nats"),
           "num_characters": (NOT_POSITIVE_INTS, "num_characters"),
           "ids": ([[8], [-1], [1.0], "ab", None, [True]], "ids"), "split": (["Train", None, 0], "split")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def run():
        return (moby_dick.word_tokens(kwargs["text"]), subwords.bits_per_character(kwargs["total_nats"],
                                                                                 kwargs["num_characters"]),
                tokenized.decode(kwargs["ids"]), tokenized.num_tokens(kwargs["split"]),
                tokenized.num_characters(kwargs["split"]))

    def validate(result):
        words, bits, decoded, num_tokens, num_characters = result
        assert "".join(words) == "".join(kwargs["text"].lower().replace("’", "'").split())
        assert bits == pytest.approx(kwargs["total_nats"] / math.log(2) / kwargs["num_characters"])
        assert decoded == "".join(alphabet[i - 3] for i in kwargs["ids"] if i >= 3)
        assert (num_tokens, num_characters) == {"train": (2, 2), "val": (1, 1), "test": (2, 2)}[kwargs["split"]]

    expect(run, named, validate)


# ---------------------------------------------------------------------------------------------
# stored results and the comparison of translators
# ---------------------------------------------------------------------------------------------


def _stored_run(model: str, seed: int, bleu: float) -> dict:
    return {"model": model, "seed": seed, "parameters": 10, "steps": 3, "train_seconds": 1.0 + seed, "bleu": bleu,
            "bleu_low": bleu - 1, "bleu_high": bleu + 1, "multi_bleu": bleu + 2, "multi_low": bleu,
            "multi_high": bleu + 3,
            "curve": {"steps": [1, 2], "seconds": [0.5, 1.0], "val_bleu": [bleu / 2, bleu]}}


def _record(bleus: dict) -> dict:
    runs = [_stored_run(model, seed, b) for model, values in bleus.items() for seed, b in enumerate(values)]
    return {**{f: None for f in stored_results.RECORD_FIELDS}, "recipes": {m: {} for m in bleus}, "runs": runs,
            "grammar_runs": [{"model": m, "aer": 0.25} for m in bleus]}


@pytest.mark.parametrize("spoiled", [None, "record", "models"])
@settings(FUZZ, max_examples=8)
@given(st.data())
def test_summarize_runs_spreads_each_model_or_names_the_argument(spoiled, data):
    per_seed = st.lists(st.floats(1, 99), min_size=1, max_size=3)
    bleus = data.draw(st.dictionaries(st.sampled_from(["A", "B", "C"]), per_seed, min_size=1), label="bleus")
    record = _record(bleus)
    broken = json.loads(json.dumps(record))
    broken["runs"][0]["bleu"] = "x"
    listed = json.loads(json.dumps(record))
    listed["runs"][0] = ["A"]
    good = {"record": st.just(record), "models": st.one_of(st.none(), st.permutations(list(bleus)))}
    bad = {"record": ([None, [], {"runs": "A"}, broken, listed], "record|needs numbers|must be a JSON object"),
           "models": (["A", [], [3], ["Z"]], "models|no stored run")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def run():
        stored_results.check_translator_results(kwargs["record"])
        return stored_results.summarize_runs(**kwargs)

    def validate(rows):
        assert [r["model"] for r in rows] == (kwargs["models"] or list(bleus))
        for r in rows:
            s = r["bleu"]
            assert (s["min"], s["max"]) == (min(bleus[r["model"]]), max(bleus[r["model"]]))
            assert s["mean"] == pytest.approx(sum(bleus[r["model"]]) / len(bleus[r["model"]]))
        assert len(stored_results.format_summary(rows).splitlines()) == len(rows) + 1

    expect(run, named, validate)


@pytest.mark.parametrize("spoiled", [None, "runs", "metric", "digits"])
@settings(FUZZ, max_examples=8)
@given(st.data())
def test_format_variants_pairs_seeds_or_names_the_argument(spoiled, data):
    seeds = data.draw(st.lists(st.integers(0, 9), min_size=1, max_size=3, unique=True), label="seeds")
    rows = {v: [{"seed": s, "x": float(s + k)} for s in seeds] for k, v in enumerate(["base", "other"])}
    good = {"runs": st.just(rows), "metric": st.just("x"), "digits": st.integers(0, 3)}
    bad = {"runs": ([{}, None, {"base": []}, {"base": rows["base"], "other": rows["other"][::-1]} if len(seeds) > 1
                     else {"base": rows["base"], "other": rows["other"] * 2}], "runs|seeds"),
           "metric": (["y", None], "runs must|holding"), "digits": (NOT_COUNTS, "digits")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(table):
        lines = table.splitlines()
        assert len(lines) == 2 and "difference" in lines[1]
        assert f"{1.0:+.{kwargs['digits']}f}" in lines[1]  # other = base + 1 for every seed

    expect(lambda: stored_results.format_variants(**kwargs), named, validate)


@pytest.mark.parametrize("bad, named", [(None, "name"), (3, "name"), ("", "name"), (["x"], "name")], ids=repr)
def test_load_stored_run_names_a_name_that_is_no_string(bad, named):
    with pytest.raises(ValueError, match=rf"^{named} must be"):
        stored_results.load_stored_run(bad)
    assert stored_results.load_stored_run("no such run here") is None


@pytest.mark.parametrize("call, named", [
    (lambda: compare.book_settings(["Bahdanau"]), "name must be one of"),
    (lambda: compare.compare_translators(None, names="Bahdanau"), "names must be"),
    (lambda: compare.compare_translators(None, names=[]), "names must be"),
    (lambda: compare.train_and_score("Bahdanau", _tiny_translator()[0], split="tests"), "split must be one of"),
    (lambda: compare.train_and_score("Bahdanau", _tiny_translator()[0], num_samples=0), "num_samples"),
    (lambda: compare.train_and_score("Bahdanau", _tiny_translator()[0], keep_hypotheses="yes"), "keep_hypotheses"),
    (lambda: compare.train_and_score("Bahdanau", None), "data must be"),
    (lambda: compare.train_recipe("Bahdanau", _tiny_translator()[0], seed=1.5), "seed must be an int"),
    (lambda: compare.train_recipe("Bahdanau, 2 layers", _tiny_translator()[0]), "name must be one of"),
], ids=lambda v: getattr(v, "__name__", v))
def test_comparisons_name_a_bad_argument_before_training(call, named):
    with pytest.raises(ValueError, match=named):
        call()
    assert compare.book_settings("Bahdanau", 7)["max_steps"] == 7


# ---------------------------------------------------------------------------------------------
# measurements, budgets, tolerances, devices and seeds, modes
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("spoiled", [None, "xs", "ys"])
@settings(FUZZ, max_examples=12)
@given(st.data())
def test_loglog_slope_reads_the_exponent_or_names_the_argument(spoiled, data):
    xs = data.draw(st.lists(st.integers(1, 10**4), min_size=2, max_size=5, unique=True), label="xs")
    power = data.draw(st.sampled_from([0.5, 1, 2, -1]), label="power")
    ys = [3.0 * x**power for x in xs]
    bad_lists = [None, "12", [1.0], [0.0, 1.0], [-1.0, 2.0], [NAN, 2.0], [INF, 2.0], [True, 2], xs + [7]]
    bad = {"xs": (bad_lists + [[5, 5]], "xs"), "ys": (bad_lists, "ys|equally many")}
    kwargs, named = draw_arguments(data, {"xs": st.just(xs), "ys": st.just(ys)}, bad, spoiled)
    expect(lambda: measure.loglog_slope(**kwargs), named, lambda p: p == pytest.approx(power, abs=1e-9))


@pytest.mark.parametrize("spoiled", [None, "fns", "device", "repeats", "warmup"])
@settings(FUZZ, max_examples=6)
@given(st.data())
def test_interleaved_medians_run_each_function_in_turn_or_name_the_argument(spoiled, data):
    calls = []
    fns = [lambda: calls.append("a"), lambda: calls.append("b")]
    good = {"fns": st.just(fns), "device": st.sampled_from(["cpu", torch.device("cpu")]),
            "repeats": st.integers(1, 3), "warmup": st.integers(0, 2)}
    bad = {"fns": ([fns[0], [3], None, "ab"], "fns"), "device": (["gpu", 0, None], "device"),
           "repeats": (NOT_POSITIVE_INTS, "repeats"), "warmup": (NOT_COUNTS, "warmup")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(medians):
        assert len(medians) == 2 and all(m >= 0 for m in medians)
        assert calls == ["a", "b"] * (kwargs["repeats"] + kwargs["warmup"])

    expect(lambda: measure.interleaved_medians(**kwargs), named, validate)


@pytest.mark.parametrize("spoiled", [None, "fn", "n", "heads", "dtype", "device", "backward"])
@settings(FUZZ, max_examples=3)
@given(st.data())
def test_attention_memory_measures_a_small_attention_or_names_the_argument(spoiled, data):
    def attention(q, k, v):
        return torch.softmax(q @ k.transpose(-2, -1), -1) @ v

    good = {"fn": st.just(attention), "n": st.integers(1, 4), "heads": st.integers(1, 2),
            "dtype": st.sampled_from([torch.float32, torch.float64]), "device": st.just("cpu"),
            "backward": st.booleans()}
    bad = {"fn": ([None, lambda q, k, v: 3, lambda q, k, v: ()], "fn"), "n": (NOT_POSITIVE_INTS, "n must be"),
           "heads": (NOT_POSITIVE_INTS, "heads must be"), "dtype": ([torch.int64, "float32", None], "dtype"),
           "device": (["gpu", 0], "device"), "backward": (NOT_BOOLS, "backward")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(result):
        n, heads, size = kwargs["n"], kwargs["heads"], torch.finfo(kwargs["dtype"]).bits // 8
        assert result["n"] == n and result["map_bytes"] == heads * n * n * size
        assert result["saved_bytes"] >= 3 * heads * n * 64 * size and result["peak_bytes"] >= 0

    def run():  # the profiler that measures the peak on the CPU costs seconds to load: the peak is run, not measured
        original, measure.peak_memory_bytes = measure.peak_memory_bytes, lambda fn, device: fn() or 0
        try:
            return measure.attention_memory(d=64, **kwargs)
        finally:
            measure.peak_memory_bytes = original

    expect(run, named, validate)


@pytest.mark.parametrize("spoiled", [None, "device", "fn"])
@settings(FUZZ, max_examples=4)
@given(st.data())
def test_environment_and_saved_bytes_name_the_argument(spoiled, data):
    good = {"device": st.sampled_from(["cpu", torch.device("cpu")]), "fn": st.just(lambda x: (x * x).sum())}
    bad = {"device": (["gpu", 0, None, ""], "device"), "fn": ([None, 3], "fn")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)
    x = torch.ones(4, requires_grad=True)

    def validate(result):
        env, saved = result
        assert env["device_type"] == "cpu" and env["torch"] == torch.__version__
        assert saved == 4 * 4  # x * x saves x (once: the same storage twice)

    expect(lambda: (measure.environment(kwargs["device"]), measure.saved_tensor_bytes(kwargs["fn"], x)), named,
           validate)


@pytest.mark.parametrize("spoiled", [None, "dtype", "device", "scale"])
@settings(FUZZ, max_examples=10)
@given(st.data())
def test_tolerance_scales_with_the_magnitude_or_names_the_argument(spoiled, data):
    good = {"dtype": st.sampled_from([torch.float64, torch.float32, torch.float16, torch.bfloat16]),
            "device": st.sampled_from(["cpu", torch.device("cpu")]),
            "scale": st.one_of(st.floats(0, 1e6), st.integers(0, 10), st.floats(0, 9).map(torch.tensor))}
    bad = {"dtype": (["float32", torch.int64, torch.complex64, None, torch.float8_e4m3fn], "dtype"),
           "device": (["gpu", 0, None], "device"), "scale": ([NAN, INF, -1.0, True, "2", None], "scale")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(tol):
        rtol = T.RTOL[str(kwargs["dtype"]).replace("torch.", "")]
        assert tol == {"atol": rtol * max(float(kwargs["scale"]), 1.0), "rtol": rtol}

    expect(lambda: T.tolerance(**kwargs), named, validate)


@pytest.mark.parametrize("bad, named", [
    (lambda: T.least_precise(["float32"]), "dtypes must be torch dtypes"),
    (lambda: T.assert_close([1.0], torch.ones(1)), "actual must be a tensor"),
    (lambda: T.assert_close(torch.ones(1), 1.0), "expected must be a tensor"),
    (lambda: T.assert_close(torch.ones(1), torch.ones(1), device="gpu"), "device must be"),
    (lambda: T.precision("float32"), "dtype must be a torch.dtype"),
], ids=["least_precise", "actual", "expected", "device", "precision"])
def test_tolerance_helpers_name_arguments_that_are_no_tensors_or_dtypes(bad, named):
    with pytest.raises(ValueError, match=named):
        bad()
    assert T.least_precise([torch.float32, torch.bfloat16, torch.int64]) == torch.bfloat16


@pytest.mark.parametrize("spoiled", [None, "book"])
@settings(FUZZ, max_examples=6)
@given(st.data())
def test_budget_returns_one_of_two_values_of_one_type_or_names_them(spoiled, data):
    good = {"book": st.integers(1, 99), "quick": st.one_of(st.integers(1, 9), st.floats(0.5, 9))}
    bad = {"book": (["1", [1], None, True], "book and quick budgets must be of the same type")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)
    expect(lambda: budgets.budget(**kwargs), named,
           lambda got: got == (kwargs["quick"] if budgets.quick_mode() else kwargs["book"]))


@pytest.mark.parametrize("spoiled", [None, "preferred", "seed", "deterministic", "i"])
@settings(FUZZ, max_examples=8)
@given(st.data())
def test_devices_and_seeds_are_what_was_asked_or_name_the_argument(spoiled, data):
    good = {"preferred": st.sampled_from(["cpu", " CPU ", torch.device("cpu"), "auto"]), "seed": SEEDS,
            "deterministic": st.just(False), "i": st.integers(0, 3)}
    bad = {"preferred": ([0, ["cpu"], "gpu", "", "cuda:99"], "device|preferred"),
           "seed": ([True, 1.5, "0", None, 2**64, -(2**63) - 1], "seed must be an int"),
           "deterministic": (NOT_BOOLS, "deterministic must be True or False"), "i": (NOT_COUNTS, "i must be")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)
    state = torch.get_rng_state()

    def run():
        chosen = device.get_device(kwargs["preferred"])
        device.set_seed(kwargs["seed"], kwargs["deterministic"])
        drawn = torch.rand(3)
        return chosen, drawn, device.try_gpu(kwargs["i"])

    def validate(result):
        chosen, drawn, gpu = result
        assert chosen.type in device.available_devices()
        assert torch.equal(drawn, torch.rand(3, generator=torch.Generator().manual_seed(kwargs["seed"])))
        assert gpu.type in ("cuda", "cpu")

    try:
        expect(run, named, validate)
    finally:
        torch.set_rng_state(state)


@pytest.mark.parametrize("bad", [None, "model", 3, torch.zeros(2)], ids=repr)
def test_model_device_and_evaluation_mode_name_a_model_that_is_no_module(bad):
    with pytest.raises(ValueError, match="model must be a torch.nn.Module"):
        device.model_device(bad)
    with pytest.raises(ValueError, match="model must be a torch.nn.Module"), modes.evaluation_mode(bad):
        pass
    model = nn.Linear(1, 1).train()
    with modes.evaluation_mode(model):
        assert not model.training
    assert model.training and device.model_device(model) == torch.device("cpu")


# ---------------------------------------------------------------------------------------------
# checkpoints and losses
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("spoiled", [None, "path", "model", "require_config", "extra", "map_location", "into"])
@settings(FUZZ, max_examples=4)
@given(st.data())
def test_checkpoints_load_what_was_saved_or_name_the_argument(spoiled, data):
    model = nn.Linear(2, 3)
    good = {"path": st.sampled_from(["a.pt", Path("sub") / "b.pt"]), "model": st.just(model),
            "require_config": st.just(False), "extra": st.sampled_from([None, {"note": "x", "n": 1}]),
            "map_location": st.sampled_from(["cpu", torch.device("cpu"), None]), "into": st.just(nn.Linear(2, 3))}
    bad = {"path": ([None, 3, ""], "path|folder"), "model": ([None, "model", {"weight": torch.ones(1)}], "model"),
           "require_config": (NOT_BOOLS, "require_config"), "extra": (["x", [1], {"t": torch.ones(1)}], "extra|JSON"),
           "map_location": (["gpu", "", 0.5], "map_location|not available"),
           "into": (["model", nn.Linear(3, 2)], "model|expected weights that fit")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def run():
        with tempfile.TemporaryDirectory() as folder:
            path = kwargs["path"] if kwargs["path"] in (None, 3) else Path(folder) / kwargs["path"]
            checkpoints.save_checkpoint(path, kwargs["model"], extra=kwargs["extra"],
                                        require_config=kwargs["require_config"])
            return checkpoints.load_checkpoint(path, kwargs["into"], map_location=kwargs["map_location"])

    def validate(result):
        loaded, record = result
        assert all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(), model.state_dict().values()))
        assert record["extra"] == (kwargs["extra"] or {})

    expect(run, named, validate)


@pytest.mark.parametrize("spoiled", [None, "logits", "labels", "valid_len", "pad", "label_smoothing"])
@settings(FUZZ, max_examples=10)
@given(st.integers(1, 3), st.integers(1, 4), st.data())
def test_sequence_loss_averages_the_real_tokens_or_names_the_argument(spoiled, batch, steps, data):
    gen = torch.Generator().manual_seed(data.draw(SEEDS, label="draw"))
    logits = torch.randn(batch, steps, 5, generator=gen)
    labels = torch.randint(2, 5, (batch, steps), generator=gen)  # never the padding id
    good = {"logits": st.sampled_from([logits, logits.double()]), "labels": st.just(labels),
            "valid_len": st.one_of(st.none(), st.lists(st.integers(1, steps), min_size=batch, max_size=batch).map(
                torch.tensor)), "pad": st.integers(0, 1), "label_smoothing": st.sampled_from([0.0, 0.1, 1])}
    bad = {"logits": ([logits.long(), logits > 0, logits.to(torch.complex64), logits.tolist(), logits[0]], "logits"),
           "labels": ([labels.float(), labels > 2, labels + 5, labels - 10, labels[:, :1] if steps > 1 else labels[0]],
                      "labels"),
           "valid_len": ([torch.full((batch,), steps + 1), torch.full((batch,), -1), torch.ones(batch),
                          torch.ones(batch + 1, dtype=torch.long), [1] * batch], "valid_len"),
           "pad": ([None, 1.5, "0", True], "pad"), "label_smoothing": (NOT_SHARES, "label_smoothing")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(loss):
        lens = kwargs["valid_len"]
        counted = (torch.arange(steps) < lens[:, None]) if lens is not None else labels != kwargs["pad"]
        if not bool(counted.any()):
            pytest.fail("a batch without a real token was accepted")
        want = F.cross_entropy(kwargs["logits"].float()[counted], labels[counted],
                               label_smoothing=kwargs["label_smoothing"])
        assert loss.shape == () and torch.allclose(loss, want, atol=1e-6), (loss, want)

    expect(lambda: L.sequence_loss(**kwargs), named, validate, documented=())


@pytest.mark.parametrize("spoiled", [None, "inputs", "labels"])
@settings(FUZZ, max_examples=8)
@given(st.integers(1, 5), st.data())
def test_classifier_loss_is_the_cross_entropy_or_names_the_argument(spoiled, n, data):
    model = nn.Linear(2, 3)
    X = torch.randn(n, 2, generator=torch.Generator().manual_seed(data.draw(SEEDS, label="draw")))
    labels = torch.tensor(data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n), label="labels"))
    good = {"inputs": st.sampled_from([[X], (X,)]), "labels": st.just(labels)}
    bad = {"inputs": ([X, None], "inputs"),
           "labels": ([labels.float(), labels + 3, torch.full((n,), L.IGNORE_INDEX), labels[None], torch.zeros(n + 1,
                       dtype=torch.long), labels.tolist()], "labels|one row per label")}
    kwargs, named = draw_arguments(data, good, bad, spoiled)

    def validate(result):
        objective, cross_entropy, logits = result
        assert objective is cross_entropy and torch.allclose(cross_entropy, F.cross_entropy(model(X), labels))

    expect(lambda: L.classifier_loss(model, **kwargs), named, validate)


# ---------------------------------------------------------------------------------------------
# Regression tests: one per defect the fuzzing found (each failed before its fix)
# ---------------------------------------------------------------------------------------------


def test_corpus_bleu_names_hypotheses_that_are_no_list_and_a_reference_that_is_a_dict():
    for bad in (None, iter(["a b"])):
        with pytest.raises(ValueError, match="^hypotheses must be a list"):
            metrics.corpus_bleu(bad, ["a b"])
    with pytest.raises(ValueError, match="^references must be a list"):
        metrics.corpus_bleu(["a b"], None)
    with pytest.raises(ValueError, match="each entry of references must be a string or a list/tuple"):
        metrics.corpus_bleu(["a b c d"], [{"a b c d": 1}])  # its keys were the references: 100.0


def test_bleu_from_statistics_refuses_counts_no_corpus_can_have():
    counts = metrics.bleu_statistics(["a b c d"], ["a b c d"]).sum(dim=0)
    assert metrics.bleu_from_statistics(counts) == pytest.approx(100.0)
    more_matches = counts.clone()
    more_matches[:4] += 3  # was BLEU 250
    for bad in (more_matches, counts - 5, counts.float(), counts[None].repeat(2, 1), counts.tolist()):
        with pytest.raises(ValueError, match="statistics must be"):
            metrics.bleu_from_statistics(bad)


@pytest.mark.parametrize("seed", [1.5, True, "1", None, 2**70], ids=repr)
def test_bootstrap_seeds_are_named_not_torch_errors(seed):
    for call in (lambda: metrics.bootstrap_bleu(["a b"], ["a b"], 3, seed=seed),
                 lambda: metrics.bootstrap_means(torch.ones(3), 3, seed=seed),
                 lambda: metrics.paired_bootstrap_bleu([["a"]], [["a"]], ["a"], 3, seed=seed),
                 lambda: evaluate.draw_gaps([torch.arange(4)], 2, seed)):
        with pytest.raises(ValueError, match=r"^seed must be an integer seed in \[-2\*\*63, 2\*\*64\)"):
            call()
    assert metrics.bootstrap_bleu(["a b"], ["a b"], 3, seed=np.int64(-4)).bleu == 0.0  # NumPy and negative seeds


def test_confidence_that_is_no_number_is_named():
    with pytest.raises(ValueError, match="confidence must be between 0 and 1, got '0.9'"):
        metrics.bootstrap_bleu(["a"], ["a"], 3, confidence="0.9")  # was TypeError: '<' not supported


def test_bootstrap_means_refuses_complex_samples_and_samples_without_columns():
    with pytest.raises(ValueError, match="samples must be a real tensor"):
        metrics.bootstrap_means(torch.tensor([1 + 5j, 2 + 0j]))  # the imaginary part was dropped with a warning
    with pytest.raises(ValueError, match="at least one column"):
        metrics.bootstrap_means(torch.ones(3, 0))  # was RuntimeError from quantile()


def test_group_references_names_sources_that_are_no_strings():
    with pytest.raises(ValueError, match="sources must be strings"):
        metrics.group_references(["a"], ["b"], [["x"]])  # was TypeError: unhashable type
    with pytest.raises(ValueError, match="hypotheses must be a list"):
        metrics.group_references(None, ["b"], ["x"])


def test_bleu_by_length_refuses_lengths_in_no_bucket_rather_than_dropping_their_pairs():
    for lengths in ([float("nan")], [1.5], ["3"], [-1]):
        with pytest.raises(ValueError, match="lengths must be integers >= 0"):
            metrics.bleu_by_length(["a"], ["a"], lengths, [(1, None)])  # NaN and 1.5 made [] silently
        with pytest.raises(ValueError, match="lengths must be integers >= 0"):
            metrics.paired_bleu_by_length([["a"]], [["a"]], ["a"], lengths, [(1, None)], 3)
    with pytest.raises(ValueError, match="num_samples must be a positive integer"):
        metrics.bleu_by_length(["a"], ["a"], [0], [(1, None)], num_samples=0)  # no pair in a bucket: was []
    assert metrics.bleu_by_length(["a b"], ["a b"], torch.tensor([2]), [(1, None)])[0]["pairs"] == 1


def test_paired_bootstrap_and_d2l_bleu_name_arguments_of_the_wrong_type():
    with pytest.raises(ValueError, match="^references must be a list"):
        metrics.paired_bootstrap_bleu([["a"]], [["a"]], None)  # was TypeError: no len()
    for bad in (["a"], None):
        with pytest.raises(ValueError, match="pred_seq must be a string"):
            metrics.bleu(bad, "a", 2)  # was AttributeError
    with pytest.raises(ValueError, match="label_seq must be a string"):
        metrics.bleu("a", 3, 2)


def test_alignment_error_rate_reads_links_as_pairs_of_ints():
    for bad in ("ab", [0, 1], None, [(0, 0.5)]):
        with pytest.raises(ValueError, match="^predicted must"):
            metrics.alignment_error_rate(bad, [(0, 0)])  # "ab" and [0, 1] scored silently, None a TypeError
    assert metrics.alignment_error_rate([[0, 0], [1, 1]], [(0, 0), (1, 1)]) == 0.0  # lists are pairs too


def test_attention_alignment_refuses_nan_weights_empty_rows_and_fractional_indices():
    weights = torch.tensor([[float("nan"), 1.0], [0.2, 0.8]])
    with pytest.raises(ValueError, match="attention weights must be finite"):
        metrics.attention_alignment(weights)  # linked row 0 to its NaN
    with pytest.raises(ValueError, match="at least one source step"):
        metrics.attention_alignment(torch.zeros(2, 0))  # was IndexError from argmax
    with pytest.raises(ValueError, match="src_len must be an integer, got float 1.5"):
        metrics.attention_alignment(torch.eye(2), 1.5)  # was read as 1
    with pytest.raises(ValueError, match="targets must be an integer"):
        metrics.attention_alignment(torch.eye(2), None, [0.5])  # was TypeError
    assert metrics.attention_alignment(torch.eye(2), np.int64(1), [torch.tensor(0), 1]) == {(0, 0)}


def test_attention_aer_names_link_sets_and_lengths_that_do_not_fit():
    matrices = [torch.eye(2), torch.eye(2)]
    with pytest.raises(ValueError, match="one entry of possible per attention matrix"):
        metrics.attention_aer(matrices, [[(0, 0)], [(1, 1)]], [[(0, 0)]])  # was IndexError
    with pytest.raises(ValueError, match="one entry of src_valid_lens per attention matrix"):
        metrics.attention_aer(matrices, [[(0, 0)], [(1, 1)]], None, [1])
    with pytest.raises(ValueError, match="src_valid_lens must be an integer"):
        metrics.attention_aer(torch.eye(2), [(0, 0)], None, 1.5)  # was truncated to 1
    with pytest.raises(ValueError, match=r"sure \(sentence 0\) must hold \(source_index, target_index\) pairs"):
        metrics.attention_aer(torch.eye(2), [0, 1])  # was TypeError


def test_semeval_macro_f1_refuses_one_label_string_and_a_matrix_of_labels():
    with pytest.raises(ValueError, match="predictions must be a list or 1-D tensor of labels, got str"):
        metrics.semeval_macro_f1("Other", ["Other"])  # was read letter by letter
    with pytest.raises(ValueError, match="predictions must be a 1-D tensor of label indices"):
        metrics.semeval_macro_f1(torch.zeros(2, 2, dtype=torch.long), torch.zeros(4, dtype=torch.long))  # flattened


def test_evidence_hit_rate_refuses_fractional_evidence_and_nan_weights():
    weights = torch.tensor([[0.0, 1.0]])
    with pytest.raises(ValueError, match="integer evidence"):
        metrics.evidence_hit_rate(weights, torch.tensor([0.5]))  # was 0.0: never a hit
    with pytest.raises(ValueError, match="weights must be finite"):
        metrics.evidence_hit_rate(torch.tensor([[float("nan"), 1.0]]), torch.tensor([0]))  # was 1.0
    with pytest.raises(ValueError, match="floating-point weights"):
        metrics.evidence_hit_rate([[0.0, 1.0]], [1])  # was AttributeError


def test_steps_to_reach_refuses_a_nan_level_and_a_history_that_is_none():
    history = History(eval_steps=[10], evals={"val_accuracy": [0.9]})
    with pytest.raises(ValueError, match="level must be a number"):
        metrics.steps_to_reach(history, float("nan"))  # was None: "never reached"
    with pytest.raises(ValueError, match="history must be the History"):
        metrics.steps_to_reach(None, 0.5)
    assert metrics.steps_to_reach(history, 0.5) == 10


@pytest.mark.parametrize("bad, shown", [("123", "str '123'"), ([True, False], "bool True"), (["1", "2"], "str '1'"),
                                        ([1j], "complex"), (torch.ones(2, 2), "Tensor"), (3.0, "float 3.0")],
                         ids=["string", "bools", "strings", "complex", "matrix", "number"])
def test_spread_refuses_what_is_no_list_of_real_numbers(bad, shown):
    with pytest.raises(ValueError, match=rf"^values must be .*got {shown}"):
        metrics.spread(bad)  # "123" was Spread(2.0, 1.0, 3.0), bools and strings were counted
    assert metrics.spread(np.array([1.0, 3.0])) == (2.0, 1.0, 3.0)
    assert metrics.spread([torch.tensor(1.0), np.float32(3.0), 2]) == (2.0, 1.0, 3.0)


def test_kneser_ney_refuses_a_context_token_it_never_counted():
    lm = _fitted_bigram()
    with pytest.raises(ValueError, match="context holds the token 'z', which is not in the vocabulary"):
        lm.prob("a", ["z"])  # was the probability after an unseen context
    with pytest.raises(ValueError, match="context holds the token tensor"):
        lm.next_word_probs(torch.tensor([0, 1]))  # tensor elements are never counted tokens
    with pytest.raises(ValueError, match="context must be a sequence of tokens, got NoneType"):
        lm.logprob("a", None)  # was TypeError
    assert lm.prob("a", [BOUNDARY]) == lm.prob("a", [])  # the boundary token is a context


def test_kneser_ney_names_unhashable_and_flat_inputs():
    with pytest.raises(ValueError, match="vocab must be a collection of hashable tokens"):
        KneserNeyLM(2, [["a"]])  # was TypeError: unhashable type
    with pytest.raises(ValueError, match=r"sequences must be a list of token sequences \(lists of tokens\)"):
        KneserNeyLM(2, [1, 2]).fit([1, 2])  # was TypeError: 'int' object is not iterable
    with pytest.raises(ValueError, match=r"token \['a'\] is not in the vocabulary"):
        KneserNeyLM(2, ["a"]).fit([[["a"]]])
    with pytest.raises(ValueError, match=r"word \['a'\] is not in the vocabulary"):
        _fitted_bigram().prob(["a"])
    with pytest.raises(ValueError, match="sequence must be a sequence of tokens"):
        _fitted_bigram().sequence_logprobs(None)
    with pytest.raises(ValueError, match="left must be a token"):
        NeighbourGuesser([["a", "b"]]).guess(["a"], None)


@pytest.mark.parametrize("bad", [True, "0.5"], ids=repr)
def test_modified_kneser_ney_refuses_discounts_that_are_bools_or_strings(bad):
    with pytest.raises(ValueError, match=r"with modified=True, discounts must be 1 triples"):
        KneserNeyLM(1, ["a"], [(bad, 1, 1)], modified=True)  # True was D1 = 1.0


def test_hidden_token_scores_name_mask_ids_and_banned_tokens_outside_the_vocabulary():
    sequence = torch.tensor([0, 1, 2, 3])
    for mask_id in (1.5, True, -1):
        with pytest.raises(ValueError, match="mask_id must be a non-negative integer"):
            evaluate.hidden_token_scores(_LM, sequence, 3, mask_id)  # 1.5 and True were token 1
    with pytest.raises(ValueError, match=r"never must be a collection of token ids \(ints >= 0\)"):
        evaluate.hidden_token_scores(_LM, sequence, 3, 0, never=[-1])  # banned the last token
    with pytest.raises(ValueError, match=r"never must hold token ids in \[0, 6\) and leave some token possible"):
        evaluate.hidden_token_scores(_LM, sequence, 3, 0, never=range(6))  # every log-probability was NaN
    guesses, logprobs = evaluate.hidden_token_scores(_LM, sequence, 3, 0, positions=[])  # was a ValueError
    assert guesses.shape == logprobs.shape == (0,)


def test_fill_gaps_refuses_a_gap_of_no_sequence_rather_than_returning_uninitialised_memory():
    for gap in ((3, 1), (-1, 1), 1, (0, 1.0)):
        with pytest.raises(ValueError, match=r"gaps must be \(sequence, position\) pairs of ints"):
            evaluate.fill_gaps(_LM, [torch.arange(4)], [gap], 3, 0)


def test_running_text_functions_name_one_tensor_given_for_a_list_of_texts():
    stream = torch.arange(6)
    for call in (lambda: evaluate.position_windows(stream, 2), lambda: evaluate.losses_by_window(_LM, stream, 2),
                 lambda: evaluate.draw_gaps(stream, 2, 0)):
        with pytest.raises(ValueError, match=r"sequences must be a list .* got one tensor \(6,\)"):
            call()  # was TypeError: len() of a 0-d tensor
    assert evaluate.losses_by_window(_LM, [stream.tolist()], 2).shape == (2, 2)  # lists, as documented


@pytest.mark.parametrize("stream", [torch.tensor([0, 1, 1, 0]) > 0, torch.arange(4).to(torch.complex64)],
                         ids=["bool", "complex"])
def test_token_streams_of_bools_or_complex_numbers_are_named(stream):
    with pytest.raises(ValueError, match="sequence must be a 1-D integer tensor"):
        evaluate.sliding_window_logprobs(_LM, stream, 2)  # bool: RuntimeError in the embedding
    with pytest.raises(ValueError, match="stream must be a 1-D integer tensor"):
        windows.random_windows(stream, 2, 2)  # was returned as windows


def test_predict_and_accuracy_name_one_tensor_given_for_the_inputs():
    model, X = nn.Linear(3, 4), torch.zeros(5, 3)
    with pytest.raises(ValueError, match=r"inputs must be a sequence of tensors, got one tensor \(5, 3\): pass \(X,\)"):
        evaluate.predict(model, X)  # its rows became five arguments
    with pytest.raises(ValueError, match=r"one row per example each, got \[5, 4\] rows"):
        evaluate.predict(nn.Bilinear(3, 3, 2), [X, X[:4]])
    with pytest.raises(ValueError, match="labels must be integer class indices, got dtype torch.float32"):
        evaluate.accuracy(model, (X,), torch.zeros(5))  # was compared as floats


def test_translate_names_sentences_data_and_device_of_the_wrong_kind():
    corpus, model = _tiny_translator()
    with pytest.raises(ValueError, match="sentences must be a list of strings or of token lists"):
        evaluate.translate(model, [1, 2], corpus)  # was AttributeError: 'int' object has no attribute 'lower'
    with pytest.raises(ValueError, match="data must be the TranslationData"):
        evaluate.translate(model, ["march 3"], None)
    with pytest.raises(ValueError, match="device must be a torch.device or a device name"):
        evaluate.translate(model, ["march 3"], corpus, device="gpu")  # was RuntimeError from torch
    with pytest.raises(ValueError, match="beam_size must be a positive integer"):
        evaluate.translate(model, [], corpus, beam_size=0)  # no sentence: was []


def test_bleu_report_checks_its_arguments_before_decoding():
    corpus, model = _tiny_translator()
    calls = []
    original, evaluate.translate_split = evaluate.translate_split, lambda *a, **k: calls.append(1)
    try:
        for kwargs, named in [({"keep_hypotheses": "no"}, "keep_hypotheses"), ({"seed": 1.5}, "seed"),
                              ({"buckets": "x"}, "buckets"), ({"num_samples": 0}, "num_samples")]:
            with pytest.raises(ValueError, match=named):
                evaluate.bleu_report(model, corpus, **kwargs)
    finally:
        evaluate.translate_split = original
    assert calls == []


def test_copy_accuracy_and_forced_attention_name_what_is_not_a_batch_or_a_translator():
    with pytest.raises(ValueError, match="batch must be the RepeatedSegments"):
        evaluate.copy_accuracy(_LM, None)  # was AttributeError
    with pytest.raises(ValueError, match="NoneType has no attention weights"):
        evaluate.forced_attention(None, _tiny_translator()[0])


@pytest.mark.parametrize("kwargs, named", [
    ({"tokens": "hello"}, "tokens must be a list"), ({"reserved_tokens": "<pad>"}, "reserved_tokens must be a list"),
    ({"tokens": [["a", "b"], "cd"]}, "not a mix of both"), ({"tokens": [1, "a"]}, "hashable tokens of one kind"),
    ({"min_freq": float("nan")}, "min_freq must be a non-negative integer"),
    ({"min_freq": "1"}, "min_freq must be a non-negative integer")], ids=lambda v: str(v)[:30])
def test_vocab_refuses_strings_mixes_and_counts_that_are_no_ints(kwargs, named):
    with pytest.raises(ValueError, match=named):
        vocab.Vocab(**{"tokens": ["a"], **kwargs})  # letters as tokens, or every token dropped (NaN)


def test_build_array_refuses_sentences_as_strings_and_a_vocab_without_padding():
    with pytest.raises(ValueError, match="sentences must be a list of token lists"):
        batching.build_array(["the cat"], _VOCAB, 4)  # was one token per letter
    with pytest.raises(ValueError, match=r"vocab must hold the reserved tokens \['<pad>', '<eos>'\]"):
        batching.build_array([["the"]], vocab.Vocab(["the"]), 4)  # valid_len counted <unk> as padding
    with pytest.raises(ValueError, match="is_tgt must be True or False"):
        batching.build_array([["the"]], _VOCAB, 4, is_tgt="no")


def test_pad_or_truncate_refuses_negative_or_boolean_lengths_and_strings():
    with pytest.raises(ValueError, match="num_steps must be a non-negative integer, got -1"):
        batching.pad_or_truncate(["a", "b"], -1)  # was ['a']
    with pytest.raises(ValueError, match="tokens must be a list of tokens, got a string"):
        batching.pad_or_truncate("ab", 3)
    assert batching.pad_or_truncate(["a"], 0) == [] and batching.pad_or_truncate(["a"], 2) == ["a", "<pad>"]


def test_bucket_batch_sampler_refuses_fractional_lengths_and_seeds():
    with pytest.raises(ValueError, match="lengths must be integers, got float 1.5 at index 0"):
        batching.BucketBatchSampler([1.5, 1.2], 2)  # both were length 1
    with pytest.raises(ValueError, match="lengths must be integers, got float nan"):
        batching.BucketBatchSampler([float("nan")], 2)
    with pytest.raises(ValueError, match="seed must be an integer seed"):
        batching.BucketBatchSampler([1], 2, seed="a")  # was TypeError when iterated
    with pytest.raises(ValueError, match="epoch must be a non-negative integer"):
        batching.BucketBatchSampler([1], 2).batches("x")


def test_random_windows_names_a_generator_that_is_not_one():
    with pytest.raises(ValueError, match="generator must be a torch.Generator or None, got int"):
        windows.random_windows(torch.arange(9), 2, 2, generator=1)  # was a TypeError of torch.randint


@pytest.mark.parametrize("seed", [None, 1.5, "x"], ids=repr)
def test_split_by_source_refuses_a_seed_that_would_not_repeat_the_split(seed):
    corpus = text.ParallelCorpus([["a"], ["b"], ["c"]], [["x"], ["y"], ["z"]])
    with pytest.raises(ValueError, match="seed must be an integer seed"):
        splits.split_by_source(corpus, 0, 1, seed=seed)  # None drew another split on every call


def test_split_helpers_refuse_negative_totals_and_lengths_that_are_no_ints():
    with pytest.raises(ValueError, match="total must be a non-negative integer"):
        splits.equal_shares(-5, 2)  # was [-2, -3]
    with pytest.raises(ValueError, match="parts must be a positive integer"):
        splits.equal_shares(5, 0)  # was []
    with pytest.raises(ValueError, match="lengths must be a list of integers"):
        splits.merge_sparse_buckets(None, [(1, None)], 2)
    with pytest.raises(ValueError, match="corpus must be a ParallelCorpus"):
        splits.split_by_source(None, 0, 1)  # was AttributeError


def test_parallel_corpus_refuses_strings_and_indices_outside_it():
    with pytest.raises(ValueError, match="src must be a list of token lists"):
        text.ParallelCorpus("ab", "cd")  # was accepted: two sentences of one letter
    corpus = text.ParallelCorpus([["a"], ["b"]], [["x"], ["y"]])
    for bad in ([-1], [2], [0.0], [True]):
        with pytest.raises(ValueError, match=r"indices must be integers in \[0, 2\)"):
            corpus.subset(bad)  # -1 was the last pair, True the second
    with pytest.raises(ValueError, match="text must be a string"):
        text.parse_pairs(b"a\tb\n")
    with pytest.raises(ValueError, match="sentence must be a string"):
        text.tokenize(None)


def test_load_translation_data_checks_sizes_and_seeds_before_reading():
    for kwargs, named in [({"num_steps": 0}, "num_steps must be a positive integer"),
                          ({"num_steps": True}, "num_steps"), ({"min_freq": float("nan")}, "min_freq"),
                          ({"seed": 1.5}, "seed"), ({"verbose": "no"}, "verbose")]:
        with pytest.raises(ValueError, match=named):
            loader.load_translation_data("dates", num_examples=20, **kwargs)  # each was accepted


def test_translation_data_refuses_a_single_string_and_unhashable_splits():
    corpus, _ = _tiny_translator()
    with pytest.raises(ValueError, match="src_sentences must be a list of sentences"):
        corpus.build("march 3 , 2021")  # was one sentence per character
    with pytest.raises(ValueError, match="split must be one of"):
        corpus.arrays(["train"])  # was TypeError: unhashable type
    with pytest.raises(ValueError, match="min_length must be a non-negative integer"):
        corpus.unseen_pairs("x")
    with pytest.raises(ValueError, match="seed must be an integer seed"):
        corpus.dataloader("train", 2, seed=1.5, bucket=False)  # was RuntimeError of torch


def test_relation_corpus_names_fractional_and_boolean_settings():
    for kwargs, named in [({"filler": 1.5}, "filler must be a non-negative integer"), ({"filler": True}, "filler"),
                          ({"distractor_prob": "0.5"}, "distractor_prob must lie in"),
                          ({"distractor_prob": True}, "distractor_prob"), ({"seed": None}, "seed"),
                          ({"distractors": 2.0}, "distractors must be 1, 2 or 3")]:
        with pytest.raises(ValueError, match=named):
            relations.make_relation_corpus(2, 0, 0, **kwargs)
    with pytest.raises(ValueError, match="rng must be a random.Random"):
        relations.make_relation_example(None, "Other")
    with pytest.raises(ValueError, match="vocab must be a Vocab with '<pad>'"):
        relations.relation_tensors(_RELATIONS, vocab.Vocab(["the"]))  # was KeyError


def test_reviews_name_sentences_given_as_strings_and_settings_of_the_wrong_type():
    with pytest.raises(ValueError, match=r"documents\[0\] must be a list of sentences, each a list of words"):
        reviews.documents_to_tensors([["the film was good"]], reviews.review_vocab(_REVIEWS))  # letters as words
    with pytest.raises(ValueError, match="max_sentences must be a non-negative integer"):
        reviews.documents_to_tensors(_REVIEWS, reviews.review_vocab(_REVIEWS), max_sentences=8.5)
    with pytest.raises(ValueError, match="distractor_rate must be a number"):
        reviews.make_reviews(2, distractor_rate="0.5")  # was TypeError
    with pytest.raises(ValueError, match="seed must be an integer seed"):
        reviews.make_reviews(2, seed=None)  # new reviews on every call
    with pytest.raises(ValueError, match="sentences must be a list of sentences"):
        reviews.review_label(None)


def test_digit_canvases_name_seeds_numpy_refuses_and_layouts_outside_the_data():
    for seed in (-1, 1.5, None):
        with pytest.raises(ValueError, match=r"seed must be an integer seed in \[0, 2\*\*64\)"):
            digits.canvas_layout(2, seed)  # -1 and 1.5 were errors of NumPy's, None new canvases each call
    with pytest.raises(ValueError, match="noise must be a standard deviation >= 0"):
        digits.make_digit_canvases(1, 0, noise=True)  # was noise 1.0
    assert digits.make_digit_canvases(1, 0, noise=np.float32(0.1))[0].shape == (1, 1, 30, 30)  # was refused
    ids, frames, _ = digits.canvas_layout(1, 0, 2)
    with pytest.raises(ValueError, match="digit_ids must be indices into load_digits"):
        digits.draw_canvases(ids - 2000, frames, 2)  # negative ids counted from the end
    with pytest.raises(ValueError, match="frames must be 0"):
        digits.draw_canvases(ids, frames + 7, 2)  # drawn as a broken frame


def test_format_date_refuses_dates_whose_two_digit_year_would_be_ambiguous():
    with pytest.raises(ValueError, match="date must be a datetime.date from 1950-01-01 to 2049-12-31"):
        dates.format_date(datetime.date(1900, 1, 1), "slashes")  # was '01 / 01 / 00', which means 2000
    with pytest.raises(ValueError, match="tokens must be a list of strings"):
        dates.iso_date(None)
    with pytest.raises(ValueError, match="seed must be an integer seed"):
        dates.generate_dates(1, 1.5)
    with pytest.raises(ValueError, match="unknown bundled corpus"):
        bundled.load_bundled(["dates"])  # was TypeError: unhashable type


def test_download_refuses_an_infinite_timeout_and_a_url_that_is_none():
    with pytest.raises(ValueError, match="timeout must be a finite number of seconds > 0"):
        cache.download("http://example.invalid/x", "0", tempfile.gettempdir(), timeout=INF)
    with pytest.raises(ValueError, match="url must be a non-empty string"):
        cache.download(None, "0")  # was AttributeError


def test_tokenized_text_decode_refuses_ids_outside_the_vocabulary():
    tokenized = subwords.TokenizedText("characters", 5, [], [], [], {"train": [], "val": [], "test": []},
                                       lambda s: [], lambda ids: "".join("xy"[i - 3] for i in ids))
    for ids in ([-1, 3], [5], [3.0]):
        with pytest.raises(ValueError, match=r"ids must be a list or 1-D tensor of token ids in \[0, 5\)"):
            tokenized.decode(ids)  # -1 was dropped silently, 5 an IndexError
    assert tokenized.decode(torch.tensor([1, 3, 4])) == "xy"
    with pytest.raises(ValueError, match="split must be 'train', 'val' or 'test'"):
        tokenized.num_tokens("training")  # was AttributeError
    with pytest.raises(ValueError, match="total_nats must be a finite number >= 0"):
        subwords.bits_per_character(True, 3)  # was 1 nat


def test_load_running_text_refuses_reserved_tokens_given_as_one_string():
    with pytest.raises(ValueError, match="reserved_tokens must include '<bos>'"):
        moby_dick.load_running_text(reserved_tokens="<bos>")  # passed the test as a substring, then letters


def test_stored_results_name_records_and_models_of_the_wrong_kind():
    record = _record({"A": [10.0], "B": [20.0]})
    with pytest.raises(ValueError, match="models must be a non-empty list of model names"):
        stored_results.summarize_runs(record, "A")  # letters as model names
    with pytest.raises(ValueError, match="models must be a non-empty list"):
        stored_results.summarize_runs(record, [])  # was every model
    with pytest.raises(ValueError, match="record must be a stored comparison"):
        stored_results.summarize_runs(None)
    broken = json.loads(json.dumps(record))
    broken["runs"][0]["bleu"] = "x"
    with pytest.raises(ValueError, match=r"needs numbers in \['bleu'\]"):
        stored_results.check_translator_results(broken)  # was TypeError: '<=' not supported


def test_format_variants_refuses_variants_whose_seeds_do_not_pair():
    base = [{"seed": 0, "x": 1.0}, {"seed": 1, "x": 2.0}]
    with pytest.raises(ValueError, match=r"every variant needs the seeds of 'base' in the same order, \[0, 1\]"):
        stored_results.format_variants({"base": base, "other": base[::-1]}, "x", 1)  # paired seed 0 with seed 1
    with pytest.raises(ValueError, match="every variant needs the seeds"):
        stored_results.format_variants({"base": base, "other": base[:1]}, "x", 1)  # dropped the unpaired seed
    with pytest.raises(ValueError, match="runs must be a non-empty dict"):
        stored_results.format_variants({}, "x", 1)  # was StopIteration
    with pytest.raises(ValueError, match="digits must be a non-negative integer"):
        stored_results.format_variants({"base": base}, "x", -1)


def test_loglog_slope_refuses_points_that_do_not_pair_or_have_no_logarithm():
    with pytest.raises(ValueError, match="xs and ys must be equally many, got 3 and 2"):
        measure.loglog_slope([1, 2, 3], [1, 4])  # zip dropped the third point: a slope of 2 read as 0.78
    for xs, named in [([0, 2], "xs must be"), ([1], "xs must be"), ([2, 2], "xs must not all be equal"),
                      ([1, float("nan")], "xs must be")]:
        with pytest.raises(ValueError, match=named):
            measure.loglog_slope(xs, [1, 4][:len(xs)] if len(xs) > 1 else [1])


def test_interleaved_medians_refuse_no_repeat_and_a_function_not_in_a_list():
    with pytest.raises(ValueError, match="repeats must be a positive integer, got 0"):
        measure.interleaved_medians([lambda: None], repeats=0)  # was StatisticsError: no median for empty data
    with pytest.raises(ValueError, match="fns must be a list of functions"):
        measure.interleaved_medians(lambda: None)  # was TypeError: 'function' object is not iterable
    with pytest.raises(ValueError, match="device must be a torch.device or a device name"):
        measure.interleaved_medians([lambda: None], device="gpu")


def test_attention_memory_names_sizes_dtypes_and_outputs_of_the_wrong_kind():
    def attention(q, k, v):
        return q

    for kwargs, named in [({"n": True}, "n must be a positive integer"), ({"n": -1}, "n must be"),
                          ({"dtype": torch.int64}, "dtype must be a floating-point"),
                          ({"device": "gpu"}, "device must be")]:
        with pytest.raises(ValueError, match=named):
            measure.attention_memory(attention, **{"n": 2, **kwargs})  # True was n = 1, the others torch errors
    with pytest.raises(ValueError, match=r"fn\(q, k, v\) must return a tensor"):
        measure.attention_memory(lambda q, k, v: 3, 2)  # was AttributeError: 'int' object has no attribute 'sum'
    with pytest.raises(ValueError, match="device must be"):
        measure.environment(None)


def test_tolerance_checks_the_device_and_scale_for_every_dtype():
    with pytest.raises(ValueError, match="device must be a torch.device or a device name"):
        T.tolerance(torch.float64, device="gpu")  # was accepted for every dtype but float32
    for scale in (True, "2", None):
        with pytest.raises(ValueError, match="scale must be a finite magnitude"):
            T.tolerance(torch.float32, scale=scale)  # True and "2" were read as numbers


def test_devices_and_seeds_name_arguments_of_the_wrong_kind():
    with pytest.raises(ValueError, match="preferred must be a device name"):
        device.get_device(0)  # was AttributeError: 'int' object has no attribute 'strip'
    for i in (-1, 1.5, True):
        with pytest.raises(ValueError, match="i must be a non-negative integer"):
            device.try_gpu(i)  # -1 was RuntimeError 'cuda:-1', 1.5 and True the CPU
    with pytest.raises(ValueError, match=r"seed must be an int in \[-2\*\*63, 2\*\*64\)"):
        device.set_seed(2**70)  # was "Overflow when unpacking long long"
    with pytest.raises(ValueError, match="deterministic must be True or False"):
        device.set_seed(0, "no")  # was truthy: deterministic algorithms switched on


def test_checkpoints_name_a_path_a_model_and_a_map_location_of_the_wrong_kind(tmp_path):
    path = tmp_path / "linear.pt"
    checkpoints.save_checkpoint(path, nn.Linear(2, 2), require_config=False)
    absent = next(kind for kind in ("cuda", "mps", "xpu") if kind not in device.available_devices())
    with pytest.raises(checkpoints.CheckpointError, match=f"map_location '{absent}' is not available here"):
        checkpoints.load_checkpoint(path, nn.Linear(2, 2), map_location=absent)  # was "a torch file that cannot be"
    with pytest.raises(checkpoints.CheckpointError, match="map_location must be a device, its name, a dict or a"):
        checkpoints.load_checkpoint(path, nn.Linear(2, 2), map_location=0.5)  # was "a torch file that cannot be loaded"
    with pytest.raises(checkpoints.CheckpointError, match="model must be a torch.nn.Module or None, got str"):
        checkpoints.load_checkpoint(path, "model")  # was AttributeError
    with pytest.raises(checkpoints.CheckpointError, match="found a folder; give the checkpoint's file"):
        checkpoints.load_checkpoint(tmp_path)  # was IsADirectoryError
    with pytest.raises(ValueError, match="require_config must be True or False"):
        checkpoints.save_checkpoint(path, nn.Linear(2, 2), require_config="no")


def test_sequence_loss_refuses_nan_smoothing_complex_logits_and_lengths_past_the_steps():
    logits, labels = torch.randn(2, 3, 5), torch.tensor([[1, 2, 3], [4, 1, 0]])
    with pytest.raises(ValueError, match=r"label_smoothing must be a number in \[0, 1\], got nan"):
        L.sequence_loss(logits, labels, label_smoothing=float("nan"))  # was the loss without smoothing
    with pytest.raises(ValueError, match="expected floating-point logits and integer labels"):
        L.sequence_loss(logits.to(torch.complex64), labels)  # the imaginary part was dropped
    with pytest.raises(ValueError, match=r"valid_len must lie in \[0, 3\]"):
        L.sequence_loss(logits, labels, valid_len=torch.tensor([9, 2]))  # was read as 3
    with pytest.raises(ValueError, match="valid_len must be an integer tensor"):
        L.sequence_loss(logits, labels, valid_len=torch.tensor([1.5, 2.0]))  # was accepted
    with pytest.raises(ValueError, match=r"labels must be class indices in \[0, 5\)"):
        L.sequence_loss(logits, labels + 5)  # was IndexError: Target 5 is out of bounds
    with pytest.raises(ValueError, match="pad must be the padding token's id"):
        L.sequence_loss(logits, labels, pad=None)  # was TypeError from masked_fill


def test_classifier_loss_refuses_labels_that_would_make_it_nan_or_read_as_probabilities():
    model, X = nn.Linear(2, 3), torch.zeros(4, 2)
    with pytest.raises(ValueError, match=r"labels must be class indices in \[0, 3\), got -100..-100"):
        L.classifier_loss(model, [X], torch.full((4,), L.IGNORE_INDEX))  # was a NaN loss
    with pytest.raises(ValueError, match="labels must be a 1-D integer tensor"):
        L.classifier_loss(model, [X], torch.zeros(4, 3))  # was read as class probabilities: loss -0.0
    with pytest.raises(ValueError, match=r"inputs must be a list or tuple of tensors \(one input X: \(X,\)\)"):
        L.classifier_loss(model, X, torch.zeros(4, dtype=torch.long))  # its rows became arguments


def test_peak_memory_names_what_is_no_function_or_device_before_profiling():
    with pytest.raises(ValueError, match="fn must be a function"):
        measure.peak_memory_bytes(None, "cpu")  # was TypeError: 'NoneType' object is not callable, inside the profiler
    with pytest.raises(ValueError, match="device must be a torch.device or a device name"):
        measure.peak_memory_bytes(lambda: None, None)  # was TypeError from torch.device()


def test_the_data_folders_are_paths_or_none():
    cache_dir = paths.default_cache_dir()
    assert isinstance(cache_dir, Path) and cache_dir.name in ("cache", "attn_utils")
    data_dir = paths.repository_data_dir()
    assert data_dir is None or (data_dir.is_dir() and cache_dir == data_dir / "cache")


def test_halfway_step_refuses_values_on_no_side_of_the_middle():
    with pytest.raises(ValueError, match=r"values must be finite, got \[0.1, nan\]"):
        metrics.halfway_step([1, 2], [0.1, NAN])  # was StopIteration
    with pytest.raises(ValueError, match="values must be real numbers, got str '1'"):
        metrics.halfway_step([1, 2], ["1", "2"])  # was read as numbers
    assert metrics.halfway_step([1, 2, 3], [0.0, 0.2, 1.0]) == 3
