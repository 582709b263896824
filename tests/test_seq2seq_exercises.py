"""benchmarks/seq2seq_exercises.py: chapter 4's exercises measured (reversed sources, the context in the decoder's
initial state only, beam search's length normalisation).

Its variants must differ from the chapter's model in the one thing each exercise asks about: the same initial
weights, recipe and batches; its reference must be, run for run, the stored comparison's run of the same seed.
"""

from __future__ import annotations

import copy
import json
import math
import shlex

import pytest
import torch
from benchmark_modules import load_benchmark
from data_helpers import write_fra

import attn_utils
from attn_utils import compare
from attn_utils.data import load_translation_data
from attn_utils.data.loader import SPLITS
from attn_utils.seq2seq import Seq2SeqDecoder, make_seq2seq
from attn_utils.stored_results import check_translator_results, summarize_by_length, summarize_runs

CPU = torch.device("cpu")
SMALL = {"num_train": 300, "num_val": 30, "num_test": 40}  # of a synthetic file of 300 English sentences


@pytest.fixture(scope="module")
def benchmark():
    return load_benchmark("seq2seq_exercises")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return load_translation_data("tatoeba", data_path=write_fra(tmp_path_factory.mktemp("fra"), num_pairs=300),
                                 verbose=False, **SMALL)


@pytest.fixture
def threads():
    """Runs set torch's number of threads: restored afterwards."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_reversal_reaches_every_split_and_array_with_eos_in_place(benchmark, data):
    reversed_data = benchmark.reverse_sources(data)
    eos, pad = data.src_vocab["<eos>"], data.src_vocab["<pad>"]
    assert reversed_data.split is data.split and reversed_data.src_vocab is data.src_vocab
    assert reversed_data.tgt_vocab is data.tgt_vocab and reversed_data.num_steps == data.num_steps
    for split in SPLITS:
        ours, theirs = reversed_data.pairs(split), data.pairs(split)
        assert ours.src == [s[::-1] for s in theirs.src] and ours.tgt == theirs.tgt
        src, dec_input, lengths, label = reversed_data.arrays(split)
        plain_src, plain_dec_input, plain_lengths, plain_label = data.arrays(split)
        assert torch.equal(lengths, plain_lengths) and torch.equal(dec_input, plain_dec_input)
        assert torch.equal(label, plain_label)
        assert not torch.equal(src, plain_src)
        for row, plain, n in zip(src, plain_src, lengths.tolist()):
            assert torch.equal(row[:n - 1], plain[:n - 1].flip(0))  # the words, backwards
            assert row[n - 1] == plain[n - 1] == eos and (row[n:] == pad).all()  # then <eos>, then the padding
    # training reads the same pairs in the same order, each source reversed
    for ours, theirs in zip(reversed_data.dataloader("train", batch_size=16, seed=3),
                            data.dataloader("train", batch_size=16, seed=3)):
        assert torch.equal(ours[1], theirs[1]) and torch.equal(ours[2], theirs[2])
    # the scoring sees the same test set: lengths (buckets) and groups of references
    assert [len(s) for s in reversed_data.test.src] == [len(s) for s in data.test.src]


def test_reversal_keeps_alignments_on_their_words(benchmark):
    grammar = load_translation_data("grammar", num_examples=200, verbose=False)
    reversed_grammar = benchmark.reverse_sources(grammar)
    for src, rsrc, tgt, links, rlinks in zip(grammar.corpus.src, reversed_grammar.corpus.src, grammar.corpus.tgt,
                                             grammar.corpus.alignments, reversed_grammar.corpus.alignments):
        assert [(src[i], tgt[j]) for i, j in links] == [(rsrc[i], tgt[j]) for i, j in rlinks]


def _later_logits(model, context_from, hidden_from, X):
    """Logits of steps 2.. of ``X`` after a first step from ``hidden_from``'s initial state, the context entry of
    the state then taken from ``context_from`` (two encoder outputs)."""
    decoder = model.decoder
    _, (_, hidden) = decoder(X[:, :1], decoder.init_state(hidden_from))
    return decoder(X[:, 1:], (decoder.init_state(context_from)[0], hidden))[0]  # (batch, steps - 1, vocab)


def test_the_initial_state_decoder_ignores_the_context_after_its_first_step(benchmark):
    torch.manual_seed(0)
    chapter = make_seq2seq(20, 25, embed_size=8, num_hiddens=16, num_layers=2)
    initial = benchmark.with_initial_state_decoder(copy.deepcopy(chapter))
    assert type(initial.decoder) is benchmark.InitialStateDecoder and type(chapter.decoder) is Seq2SeqDecoder
    for (key, a), b in zip(chapter.state_dict().items(), initial.state_dict().values()):
        assert torch.equal(a, b), key  # the same model, weight for weight
    a, b = torch.randint(4, 20, (3, 6)), torch.randint(4, 20, (3, 6))  # two sources
    X = torch.randint(4, 25, (3, 5))
    with torch.no_grad():
        for model in (chapter, initial):
            enc_a, enc_b = model.encoder(a), model.encoder(b)
            # the whole pass equals step 1 then the rest
            full = model.decoder(X, model.decoder.init_state(enc_a))[0][:, 1:]
            later = _later_logits(model, enc_a, enc_a, X)
            torch.testing.assert_close(later, full)
            changed = _later_logits(model, enc_b, enc_a, X)  # another source's context after step 1
            per_step = (changed - later).abs().amax(dim=(0, 2))  # (steps - 1,)
            if model is chapter:
                assert (per_step > 1e-4).all()  # the chapter's decoder reads the context at every step
            else:
                assert torch.equal(changed, later)
            # both read the source through the initial state
            other = model.decoder(X, model.decoder.init_state(enc_b))[0][:, 1:]
            assert ((other - full).abs().amax(dim=(0, 2)) > 1e-4).all()
    # the weights that read the context get no gradient in the initial-state model
    for model in (chapter, initial):
        model.zero_grad()
        model(a, X).sum().backward()
        context_grad = model.decoder.rnn.weight_ih_l0.grad[:, 8:]  # (3 * hiddens, hiddens): after the embedding
        assert (context_grad.abs().sum() == 0) == (model is initial)


def test_the_variants_start_from_the_references_weights_with_its_recipe(benchmark, data, monkeypatch):
    calls = []

    def capture(model, data, **kwargs):  # instead of training
        calls.append({"weights": copy.deepcopy(model.state_dict()), "data": data, "settings": kwargs,
                      "decoder": type(model.decoder)})
        return None

    monkeypatch.setattr(compare, "train_seq2seq", capture)  # what train_recipe trains with
    monkeypatch.setattr(benchmark, "train_seq2seq", capture)
    for seed in (0, 1):
        for training in benchmark.TRAININGS:
            benchmark.train_variant(training, data, seed, 7, CPU)
    assert [c["decoder"] for c in calls] == 2 * [Seq2SeqDecoder, Seq2SeqDecoder, benchmark.InitialStateDecoder]
    reference = compare.BOOK_RECIPES["no attention"]
    for first in (0, 3):
        same_seed = calls[first:first + 3]
        ref = same_seed[0]
        assert ref["settings"] == {**reference.train, "max_steps": 7, "batch_size": compare.BOOK_BATCH,
                                   "seed": first // 3, "eval_points": 0, "progress": False}
        for other in same_seed[1:]:
            assert other["settings"] == ref["settings"]
            assert other["weights"].keys() == ref["weights"].keys()
            for key, value in ref["weights"].items():
                assert torch.equal(other["weights"][key], value), key
        assert same_seed[0]["data"] is data and same_seed[2]["data"] is data
        assert same_seed[1]["data"].train.src == [s[::-1] for s in data.train.src]
    embeddings = [call["weights"]["encoder.embedding.weight"] for call in (calls[0], calls[3])]
    assert not torch.equal(*embeddings)  # another seed, other weights


def test_the_reference_is_the_stored_comparisons_run(benchmark, data, monkeypatch, threads, tmp_path):
    """compare_translators.py's run of the model and seed (its own job, on the same data) and the reference of
    this script: the same test translations and scores."""
    import compare_translators  # the benchmark put its folder on the path

    load = attn_utils.load_translation_data
    folder = write_fra(tmp_path / "fra", num_pairs=300).parent
    monkeypatch.setenv("ATTN_UTILS_DATA", str(folder))
    monkeypatch.setattr(attn_utils, "load_translation_data", lambda *args, **kwargs: load(*args, **{**kwargs, **SMALL}))
    job = {"seed": 1, "steps": 6, "threads": 1, "device": "cpu"}
    stored = compare_translators.run_job({**job, "section": "runs", "model": "no attention", "lr": None})
    runs = benchmark.run_job({**job, "training": "reference", "quick": False,
                              "num_samples": compare_translators.BOOTSTRAP_SAMPLES}, data)
    assert [r["model"] for r in runs] == ["reference"] + [benchmark.beam_name(a) for a in benchmark.ALPHAS]
    ours = runs[0]
    assert ours["hypotheses"] == stored["hypotheses"]
    for key in ("parameters", "steps", "bleu", "bleu_low", "bleu_high", "multi_bleu", "multi_low", "multi_high",
                "by_length"):
        assert ours[key] == stored[key], key
    comparison = {"found": True, "same_recipe": True, "same_corpus": True, "same_test_set": True, "same_steps": True,
                  "_runs": {1: stored}}
    assert benchmark.against_stored(ours, comparison) == {"bleu": stored["bleu"], "identical_translations": 1.0}
    assert benchmark.against_stored(ours, {**comparison, "same_corpus": False}) is None
    assert benchmark.against_stored({**ours, "seed": 0}, comparison) is None


def test_quick_runs_end_to_end_and_resumes(benchmark, tmp_path, monkeypatch, threads, capsys):
    folder = write_fra(tmp_path / "fra", num_pairs=1000).parent
    monkeypatch.setenv("ATTN_UTILS_DATA", str(folder))
    out = tmp_path / "exercises.json"
    argv = ["--quick", "--threads", "1", "--out", str(out)]
    assert benchmark.main(argv) == 0
    record = json.loads(out.read_text())
    assert record["commands"] == [shlex.join(["python", "benchmarks/seq2seq_exercises.py", *argv])]
    for key in ("commit", "machine", "torch", "date", "corpus", "test_set", "budget", "variants", "recipes"):
        assert record[key], key
    assert record["budget"]["steps"] == 4 and record["budget"]["quick"] and record["budget"]["alphas"] == [0, 0.7, 1.5]
    check_translator_results(record)  # the stored comparison's layout: attn_utils.stored_results reads it
    references = record["test_set"]["references"]
    names = list(benchmark.VARIANTS)
    assert names[:3] == ["reference", "reversed source", "initial state only"]
    assert [(r["model"], r["seed"]) for r in record["runs"]] == [(name, 0) for name in names]
    bleu = {}
    for run in record["runs"]:
        assert run["steps"] == 4 and len(run["hypotheses"]) == len(references) == run["pairs"]
        assert all(math.isfinite(run[k]) for k in ("bleu", "bleu_low", "bleu_high", "length_ratio"))
        assert 0 <= run["bleu_low"] <= run["bleu"] <= run["bleu_high"] <= 100 and run["length_ratio"] >= 0
        assert sum(b["pairs"] for b in run["by_length"]) == len(references)
        assert all(b["low"] <= b["bleu"] <= b["high"] for b in run["by_length"])
        beam = run["model"].startswith("beam")
        assert run["decoding"]["beam_size"] == (4 if beam else 1)
        bleu[run["model"]] = run["bleu"]
    assert record["runs"][0]["stored"] is None  # the quick data is not the stored comparison's
    assert record["stored_comparison"]["same_recipe"] and not record["stored_comparison"]["same_corpus"]
    assert [p["model"] for p in record["paired"]] == names[1:]
    for entry in record["paired"]:
        overall, *buckets = entry["rows"]
        assert entry["seeds"] == [0] and overall["bucket"] == "all" and overall["pairs"] == len(references)
        assert overall["difference"] == pytest.approx(bleu[entry["model"]] - bleu["reference"])
        assert overall["low"] <= overall["difference"] <= overall["high"]
        assert [b["bucket"] for b in buckets] == [b["bucket"] for b in record["runs"][0]["by_length"]]
    assert [row["model"] for row in summarize_runs(record)] == names
    assert len(summarize_by_length(record)) == len(names) * len(record["runs"][0]["by_length"])
    printed = capsys.readouterr().out
    assert "3 training runs" in printed and "reversed source minus reference" in printed

    assert benchmark.main([*argv, "--resume"]) == 0  # nothing left to run: the runs are kept
    again = json.loads(out.read_text())
    assert "0 training runs" in capsys.readouterr().out
    assert again["runs"] == record["runs"] and len(again["commands"]) == 2
    with pytest.raises(SystemExit):
        benchmark.main(["--quick"])  # the default file holds the book's runs
