"""Moby-Dick as byte-level BPE subwords and as characters: exact round trips, no <unk>, fixed splits."""

from __future__ import annotations

import math

import pytest
import torch

from attn_utils.data.moby_dick import moby_dick_chapters
from attn_utils.data.subwords import (
    bits_per_character,
    chapter_text,
    load_character_text,
    load_subword_text,
    moby_dick_splits,
)

tokenizers = pytest.importorskip("tokenizers")  # a test requirement; the loader names it if missing


@pytest.fixture(scope="module")
def subwords():
    return load_subword_text(vocab_size=512)


def test_chapter_text_joins_lines_of_a_paragraph_and_keeps_one_newline_between_paragraphs():
    body = "Call me  Ishmael. Some\\nyears ago\u2014never mind\n\n\n  how long\nprecisely \u2019tis.\n"
    body = body.replace("\\n", "\n")
    assert chapter_text(body) == "Call me Ishmael. Some years ago\u2014never mind\nhow long precisely 'tis."


def test_splits_are_the_chapters_ending_in_5_and_0():
    splits = moby_dick_splits()
    assert [len(splits[s]) for s in ("train", "val", "test")] == [108, 14, 13]
    chapters = {number: body for number, _title, body in moby_dick_chapters()}
    assert splits["test"][0] == chapter_text(chapters[10]) and splits["val"][-1] == chapter_text(chapters[135])


def test_subwords_decode_every_chapter_back_exactly_and_start_with_bos(subwords):
    assert subwords.vocab_size == 512
    for split in ("train", "val", "test"):
        for ids, text in zip(getattr(subwords, split), subwords.texts[split]):
            assert ids[0].item() == subwords.bos and int(ids[1:].min()) >= 3  # no special token inside
            assert subwords.decode(ids) == text
    assert subwords.num_characters("test") == sum(len(t) for t in subwords.texts["test"])
    # a word the book never uses still encodes, in pieces, and comes back
    assert subwords.decode(torch.tensor(subwords.encode("Zyzzyva quux"))) == "Zyzzyva quux"


def test_subword_merges_are_learned_from_the_training_chapters_and_are_deterministic(subwords):
    again = load_subword_text(vocab_size=512)
    assert all(torch.equal(a, b) for a, b in zip(subwords.train + subwords.test, again.train + again.test))
    # merging makes tokens longer than one byte on average, more so with a larger vocabulary
    per_token = subwords.num_characters("train") / subwords.num_tokens("train")
    larger = load_subword_text(vocab_size=2048)
    assert 1.5 < per_token < larger.num_characters("train") / larger.num_tokens("train")


def test_characters_are_one_token_each():
    chars = load_character_text()
    for ids, text in zip(chars.test, chars.texts["test"]):
        assert len(ids) == len(text) + 1 and chars.decode(ids) == text
    assert chars.num_tokens("train") == chars.num_characters("train")
    assert chars.vocab_size == 3 + len(set("".join(chars.texts["train"])))


def test_bits_per_character_by_hand_and_bad_values():
    assert bits_per_character(100 * math.log(2), 50) == pytest.approx(2.0)
    for bad in (float("nan"), float("inf"), -1.0):
        with pytest.raises(ValueError, match="total_nats must be a finite number >= 0"):
            bits_per_character(bad, 10)
    with pytest.raises(ValueError, match="num_characters"):
        bits_per_character(1.0, 0)


def test_too_small_a_vocabulary_is_refused():
    with pytest.raises(ValueError, match="vocab_size must be at least 259"):
        load_subword_text(vocab_size=100)
