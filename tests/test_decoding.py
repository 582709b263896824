"""Greedy decoding and beam search, on hand-built models whose best sequences are known."""

from __future__ import annotations

import math
import random

import pytest
import torch

from attn_utils.decoding import beam_search, decode, greedy_decode
from attn_utils.evaluate import bleu_report, evaluate_bleu, translate, translate_split
from attn_utils.metrics import (
    bleu_by_length,
    bootstrap_bleu,
    corpus_bleu,
    group_references,
    paired_bleu_by_length,
    paired_bootstrap_bleu,
)
from attn_utils.seq2seq import Decoder, Encoder, EncoderDecoder, make_seq2seq

PAD, BOS, EOS, UNK, A, B = range(6)


pytestmark = pytest.mark.usefixtures("one_thread")


class _PassEncoder(Encoder):
    def forward(self, X, *args):
        return X


class BigramDecoder(Decoder):
    """A fixed "language model": the next token's probabilities depend on the previous token only.

    Its attention puts all weight on source position ``previous_token % source_steps``, so the
    attention returned for a decoded sequence shows which path the search followed.
    """

    state_batch_dims = (0,)

    def __init__(self, table: dict[int, dict[int, float]]):
        super().__init__()
        probs = torch.zeros(6, 6, dtype=torch.float64)
        for prev, row in table.items():
            for token, p in row.items():
                probs[prev, token] = p
        self.register_buffer("log_probs", probs.log())  # zeros give -inf: impossible tokens
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def init_state(self, src, *args):
        return (torch.zeros(src.shape, dtype=torch.float64),)  # (batch, source_steps)

    def forward(self, X, state):
        logits = self.log_probs[X]  # (batch, steps, vocab)
        positions = X % state[0].shape[1]  # (batch, steps)
        self.attention_weights = torch.nn.functional.one_hot(positions, state[0].shape[1]).double()
        return logits, state


def bigram_model(table):
    return EncoderDecoder(_PassEncoder(), BigramDecoder(table))


SRC = torch.full((1, 7), 4)
# Greedy takes A (0.5) and then <eos> (0.4): P = 0.2. The best sequence is B <eos>: 0.4 * 0.9 = 0.36.
GREEDY_TRAP = {BOS: {A: 0.5, B: 0.4, EOS: 0.1}, A: {EOS: 0.4, A: 0.3, B: 0.3},
               B: {EOS: 0.9, A: 0.05, B: 0.05}, EOS: {EOS: 1.0}}


def test_greedy_is_suboptimal_and_beam_two_finds_the_best():
    model = bigram_model(GREEDY_TRAP)
    greedy = greedy_decode(model, SRC, None, BOS, EOS, max_len=10)
    assert greedy.tokens == [[A]]
    assert greedy.scores[0] == pytest.approx(math.log(0.5 * 0.4))
    beam = beam_search(model, SRC, None, BOS, EOS, max_len=10, beam_size=2)
    assert beam.tokens == [[B]]
    assert beam.scores[0] == pytest.approx(math.log(0.4 * 0.9))
    # Attention rows: one per emitted token (<eos> included), at position previous_token % 7.
    assert beam.attention[0].argmax(dim=-1).tolist() == [BOS, B]
    assert greedy.attention[0].argmax(dim=-1).tolist() == [BOS, A]


def test_length_normalisation_picks_the_longer_sequence():
    # Empty output: 0.4. "A": 0.6 * 0.6 = 0.36, so alpha = 0 prefers the empty output while
    # alpha = 1 compares log(0.4) / 1 = -0.92 with log(0.36) / 2 = -0.51 and prefers "A".
    table = {BOS: {EOS: 0.4, A: 0.6}, A: {EOS: 0.6, B: 0.4}, B: {EOS: 1.0}, EOS: {EOS: 1.0}}
    model = bigram_model(table)
    plain = beam_search(model, SRC, None, BOS, EOS, max_len=10, beam_size=2, alpha=0.0)
    assert plain.tokens == [[]] and plain.scores[0] == pytest.approx(math.log(0.4))
    normalised = beam_search(model, SRC, None, BOS, EOS, max_len=10, beam_size=2, alpha=1.0)
    assert normalised.tokens == [[A]] and normalised.scores[0] == pytest.approx(math.log(0.36))


def test_max_len_stops_a_sequence_without_eos():
    model = bigram_model({BOS: {A: 1.0}, A: {A: 1.0}, EOS: {EOS: 1.0}})
    assert greedy_decode(model, SRC, None, BOS, EOS, max_len=4).tokens == [[A] * 4]
    assert beam_search(model, SRC, None, BOS, EOS, max_len=4, beam_size=3).tokens == [[A] * 4]


def test_beam_one_equals_greedy_on_a_random_model():
    torch.manual_seed(0)
    model = make_seq2seq(12, 9, 8, 16, 2)
    src = torch.randint(4, 12, (6, 5))
    valid = torch.tensor([5, 3, 4, 5, 1, 2])
    greedy = greedy_decode(model, src, valid, BOS, EOS, max_len=8)
    beam = beam_search(model, src, valid, BOS, EOS, max_len=8, beam_size=1)
    assert greedy.tokens == beam.tokens
    assert greedy.scores == pytest.approx(beam.scores, abs=1e-5)
    assert greedy.attention is None and beam.attention is None
    assert decode(model, src, valid, BOS, EOS, 8, beam_size=1).tokens == greedy.tokens
    # A wider beam never finds a less probable sequence (alpha = 0 compares raw log-probabilities).
    wide = beam_search(model, src, valid, BOS, EOS, max_len=8, beam_size=4)
    assert all(w >= g - 1e-5 for w, g in zip(wide.scores, greedy.scores))


def test_batched_search_equals_one_sentence_at_a_time():
    torch.manual_seed(1)
    model = make_seq2seq(12, 9, 8, 16, 1)
    src, valid = torch.randint(4, 12, (5, 4)), torch.tensor([4, 4, 2, 3, 1])
    together = beam_search(model, src, valid, BOS, EOS, max_len=6, beam_size=3, alpha=0.7)
    for b in range(5):
        alone = beam_search(model, src[b:b + 1, :valid[b]], valid[b:b + 1], BOS, EOS, 6, beam_size=3, alpha=0.7)
        assert alone.tokens[0] == together.tokens[b]
        assert alone.scores[0] == pytest.approx(together.scores[b], abs=1e-5)


def test_bad_arguments_raise_value_errors():
    model = bigram_model(GREEDY_TRAP)
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(model, SRC, None, BOS, EOS, 5, beam_size=0)
    with pytest.raises(ValueError, match="max_len"):
        greedy_decode(model, SRC, None, BOS, EOS, 0)
    with pytest.raises(ValueError, match="src must be"):
        greedy_decode(model, SRC[0], None, BOS, EOS, 5)


def test_bad_tokens_and_length_penalties_are_named():
    """A NaN alpha made every normalised score NaN (the pick arbitrary); an <eos> beyond the vocabulary
    was an IndexError in beam search and a sentence that never stops in greedy decoding."""
    model = bigram_model(GREEDY_TRAP)
    with pytest.raises(ValueError, match="alpha .* must be a finite number, got nan"):
        beam_search(model, SRC, None, BOS, EOS, 5, beam_size=2, alpha=float("nan"))
    with pytest.raises(ValueError, match="eos must be a token index below the decoder's vocabulary size 6, got 6"):
        beam_search(model, SRC, None, BOS, 6, 5, beam_size=2)
    with pytest.raises(ValueError, match="eos must be a token index below the decoder's vocabulary size 6, got 9"):
        greedy_decode(model, SRC, None, BOS, 9, 5)
    with pytest.raises(ValueError, match="bos must be a non-negative integer, got -1"):
        greedy_decode(model, SRC, None, -1, EOS, 5)
    with pytest.raises(ValueError, match="eos must be a non-negative integer, got True"):
        beam_search(model, SRC, None, BOS, True, 5)
    with pytest.raises(ValueError, match=r"src_valid_lens must be a tensor of shape \(1,\), got list"):
        greedy_decode(model, SRC, [7], BOS, EOS, 5)
    assert greedy_decode(model, SRC, None, BOS, None, 3).tokens == [[A, EOS, EOS]]  # no eos: runs max_len steps


def test_translate_and_bleu_on_the_grammar_corpus():
    from attn_utils.data import load_translation_data

    data = load_translation_data("grammar", verbose=False)
    torch.manual_seed(0)
    model = make_seq2seq(len(data.src_vocab), len(data.tgt_vocab), 8, 16, 1)
    out = translate(model, ["the cat sees a dog .", data.test.src[0]], data, beam_size=2)
    assert len(out) == 2 and out[0].source == ["the", "cat", "sees", "a", "dog", "."]
    assert all(len(t.tokens) <= data.num_steps for t in out) and out[0].attention is None
    hyps, refs = translate_split(model, data, "test")
    assert len(hyps) == len(refs) == len(data.test)
    assert refs[0] == " ".join(data.test.tgt[0])
    assert evaluate_bleu(model, data, "test") == pytest.approx(corpus_bleu(hyps, refs))
    with pytest.raises(ValueError, match="single string"):
        translate(model, "the cat .", data)


def test_bleu_by_length():
    hyps = ["a b c d", "a b c d e", "x y z w"]
    refs = ["a b c d", "a b c d e", "a b c d"]
    rows = bleu_by_length(hyps, refs, [3, 5, 5], [(1, 3), (4, 5), (6, 9)])
    assert [r["bucket"] for r in rows] == ["1-3", "4-5"] and [r["pairs"] for r in rows] == [1, 2]
    assert rows[0]["bleu"] == pytest.approx(100.0)
    assert rows[1]["bleu"] == pytest.approx(corpus_bleu(hyps[1:], refs[1:]))
    with_intervals = bleu_by_length(hyps, refs, [3, 5, 5], [(1, 3), (4, 5)], num_samples=200, seed=3)
    assert [r["bleu"] for r in with_intervals] == pytest.approx([r["bleu"] for r in rows])
    expected = bootstrap_bleu(hyps[1:], refs[1:], num_samples=200, seed=3)
    assert (with_intervals[1]["low"], with_intervals[1]["high"]) == pytest.approx((expected.low, expected.high))
    assert with_intervals[1]["low"] < with_intervals[1]["bleu"] and with_intervals[0]["low"] == pytest.approx(100.0)


def test_bleu_report_scores_single_and_all_references_with_intervals(tmp_path):
    from attn_utils.data import load_translation_data
    from tests.data_helpers import write_fra

    # the synthetic file gives every fourth English sentence a second French translation
    data = load_translation_data(data_path=write_fra(tmp_path, num_pairs=300), num_val=20, num_test=40,
                                 verbose=False)
    torch.manual_seed(0)
    model = make_seq2seq(len(data.src_vocab), len(data.tgt_vocab), 8, 16, 1)
    hyps, refs = translate_split(model, data, "test")
    sources = [" ".join(s) for s in data.test.src]
    assert len(set(sources)) < len(sources)  # some English sentences have several references
    report = bleu_report(model, data, "test", num_samples=50)
    grouped_hyps, grouped_refs = group_references(hyps, refs, sources)
    assert report["pairs"] == 40 and report["sentences"] == len(set(sources)) == len(grouped_hyps)
    assert report["bleu"] == pytest.approx(corpus_bleu(hyps, refs))
    assert report["bleu"] == pytest.approx(evaluate_bleu(model, data, "test"))
    assert report["multi_bleu"] == pytest.approx(corpus_bleu(grouped_hyps, grouped_refs))
    assert report["multi_bleu"] == pytest.approx(evaluate_bleu(model, data, "test", references="all"))
    assert report["bleu_low"] <= report["bleu"] <= report["bleu_high"]
    assert report["multi_low"] <= report["multi_bleu"] <= report["multi_high"]
    assert "by_length" not in report and "hypotheses" not in report
    buckets = [(1, 5), (6, None)]
    detailed = bleu_report(model, data, "test", num_samples=50, buckets=buckets, keep_hypotheses=True)
    assert detailed["hypotheses"] == hyps
    assert detailed["by_length"] == bleu_by_length(hyps, refs, [len(s) for s in data.test.src], buckets,
                                                   num_samples=50)
    with pytest.raises(ValueError, match="references must be 'single' or 'all', got 'both'"):
        evaluate_bleu(model, data, "test", references="both")


def test_bleu_by_length_with_an_open_last_bucket():
    hyps = ["a b c d", "a b c d e", "x y z w", "a b c d e f g h i"]
    refs = ["a b c d", "a b c d e", "a b c d", "a b c d e f g h i"]
    rows = bleu_by_length(hyps, refs, [3, 5, 5, 20], [(1, 3), (4, 8), (9, None)])
    assert [(r["bucket"], r["pairs"]) for r in rows] == [("1-3", 1), ("4-8", 2), ("9+", 1)]
    assert rows[2]["bleu"] == pytest.approx(100.0)
    with pytest.raises(ValueError, match="increasing order"):
        bleu_by_length(hyps, refs, [3, 5, 5, 20], [(4, 8), (1, 3)])


def _systems(seed=0, sentences=60):
    rng = random.Random(seed)
    refs = [" ".join(rng.choice("abcdefghij") for _ in range(rng.randint(3, 14))) for _ in range(sentences)]

    def noisy(p):
        return [" ".join(w if rng.random() > p else "z" for w in r.split()) for r in refs]

    return refs, [noisy(0.15) for _ in range(3)], [noisy(0.3) for _ in range(2)]


def test_paired_bootstrap_is_corpus_bleu_on_each_resample():
    refs, runs_a, runs_b = _systems()
    result = paired_bootstrap_bleu(runs_a, runs_b, refs, num_samples=50, seed=4)
    # the same resamples, each scored from scratch with corpus_bleu (itself checked against sacrebleu)
    picks = torch.randint(len(refs), (50, len(refs)), generator=torch.Generator().manual_seed(4))

    def mean_bleu(runs, rows):
        return sum(corpus_bleu([run[i] for i in rows], [refs[i] for i in rows]) for run in runs) / len(runs)

    differences = [mean_bleu(runs_a, rows) - mean_bleu(runs_b, rows) for rows in picks.tolist()]
    differences = torch.tensor(differences, dtype=torch.float64)
    expected_low, expected_high = torch.quantile(differences, torch.tensor([0.025, 0.975], dtype=torch.float64))
    full = sum(corpus_bleu(r, refs) for r in runs_a) / 3 - sum(corpus_bleu(r, refs) for r in runs_b) / 2
    assert result.difference == pytest.approx(full)
    assert (result.low, result.high) == pytest.approx((float(expected_low), float(expected_high)))
    assert result.a_wins == pytest.approx(float((differences > 0).double().mean()))
    assert 0 < result.low < result.difference < result.high and result.a_wins == 1.0
    swapped = paired_bootstrap_bleu(runs_b, runs_a, refs, num_samples=50, seed=4)
    assert swapped.difference == pytest.approx(-result.difference) and swapped.a_wins == 0.0
    same = paired_bootstrap_bleu(runs_a, runs_a, refs, num_samples=20)
    assert same.difference == same.low == same.high == 0.0 and same.a_wins == 0.0


def test_paired_bleu_by_length_is_the_paired_test_within_each_bucket():
    refs, runs_a, runs_b = _systems(seed=1, sentences=80)
    lengths = [len(r.split()) for r in refs]
    rows = paired_bleu_by_length(runs_a, runs_b, refs, lengths, [(1, 8), (9, None)], num_samples=40, seed=2)
    assert [r["bucket"] for r in rows] == ["1-8", "9+"] and sum(r["pairs"] for r in rows) == 80
    long = [i for i, n in enumerate(lengths) if n >= 9]
    expected = paired_bootstrap_bleu([[run[i] for i in long] for run in runs_a],
                                     [[run[i] for i in long] for run in runs_b], [refs[i] for i in long],
                                     num_samples=40, seed=2)
    assert rows[1]["pairs"] == len(long)
    assert (rows[1]["difference"], rows[1]["low"], rows[1]["high"]) == pytest.approx(expected[:3])


@pytest.mark.parametrize("runs_a, message", [
    (["a b c"], "list of runs"),
    ("a b c", "list of runs"),
    ([], "list of runs"),
    ([["a b"]], "one hypothesis per reference"),
])
def test_paired_bootstrap_refuses_runs_of_the_wrong_form(runs_a, message):
    with pytest.raises(ValueError, match=message):
        paired_bootstrap_bleu(runs_a, [["a b c", "d e f"]], ["a b c", "d e f"])
