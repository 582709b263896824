"""Preprocessing, vocabulary, fixed-length arrays, bucketed batches and held-out splits,
checked against d2l's implementations and by hand."""

from __future__ import annotations

import random

import pytest
import torch
from data_helpers import MALFORMED_LINES, synthetic_fra_text

from attn_utils.data import (
    RESERVED_TOKENS,
    BucketBatchSampler,
    Vocab,
    build_array,
    pad_or_truncate,
    parse_pairs,
    preprocess,
    split_by_source,
    tokenize,
)

TEXT = synthetic_fra_text()


def _d2l_tokens(d2l, raw: str):
    """d2l's MTFraEng tokens for ``raw`` (its methods do not use ``self``), without its ``<eos>``."""
    src, tgt = d2l.MTFraEng._tokenize(None, d2l.MTFraEng._preprocess(None, raw))
    return [s[:-1] for s in src], [t[:-1] for t in tgt]


def test_preprocess_by_hand():
    assert preprocess("Go.") == "go ."
    assert preprocess("Hello,\u00a0you!") == "hello , you !"
    assert preprocess("What?!") == "what ? !"
    assert preprocess("C\u2019est bon\u202f!") == "c'est bon !"
    assert preprocess("Recule\u2009!") == "recule !"
    assert tokenize(preprocess("Recule\u2009!")) == ["recule", "!"]
    assert preprocess(". Already spaced .") == ". already spaced ."


def test_tokens_equal_d2ls_on_the_synthetic_file(d2l):
    corpus = parse_pairs(TEXT)
    valid = "\n".join(line for line in TEXT.splitlines() if line and line not in MALFORMED_LINES)
    # d2l knows neither ’ nor the thin space, and keeps lines with an empty field
    src, tgt = _d2l_tokens(d2l, valid.replace("\u2019", "'").replace("\u2009", " "))
    # d2l skips the line with an attribution column (three fields); everything else is the same, in order
    k = corpus.src.index(["hello", "!"])
    assert corpus.src[:k] + corpus.src[k + 1:] == src
    assert corpus.tgt[:k] + corpus.tgt[k + 1:] == tgt


def test_parse_pairs_counts_malformed_lines_and_reads_a_third_column():
    corpus = parse_pairs(TEXT, name="synthetic")
    assert corpus.malformed == len(MALFORMED_LINES) == 4
    assert len(corpus) == 300 + 75 + 4  # generated, second translations, special lines
    k = corpus.src.index(["hello", "!"])
    assert corpus.tgt[k] == ["bonjour", "!"]  # the attribution column is ignored
    assert ["it's", "ok", "."] in corpus.src and ["c'est", "bon", "."] in corpus.tgt
    assert ["what", "?", "!"] in corpus.src and ["quoi", "?", "!"] in corpus.tgt
    assert corpus.alignments is None
    aligned = parse_pairs("a b\tc d\t0-1 1-0\nbad line\n", with_alignments=True)
    assert aligned.alignments == [[(0, 1), (1, 0)]] and aligned.malformed == 1
    with pytest.raises(ValueError, match="'i-j'"):
        parse_pairs("a\tb\t0:1\n", with_alignments=True)


# ---------------------------------------------------------------------------------------------
# Vocab
# ---------------------------------------------------------------------------------------------

SENTENCES = [["le", "chat", "dort"], ["le", "chien", "dort"], ["un", "chat"], ["le", "chat", "."]]


def test_vocab_order_and_lookup():
    vocab = Vocab(SENTENCES, min_freq=2, reserved_tokens=RESERVED_TOKENS)
    # reserved first, then by falling frequency (le 3, chat 3 → alphabetical), then dort 2
    assert vocab.idx_to_token == ["<pad>", "<bos>", "<eos>", "<unk>", "chat", "le", "dort"]
    assert (vocab.pad, vocab.bos, vocab.eos, vocab.unk) == (0, 1, 2, 3)
    assert len(vocab) == 7
    assert vocab["le"] == 5 and vocab["chien"] == vocab.unk  # seen once: below min_freq
    assert vocab[["le", "chat", ["dort", "zzz"]]] == [5, 4, [6, 3]]
    assert vocab.to_tokens(5) == "le"
    assert vocab.to_tokens([5]) == ["le"]  # a list, even of one
    assert vocab.to_tokens(torch.tensor([5, 4, 2])) == ["le", "chat", "<eos>"]
    assert vocab.to_tokens(torch.tensor(6)) == "dort"
    assert "chat" in vocab and "chien" not in vocab
    with pytest.raises(ValueError, match="out of range"):
        vocab.to_tokens(7)
    # the order does not depend on the order of the input
    assert Vocab(SENTENCES[::-1], min_freq=2, reserved_tokens=RESERVED_TOKENS).idx_to_token == vocab.idx_to_token
    plain = Vocab(["b", "a", "b"])
    assert plain.idx_to_token == ["<unk>", "b", "a"] and plain.unk == 0


def test_vocab_keeps_the_same_tokens_as_d2l(d2l):
    corpus = parse_pairs(TEXT)
    for min_freq in (0, 2, 3):
        ours = Vocab(corpus.tgt, min_freq=min_freq, reserved_tokens=RESERVED_TOKENS)
        theirs = d2l.Vocab(corpus.tgt, min_freq=min_freq, reserved_tokens=list(RESERVED_TOKENS))
        assert sorted(ours.idx_to_token) == theirs.idx_to_token
        sample = ["le", "chat", "zzz", "!"]
        assert ours.to_tokens(ours[sample]) == theirs.to_tokens(theirs[sample])


# ---------------------------------------------------------------------------------------------
# Arrays and batches
# ---------------------------------------------------------------------------------------------

def test_pad_or_truncate():
    assert pad_or_truncate(["a", "b"], 4) == ["a", "b", "<pad>", "<pad>"]
    assert pad_or_truncate(["a", "b", "c"], 2) == ["a", "b"]
    with pytest.raises(ValueError, match="num_steps must be a positive integer"):
        build_array([["a"]], Vocab(["a"]), 0)


@pytest.mark.parametrize("num_steps", [4, 9])
def test_build_array_equals_d2l(d2l, num_steps):
    corpus = parse_pairs(TEXT)
    src_vocab = Vocab(corpus.src, min_freq=2, reserved_tokens=RESERVED_TOKENS)
    tgt_vocab = Vocab(corpus.tgt, min_freq=2, reserved_tokens=RESERVED_TOKENS)
    reference = object.__new__(d2l.MTFraEng)
    reference.num_steps, reference.num_train, reference.num_val = num_steps, 10**6, 0
    raw = "\n".join(f"{' '.join(s)}\t{' '.join(t)}" for s, t in zip(corpus.src, corpus.tgt))
    (d_src, d_dec, d_valid, d_label), _, _ = reference._build_arrays(raw, src_vocab, tgt_vocab)
    src, src_valid = build_array(corpus.src, src_vocab, num_steps)
    tgt, tgt_valid = build_array(corpus.tgt, tgt_vocab, num_steps, is_tgt=True)
    assert torch.equal(src, d_src) and torch.equal(src_valid, d_valid.long())
    assert torch.equal(tgt[:, :-1], d_dec) and torch.equal(tgt[:, 1:], d_label)
    assert src.shape == (len(corpus), num_steps) and tgt.shape == (len(corpus), num_steps + 1)
    assert torch.equal(tgt_valid, torch.clamp(torch.tensor([len(t) + 2 for t in corpus.tgt]), max=num_steps + 1))


def test_bucket_batches_hold_equal_lengths_and_cover_every_index():
    rng = random.Random(0)
    lengths = [rng.randrange(2, 9) for _ in range(1000)]
    counts = [lengths.count(n) for n in range(2, 9)]
    sampler = BucketBatchSampler(lengths, batch_size=32, seed=3)
    assert len(sampler) == sum(-(-c // 32) for c in counts)  # ceil per length
    first = list(sampler)
    assert len(first) == len(sampler) and sorted(i for b in first for i in b) == list(range(1000))
    assert all(len({lengths[i] for i in b}) == 1 for b in first)
    assert sorted(len(b) for b in first if len(b) < 32) == sorted(c % 32 for c in counts if c % 32)
    second = list(sampler)  # the next epoch: another order
    assert second != first and sorted(i for b in second for i in b) == list(range(1000))
    again = BucketBatchSampler(lengths, batch_size=32, seed=3)
    assert list(again) == first and list(again) == second  # reproducible epoch by epoch
    again.set_epoch(0)
    assert list(again) == first
    assert BucketBatchSampler(lengths, 32, seed=4).batches(0) != first
    ordered = BucketBatchSampler(lengths, 32, shuffle=False).batches(0)
    assert [i for b in ordered for i in b] == sorted(range(1000), key=lambda i: (lengths[i], i))
    dropped = BucketBatchSampler(lengths, 32, drop_last=True)
    assert len(dropped) == sum(c // 32 for c in counts) == len(list(dropped))
    assert all(len(b) == 32 for b in dropped.batches(5))
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        BucketBatchSampler(lengths, 0)


def test_bucket_sampler_drives_a_dataloader():
    lengths = torch.tensor([3, 1, 3, 2, 1, 2, 3, 1, 2, 2])
    dataset = torch.utils.data.TensorDataset(torch.arange(10), lengths)
    loader = torch.utils.data.DataLoader(dataset, batch_sampler=BucketBatchSampler(lengths, 3, seed=0))
    batches = [(idx.tolist(), lens.tolist()) for idx, lens in loader]
    assert sorted(i for idx, _ in batches for i in idx) == list(range(10))
    assert sorted(lens for _, lens in batches) == [[1, 1, 1], [2], [2, 2, 2], [3, 3, 3]]


# ---------------------------------------------------------------------------------------------
# Splits
# ---------------------------------------------------------------------------------------------

def _english(corpus, indices):
    return {" ".join(corpus.src[i]) for i in indices}


def test_split_is_disjoint_by_english_and_reproducible():
    corpus = parse_pairs(TEXT)
    split = split_by_source(corpus, num_val=40, num_test=50, max_eval_len=8, seed=0)
    assert split.sizes() == {"train": len(corpus) - 90, "val": 40, "test": 50}
    assert sorted(split.train + split.val + split.test) == list(range(len(corpus)))
    train, val, test = (_english(corpus, getattr(split, s)) for s in ("train", "val", "test"))
    assert not (train & val or train & test or val & test)
    assert all(len(corpus.src[i]) <= 8 for i in split.test + split.val)
    assert any(len(corpus.src[i]) > 8 for i in split.train)
    # some English sentences have two translations: both went to the same split
    assert len(_english(corpus, split.test)) < 50 or len(_english(corpus, split.val)) < 40
    assert split_by_source(corpus, 40, 50, max_eval_len=8, seed=0) == split
    assert split_by_source(corpus, 40, 50, max_eval_len=8, seed=1).test != split.test
    sampled = split_by_source(corpus, 40, 50, num_train=100, max_eval_len=8, seed=0)
    assert len(sampled.train) == 100 and set(sampled.train) <= set(split.train) and sampled.test == split.test
    with pytest.raises(ValueError, match="cannot fill a test set of 500 pairs"):
        split_by_source(corpus, 0, 500, max_eval_len=3)
    with pytest.raises(ValueError, match="num_train must be an int in 0.."):
        split_by_source(corpus, 40, 50, num_train=10**6)
    with pytest.raises(ValueError, match="num_val must be a non-negative integer, got -1"):
        split_by_source(corpus, -1, 50)


def _long_corpus():
    """A corpus whose English runs from 2 to 24 tokens, 40 sentences of each length, some with two French
    translations (the second share the English, so they must land in the same split)."""
    lines = []
    for n in range(2, 25):
        for k in range(40):
            english = " ".join(f"w{n}x{k}y{i}" for i in range(n - 1)) + "."
            lines.append(f"{english}\tf{n} {k}.")
            if k % 5 == 0:
                lines.append(f"{english}\tg{n} {k}.")
    return parse_pairs("\n".join(lines) + "\n")


def test_stratified_split_draws_equal_shares_from_each_bucket():
    corpus = _long_corpus()
    buckets = ((1, 8), (9, 12), (13, 16), (17, None))
    split = split_by_source(corpus, num_val=41, num_test=82, max_eval_len=None, seed=0, buckets=buckets)
    assert split.buckets == buckets and split.sizes()["test"] == 82 and split.sizes()["val"] == 41
    assert sorted(split.train + split.val + split.test) == list(range(len(corpus)))
    for indices, shares in ((split.test, [21, 21, 20, 20]), (split.val, [11, 10, 10, 10])):
        lengths = [len(corpus.src[i]) for i in indices]
        counts = [sum(low <= n and (high is None or n <= high) for n in lengths) for low, high in buckets]
        assert counts == shares  # equal_shares: the first buckets take the remainder
    train, val, test = (_english(corpus, getattr(split, s)) for s in ("train", "val", "test"))
    assert not (train & val or train & test or val & test)
    assert max(len(corpus.src[i]) for i in split.test) > 17  # the open bucket reaches the longest
    assert split_by_source(corpus, 41, 82, None, None, 0, buckets=buckets) == split
    assert split_by_source(corpus, 41, 82, None, None, 1, buckets=buckets).test != split.test
    # one bucket (1, k) is the capped split, pair for pair
    assert split_by_source(corpus, 41, 82, max_eval_len=None, buckets=[(1, 8)]) == \
        split_by_source(corpus, 41, 82, max_eval_len=8)
    # sentences in no bucket train only
    gap = split_by_source(corpus, 10, 10, max_eval_len=None, buckets=[(3, 4), (10, 11)])
    assert {len(corpus.src[i]) for i in gap.test + gap.val} <= {3, 4, 10, 11}
    with pytest.raises(ValueError, match=r"cannot fill a test set of 200 pairs .*\(English of 9-12 tokens\)"):
        split_by_source(corpus, 0, 800, max_eval_len=None, buckets=buckets)


@pytest.mark.parametrize("buckets, message", [
    ([], "at least one"),
    ([(1, 8), (8, 12)], "without overlap"),
    ([(1, None), (9, 12)], "only the last one open"),
    ([(0, 8)], "positive"),
    ([(5, 3)], "increasing"),
    ([(1, 8.5)], "integer"),
    ([(True, 8)], "integer"),
    ("1-8", "pairs"),
    ([(1, 2, 3)], "pairs"),
])
def test_buckets_that_are_not_ordered_ranges_are_named(buckets, message):
    corpus = _long_corpus()
    with pytest.raises(ValueError, match=message):
        split_by_source(corpus, 10, 10, max_eval_len=None, buckets=buckets)


def test_a_cap_and_buckets_together_are_refused():
    with pytest.raises(ValueError, match="either max_eval_len or buckets"):
        split_by_source(_long_corpus(), 10, 10, max_eval_len=8, buckets=[(1, 8)])


def test_sparse_buckets_join_the_one_before():
    from attn_utils.data.splits import bucket_label, merge_sparse_buckets

    lengths = [3] * 50 + [10] * 5 + [14] * 30 + [20] * 2
    buckets = ((1, 8), (9, 12), (13, 16), (17, None))
    assert merge_sparse_buckets(lengths, buckets, 10) == ((1, 12), (13, None))
    assert merge_sparse_buckets(lengths, buckets, 1) == buckets
    assert merge_sparse_buckets(lengths, buckets, 1000) == ((1, None),)
    assert merge_sparse_buckets([20] * 30, buckets, 10) == ((1, None),)  # an empty first bucket joins the next
    assert [bucket_label(b) for b in ((1, 8), (5, 5), (17, None))] == ["1-8", "5", "17+"]
