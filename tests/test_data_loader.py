"""Getting the Tatoeba pairs (download with checksum, local copy, offline fallback) and the
``load_translation_data`` entry point; the real file's tests need ``ATTN_UTILS_DATA`` (CI sets it)."""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import os
import socket
import threading
import urllib.error
import zipfile

import pytest
import torch
from data_helpers import synthetic_fra_text, write_fra

from attn_utils.data import (
    DATA_ENV_VAR,
    DownloadError,
    TatoebaUnavailable,
    download,
    load_tatoeba,
    load_translation_data,
    parse_pairs,
    split_by_source,
)
from attn_utils.data import cache as cache_module
from attn_utils.data.loader import TATOEBA_EVAL_BUCKETS
from attn_utils.data.splits import in_bucket, merge_sparse_buckets
from attn_utils.data.tatoeba import find_local_copy, read_pairs_text

REAL_FETCH = cache_module.fetch
ENV_REASON = f"{DATA_ENV_VAR} is not set: no local copy of the Tatoeba pairs (.ci/run sets it)"


def _no_network(url, timeout=30.0):
    raise urllib.error.URLError("no network in this test")


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """No test here touches the network, and none sees the caller's ATTN_UTILS_DATA unless it asks."""
    monkeypatch.setattr(cache_module, "fetch", _no_network)
    monkeypatch.delenv(DATA_ENV_VAR, raising=False)


def _zip_bytes(text: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("fra-eng/fra.txt", text)
        archive.writestr("fra-eng/_about.txt", "about")
    return buffer.getvalue()


@pytest.fixture
def http_server(tmp_path, monkeypatch):
    """A static file server on 127.0.0.1 serving ``tmp_path/www`` (the real ``fetch`` restored)."""
    monkeypatch.setattr(cache_module, "fetch", REAL_FETCH)
    root = tmp_path / "www"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


# ---------------------------------------------------------------------------------------------
# Downloading into the cache
# ---------------------------------------------------------------------------------------------

def test_download_verifies_and_writes_atomically(http_server, tmp_path):
    root, base = http_server
    payload = _zip_bytes(synthetic_fra_text(50))
    (root / "fra-eng.zip").write_bytes(payload)
    sha1 = hashlib.sha1(payload).hexdigest()
    cache_dir = tmp_path / "cache"
    path = download(base + "fra-eng.zip", sha1, cache_dir)
    assert path == cache_dir / "fra-eng.zip" and path.read_bytes() == payload
    assert sorted(p.name for p in cache_dir.iterdir()) == ["fra-eng.zip"]  # no temporary file left
    corpus = load_tatoeba(cache_dir=cache_dir, url=base + "fra-eng.zip", sha1=sha1, verbose=False)
    assert len(corpus) == 50 + 13 + 4 and corpus.malformed == 4
    # a cached file is used as it is (no network needed), and a corrupted one is fetched again
    (root / "fra-eng.zip").unlink()
    assert download(base + "fra-eng.zip", sha1, cache_dir) == path
    path.write_bytes(b"corrupted")
    (root / "fra-eng.zip").write_bytes(payload)
    assert download(base + "fra-eng.zip", sha1, cache_dir).read_bytes() == payload


def test_checksum_failure_leaves_nothing_behind(http_server, tmp_path):
    root, base = http_server
    (root / "fra-eng.zip").write_bytes(b"not the file you are looking for")
    cache_dir = tmp_path / "cache"
    with pytest.raises(DownloadError, match="wrong SHA-1: expected 94646ad1522d915e7b0f9296181140edcf86a4f5, got"):
        download(base + "fra-eng.zip", "94646ad1522d915e7b0f9296181140edcf86a4f5", cache_dir)
    assert list(cache_dir.iterdir()) == []


def test_http_error_and_refused_connection_leave_nothing_behind(http_server, tmp_path):
    _, base = http_server
    with pytest.raises(DownloadError, match="could not download .*missing.zip"):
        download(base + "missing.zip", "0" * 40, tmp_path / "a")  # 404
    assert list((tmp_path / "a").iterdir()) == []
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(DownloadError, match="could not download"):
        download(f"http://127.0.0.1:{port}/fra-eng.zip", "0" * 40, tmp_path / "b", timeout=5)
    assert list((tmp_path / "b").iterdir()) == []


def test_offline_message_names_the_ways_out(tmp_path):
    with pytest.raises(TatoebaUnavailable) as info:
        load_tatoeba(cache_dir=tmp_path, verbose=False)
    message = str(info.value)
    for way_out in (DATA_ENV_VAR, "data_path=", "source='grammar'", "no network in this test"):
        assert way_out in message
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------
# A local copy: argument or environment variable
# ---------------------------------------------------------------------------------------------

def test_local_copy_forms(tmp_path):
    fra = write_fra(tmp_path / "flat")
    nested = write_fra(tmp_path / "nested" / "fra-eng")
    (tmp_path / "zipped").mkdir()
    (tmp_path / "zipped" / "fra-eng.zip").write_bytes(_zip_bytes(synthetic_fra_text()))
    assert find_local_copy(tmp_path / "flat") == fra
    assert find_local_copy(fra) == fra
    assert find_local_copy(tmp_path / "nested") == nested
    zipped = find_local_copy(tmp_path / "zipped")
    assert read_pairs_text(zipped) == read_pairs_text(fra) == synthetic_fra_text()
    with pytest.raises(ValueError, match="without the pairs: expected one of fra.txt"):
        find_local_copy(tmp_path)
    with pytest.raises(ValueError, match="does not exist"):
        find_local_copy(tmp_path / "nowhere")


def test_local_copy_through_argument_and_environment(tmp_path, monkeypatch, capsys):
    write_fra(tmp_path / "arg", num_pairs=300)
    write_fra(tmp_path / "env", num_pairs=200)
    corpus = load_tatoeba(tmp_path / "arg")
    assert len(corpus) == 300 + 75 + 4 and corpus.malformed == 4
    shortest, longest = min(len(s) for s in corpus.src), max(len(s) for s in corpus.src)
    assert capsys.readouterr().out == (
        f"Tatoeba English-French: fra.txt from data_path, 379 pairs (d2l's full file holds about 167,000), "
        f"English sentences of {shortest} to {longest} tokens, 4 malformed line(s) skipped, the first at line 51: "
        "'no tab on this line' (1 tab-separated field(s), expected 2 or 3)\n")
    monkeypatch.setenv(DATA_ENV_VAR, str(tmp_path / "env"))
    assert len(load_tatoeba(verbose=False)) == 200 + 50 + 4
    assert len(load_tatoeba(tmp_path / "arg", verbose=False)) == 379  # the argument wins
    monkeypatch.setenv(DATA_ENV_VAR, str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match=f"{DATA_ENV_VAR} names .* which does not exist"):
        load_tatoeba(verbose=False)


# ---------------------------------------------------------------------------------------------
# The entry point
# ---------------------------------------------------------------------------------------------

def test_auto_falls_back_to_the_grammar_corpus_under_a_banner(tmp_path, capsys):
    data = load_translation_data(cache_dir=tmp_path)
    lines = capsys.readouterr().out.splitlines()
    assert data.source == "grammar" and data.sizes() == {"train": 2000, "val": 250, "test": 250}
    # A banner between two rules: why, what stands in (2,500 pairs), what it means for the text, the way out
    assert lines[0] == lines[10] == "=" * 72 and lines[1] == "OFFLINE: the Tatoeba pairs are not available"
    assert lines[2].startswith("  (could not download") and "no network in this test" in lines[2]
    banner = " ".join(lines[3:10])
    for said in ("grammar corpus instead: 2,500 generated", "Every number printed below comes from it",
                 "the text describes the book's run on Tatoeba", "much higher BLEU", DATA_ENV_VAR, "data_path="):
        assert said in banner
    assert lines[11].startswith("grammar: train 2,000, val 250, test 250 pairs")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(TatoebaUnavailable):
        load_translation_data("tatoeba", cache_dir=tmp_path, verbose=False)
    # The chapters ask for a Tatoeba-sized training set; offline they get the whole bundled one.
    fallback = load_translation_data(cache_dir=tmp_path, num_train=40_000, verbose=False)
    assert fallback.source == "grammar" and fallback.sizes() == {"train": 2000, "val": 250, "test": 250}


def test_tatoeba_from_a_local_copy_end_to_end(tmp_path):
    write_fra(tmp_path, num_pairs=300)
    data = load_translation_data("auto", data_path=tmp_path, num_val=30, num_test=40, seed=0, verbose=False)
    assert data.source == "tatoeba" and data.corpus.malformed == 4
    assert data.sizes() == {"train": 379 - 70, "val": 30, "test": 40}
    # too few pairs for length buckets of 1,000: one bucket of every length
    assert data.split.buckets == ((1, None),)
    english = [{" ".join(s) for s in getattr(data, name).src} for name in ("train", "val", "test")]
    assert not (english[0] & english[1] or english[0] & english[2] or english[1] & english[2])
    src, dec_input, src_valid_lens, label = data.arrays("train")
    assert src.shape == (309, data.num_steps) and dec_input.shape == label.shape == (309, data.num_steps)
    assert data.num_steps == max(len(s) for s in data.corpus.src + data.corpus.tgt) + 1
    assert torch.equal(src_valid_lens, torch.tensor([len(s) + 1 for s in data.train.src]))
    assert (dec_input[:, 0] == data.tgt_vocab.bos).all()
    assert data.src_vocab.idx_to_token[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    # vocabularies come from the training pairs only
    train_tokens = {t for s in data.train.src for t in s}
    assert set(data.src_vocab.idx_to_token[4:]) <= train_tokens
    batches = list(data.dataloader("train", batch_size=16, seed=0))
    assert sum(len(b[0]) for b in batches) == 309
    assert all(len(set(b[2].tolist())) == 1 for b in batches)  # equal source lengths
    again = [b[0] for b in data.dataloader("train", batch_size=16, seed=0)]
    assert all(torch.equal(a, b[0]) for a, b in zip(again, batches))
    plain = list(data.dataloader("test", batch_size=16, bucket=False))
    assert torch.equal(torch.cat([b[0] for b in plain]), data.arrays("test")[0])  # test: not shuffled
    src_new, dec_new, valid_new, label_new = data.build(["The cat sees the dog."], ["Le chat voit le chien."])
    assert data.src_vocab.to_tokens(src_new[0, :7]) == ["the", "cat", "sees", "the", "dog", ".", "<eos>"]
    assert valid_new.tolist() == [7]
    assert data.tgt_vocab.to_tokens(label_new[0, :7]) == ["le", "chat", "voit", "le", "chien", ".", "<eos>"]
    assert data.tgt_vocab.to_tokens(dec_new[0, :2]) == ["<bos>", "le"]


def test_bundled_sources_carry_alignments():
    data = load_translation_data("dates", verbose=False)
    assert data.source == "dates" and data.sizes() == {"train": 4000, "val": 500, "test": 500}
    test = data.test
    assert len(test.alignments) == 500
    assert all(0 <= i < len(s) and 0 <= j < len(t)
               for s, t, a in zip(test.src, test.tgt, test.alignments) for i, j in a)
    assert data.tokenize("March 3, 2021") == ["march", "3", ",", "2021"]
    grammar = load_translation_data("grammar", num_examples=500, min_freq=1, seed=1, verbose=False)
    assert grammar.sizes() == {"train": 400, "val": 50, "test": 50}
    with pytest.raises(ValueError, match="source must be one of"):
        load_translation_data("klingon")


# ---------------------------------------------------------------------------------------------
# The real file (76k pairs): only where ATTN_UTILS_DATA points at it
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def real_path():
    value = os.environ.get(DATA_ENV_VAR)
    if not value:
        pytest.skip(ENV_REASON)
    return find_local_copy(value, DATA_ENV_VAR)


@pytest.fixture(scope="module")
def real_data(real_path):
    return load_translation_data("tatoeba", data_path=real_path, verbose=False)


def test_real_file_split(real_data):
    corpus, split = real_data.corpus, real_data.split
    assert len(corpus) > 50_000 and corpus.malformed == 0
    lengths = [len(s) for s in corpus.src]
    assert split.buckets == merge_sparse_buckets(lengths, TATOEBA_EVAL_BUCKETS, 1000)
    if max(lengths) >= 17 and sum(n >= 17 for n in lengths) >= 1000:  # d2l's full file
        assert split.buckets == TATOEBA_EVAL_BUCKETS
        assert real_data.sizes()["test"] == 1200 and real_data.sizes()["val"] == 1000
        for bucket in TATOEBA_EVAL_BUCKETS:
            assert sum(in_bucket(len(corpus.src[i]), bucket) for i in split.test) == 300
    else:  # the short local subset: one bucket, 1,000 of each
        assert split.buckets == ((1, None),)
        assert real_data.sizes()["test"] == 1000 and real_data.sizes()["val"] == 1000
    held_out = real_data.sizes()["test"] + real_data.sizes()["val"]
    assert real_data.sizes()["train"] == len(corpus) - held_out
    english = [{" ".join(corpus.src[i]) for i in getattr(split, s)} for s in ("train", "val", "test")]
    assert not (english[0] & english[1] or english[0] & english[2] or english[1] & english[2])
    # sampled, not sliced: the file is sorted by length, and the test set spans it
    assert split.test[-1] - split.test[0] > len(corpus) // 2
    lengths = {len(corpus.src[i]) for i in split.test}
    assert {3, 4, 5, 6, 7, 8} <= lengths  # (only 36 English sentences have 2 tokens)
    sizes = real_data.sizes()
    again = split_by_source(corpus, sizes["val"], sizes["test"], max_eval_len=None, seed=0, buckets=split.buckets)
    assert again == split
    assert split_by_source(corpus, sizes["val"], sizes["test"], max_eval_len=None, seed=1,
                           buckets=split.buckets).test != split.test


def test_real_file_tokens_equal_d2ls(d2l, real_path):
    raw = read_pairs_text(real_path)
    lines = raw.splitlines()[::25]  # a sample across the (length-sorted) file keeps this quick
    sample = "\n".join(lines)
    ours = parse_pairs(sample)
    # d2l knows neither the typographic apostrophe nor the thin space
    known = sample.replace("\u2019", "'").replace("\u2009", " ")
    src, tgt = d2l.MTFraEng._tokenize(None, d2l.MTFraEng._preprocess(None, known))
    assert ours.src == [s[:-1] for s in src] and ours.tgt == [t[:-1] for t in tgt]


def test_real_file_vocab_sizes(real_data):
    if len(real_data.corpus) > 150_000:  # d2l's full file
        assert 8000 < len(real_data.src_vocab) < 12000 and 14000 < len(real_data.tgt_vocab) < 21000
    else:
        assert 4000 < len(real_data.src_vocab) < 8000 and 7000 < len(real_data.tgt_vocab) < 13000
    assert real_data.tgt_vocab.unk == 3


def test_unseen_pairs_are_held_out_like_the_test_set(tmp_path):
    write_fra(tmp_path, num_pairs=300)
    data = load_translation_data("auto", data_path=tmp_path, num_train=150, num_val=30, num_test=40, seed=0,
                                 verbose=False)
    unseen = data.unseen_pairs()
    used = set(data.split.train) | set(data.split.val) | set(data.split.test)
    train_english = {" ".join(s) for s in data.train.src}
    assert unseen and unseen == sorted(unseen) and not used & set(unseen)
    assert not {" ".join(data.corpus.src[i]) for i in unseen} & train_english
    # every pair is used, seen in training, or unseen
    seen = {i for i in range(len(data.corpus)) if " ".join(data.corpus.src[i]) in train_english}
    assert used | seen | set(unseen) == set(range(len(data.corpus)))
    long = data.unseen_pairs(min_length=6)
    assert long == [i for i in unseen if len(data.corpus.src[i]) >= 6] and len(long) < len(unseen)


def test_split_sizes_and_lengths_of_the_wrong_kind_are_named():
    """Before: num_train=True trained on one pair (True == 1); max_eval_len=True kept only one-token sentences
    for evaluation, and then failed to fill the test set, blaming the size."""
    from attn_utils.data import load_bundled

    corpus = load_bundled("grammar")
    with pytest.raises(ValueError, match=r"num_train must be an int in 0\.\.\d+ .* got True"):
        split_by_source(corpus, 10, 10, num_train=True, max_eval_len=None)
    with pytest.raises(ValueError, match=r"num_train must be an int in 0\.\.\d+ .* got True"):
        load_translation_data("grammar", num_train=True, verbose=False)
    for bad in (True, 0, 2.5):
        with pytest.raises(ValueError, match=rf"max_eval_len must be a positive integer \(tokens\) or None \(any "
                                             rf"length\), got {bad!r}"):
            split_by_source(corpus, 10, 10, max_eval_len=bad)
    assert len(split_by_source(corpus, 10, 10, num_train=1, max_eval_len=None).train) == 1


def _long_fra_text() -> str:
    """Tatoeba-like lines whose English runs from 2 to 20 tokens, 1,100 pairs in each of the four default buckets."""
    lines = []
    for low, high in ((2, 8), (9, 12), (13, 16), (17, 20)):
        for k in range(1100):
            n = low + k % (high - low + 1)
            lines.append(" ".join(f"w{k}" if i == 0 else f"v{i}" for i in range(n - 1)).capitalize() + f".\tF{k} {n}.")
    return "\n".join(lines) + "\n"


def test_tatoeba_held_out_pairs_are_stratified_by_english_length(tmp_path):
    write_fra(tmp_path, text=_long_fra_text())
    data = load_translation_data("tatoeba", data_path=tmp_path, verbose=False)
    assert data.split.buckets == TATOEBA_EVAL_BUCKETS == ((1, 8), (9, 12), (13, 16), (17, None))
    assert data.sizes() == {"train": 4400 - 2200, "val": 1000, "test": 1200}
    for bucket in TATOEBA_EVAL_BUCKETS:
        assert sum(in_bucket(len(s), bucket) for s in data.test.src) == 300
        assert sum(in_bucket(len(s), bucket) for s in data.val.src) == 250
    # asked sizes are shared equally; explicit buckets, a cap, or neither
    shared = load_translation_data("tatoeba", data_path=tmp_path, num_val=40, num_test=80, verbose=False)
    assert [sum(in_bucket(len(s), b) for s in shared.test.src) for b in TATOEBA_EVAL_BUCKETS] == [20] * 4
    two = load_translation_data("tatoeba", data_path=tmp_path, eval_buckets=[(1, 12), (13, None)], num_val=10,
                                num_test=20, verbose=False)
    assert two.split.buckets == ((1, 12), (13, None)) and sum(len(s) >= 13 for s in two.test.src) == 10
    capped = load_translation_data("tatoeba", data_path=tmp_path, max_eval_len=8, num_val=100, num_test=200,
                                   verbose=False)
    assert capped.split.buckets == ((1, 8),) and max(len(s) for s in capped.test.src) <= 8
    anything = load_translation_data("tatoeba", data_path=tmp_path, eval_buckets=None, verbose=False)
    assert anything.split.buckets == ((1, None),) and anything.sizes()["test"] == 1000
    with pytest.raises(ValueError, match="either max_eval_len or eval_buckets"):
        load_translation_data("tatoeba", data_path=tmp_path, max_eval_len=8, eval_buckets=[(1, 8)], verbose=False)
    with pytest.raises(ValueError, match="increasing order"):
        load_translation_data("tatoeba", data_path=tmp_path, eval_buckets=[(9, 12), (1, 8)], verbose=False)
