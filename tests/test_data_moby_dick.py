"""The bundled running text: its integrity, its chapters, the tokeniser and the chapter splits."""

import pytest
import torch

from attn_utils.data.moby_dick import load_running_text, moby_dick_chapters, moby_dick_text, word_tokens


def test_the_bundled_text_is_the_whole_novel():
    text = moby_dick_text()  # raises if the SHA-256 differs
    assert text.startswith("CHAPTER 1. Loomings.\n\nCall me Ishmael.")
    chapters = moby_dick_chapters()
    assert [n for n, _, _ in chapters] == list(range(1, 136))
    assert chapters[0][1] == "Loomings." and chapters[134][1] == "The Chase.\u2014Third Day."
    assert chapters[134][2].endswith("rolled on as it rolled five thousand years ago.")


def test_word_tokens():
    assert word_tokens("Call me Ishmael. Some years ago\u2014never mind") == [
        "call", "me", "ishmael", ".", "some", "years", "ago", "\u2014", "never", "mind"]
    assert word_tokens("The whale\u2019s jaw, 1851; don't!") == [
        "the", "whale's", "jaw", ",", "1851", ";", "don't", "!"]


def test_chapters_split_by_their_number_and_vocabulary_from_training_only():
    data = load_running_text(min_freq=3)
    assert data.chapters["test"] == list(range(10, 136, 10))
    assert data.chapters["val"] == list(range(5, 136, 10))
    assert len(data.chapters["train"]) == 135 - 13 - 14
    bos = data.vocab["<bos>"]
    assert all(int(t[0]) == bos and int((t == bos).sum()) == 1 for t in data.train + data.val + data.test)
    # the first test chapter, 10 ("A Bosom Friend."), word for word through the vocabulary
    body = dict((n, b) for n, _, b in moby_dick_chapters())[10]
    assert data.vocab.to_tokens(data.test[0][1:6].tolist()) == [
        w if w in data.vocab else "<unk>" for w in word_tokens(body)[:5]]
    counts = torch.bincount(torch.cat(data.train), minlength=len(data.vocab))
    ordinary = [i for i, t in enumerate(data.vocab.idx_to_token) if not t.startswith("<")]
    assert int(counts[ordinary].min()) >= 3  # every word of the vocabulary occurs 3 times in training
    assert data.num_tokens("train") == sum(len(t) - 1 for t in data.train) > 200_000
    assert "Moby-Dick (bundled)" in data.describe()


def test_bad_arguments():
    with pytest.raises(ValueError, match="min_freq must be a positive integer"):
        load_running_text(min_freq=0)
    with pytest.raises(ValueError, match="must include '<bos>'"):
        load_running_text(reserved_tokens=("<pad>",))
