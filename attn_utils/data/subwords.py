"""*Moby-Dick* as byte-level BPE subwords or as characters: running text with no ``<unk>``.

``load_subword_text(vocab_size)`` trains a byte-level byte-pair encoding (Sennrich et al., 2016;
the byte-level form of GPT-2, Radford et al., 2019) on the training chapters with Hugging Face
``tokenizers`` (trained here, nothing downloaded). Every string is a sequence of bytes and every byte
is in the vocabulary, so any text, however rare its words, encodes without ``<unk>`` and decodes back
exactly. ``load_character_text()`` is the same text one character per token.

Both keep the case and punctuation of the book; the line breaks inside a paragraph become spaces and
paragraphs are separated by one newline (``chapter_text``). The chapters are split as in
``load_running_text``: numbers ending in 5 for validation, in 0 for test.

Perplexities of different tokenisations are not comparable (a subword model makes fewer, harder
predictions than a character model). ``bits_per_character`` puts them on one scale: the total
negative log-probability of a text, in bits, over its number of characters.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from ..checks import check_positive_int, is_finite_number
from .moby_dick import check_split, moby_dick_chapters

SPECIAL_TOKENS = ("<pad>", "<bos>", "<mask>")  # ids 0, 1, 2 in both tokenisations
PAD_ID, BOS_ID, MASK_ID = (SPECIAL_TOKENS.index(t) for t in SPECIAL_TOKENS)
_SPLIT_OF = {0: "test", 5: "val"}  # the last digit of a chapter's number -> its split


def chapter_text(body: str) -> str:
    """A chapter's text as the models read it: paragraphs joined by one newline, the line breaks
    inside a paragraph turned into spaces, runs of spaces collapsed, curly apostrophes made straight."""
    paragraphs = re.split(r"\n\s*\n", body.replace("\u2019", "'"))
    return "\n".join(" ".join(p.split()) for p in paragraphs if p.strip())


def moby_dick_splits() -> dict[str, list[str]]:
    """``{"train": [...], "val": [...], "test": [...]}``: the text of each chapter (``chapter_text``)."""
    splits = {"train": [], "val": [], "test": []}
    for number, _title, body in moby_dick_chapters():
        splits[_SPLIT_OF.get(number % 10, "train")].append(chapter_text(body))
    return splits


@dataclass(frozen=True)
class TokenizedText:
    """Chapters as token ids: ``train``/``val``/``test`` lists of 1-D ``LongTensor``s, each ``<bos>``
    then the chapter's tokens; ``texts`` the chapters' strings; ``encode(text)`` a string's token ids
    (no ``<bos>``) and ``decode(ids)`` the text of token ids (special tokens dropped); ``vocab_size``
    counts the special tokens ``pad``, ``bos``, ``mask``."""

    kind: str
    vocab_size: int
    train: list[torch.Tensor]
    val: list[torch.Tensor]
    test: list[torch.Tensor]
    texts: dict[str, list[str]]
    _encode: object = field(repr=False)
    _decode: object = field(repr=False)
    pad: int = PAD_ID
    bos: int = BOS_ID
    mask: int = MASK_ID

    def encode(self, text: str) -> list[int]:
        """The token ids of ``text`` (without ``<bos>``)."""
        if not isinstance(text, str):
            raise ValueError(f"text must be a string, got {type(text).__name__}")
        return self._encode(text)

    def decode(self, ids) -> str:
        """The text of a sequence of token ids (ints in ``[0, vocab_size)``: an int sequence or a 1-D tensor);
        special tokens dropped."""
        if isinstance(ids, torch.Tensor) and ids.dim() == 1:
            ids = ids.tolist()
        if isinstance(ids, (str, bytes)) or not isinstance(ids, (list, tuple)) or not all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < self.vocab_size for i in ids):
            raise ValueError(f"ids must be a list or 1-D tensor of token ids in [0, {self.vocab_size}), got "
                             f"{ids!r:.60}")
        return self._decode([i for i in ids if i >= len(SPECIAL_TOKENS)])

    def num_tokens(self, split: str) -> int:
        """Tokens to predict in a split (``"train"``, ``"val"`` or ``"test"``): every token of every chapter but the
        leading ``<bos>``."""
        return sum(len(t) - 1 for t in getattr(self, check_split(split)))

    def num_characters(self, split: str) -> int:
        """Characters of a split's text: the denominator of bits per character."""
        return sum(len(t) for t in self.texts[check_split(split)])

    def describe(self) -> str:
        sizes = ", ".join(f"{self.num_tokens(s):,} {s}" for s in ("train", "val", "test"))
        chars = self.num_characters("train") / self.num_tokens("train")
        return (f"Moby-Dick (bundled) as {self.kind}: {self.vocab_size:,} tokens in the vocabulary; {sizes} tokens "
                f"({chars:.2f} characters per token in the training chapters)")


def bits_per_character(total_nats: float, num_characters: int) -> float:
    """A text's negative log-probability ``total_nats`` (natural log, summed over its tokens), in bits
    per character of the text (``num_characters``, a positive int): comparable across tokenisations of the same
    text."""
    if not is_finite_number(total_nats) or total_nats < 0:
        raise ValueError(f"total_nats must be a finite number >= 0 (a summed negative log-probability), "
                         f"got {total_nats!r}")
    check_positive_int("num_characters", num_characters)
    return total_nats / math.log(2) / num_characters


def _as_tensors(splits: dict[str, list[str]], encode) -> dict[str, list[torch.Tensor]]:
    return {split: [torch.tensor([BOS_ID] + encode(text)) for text in texts] for split, texts in splits.items()}


def load_subword_text(vocab_size: int = 2048, min_frequency: int = 2) -> TokenizedText:
    """*Moby-Dick* in byte-level BPE subwords, the merges learned on the training chapters only: the
    256 bytes, ``vocab_size - 259`` merges and the 3 special tokens (deterministic: the same
    vocabulary on every run). ``min_frequency``: a pair is merged only if it occurs that often."""
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    except ImportError:
        raise ImportError("load_subword_text needs Hugging Face tokenizers: pip install tokenizers") from None
    check_positive_int("vocab_size", vocab_size)
    check_positive_int("min_frequency", min_frequency)
    alphabet = pre_tokenizers.ByteLevel.alphabet()  # the 256 byte symbols
    if vocab_size < len(SPECIAL_TOKENS) + len(alphabet):
        raise ValueError(f"vocab_size must be at least {len(SPECIAL_TOKENS) + len(alphabet)} (3 special tokens and "
                         f"256 bytes), got {vocab_size}")
    splits = moby_dick_splits()
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency, show_progress=False,
                                  special_tokens=list(SPECIAL_TOKENS), initial_alphabet=alphabet)
    tokenizer.train_from_iterator(splits["train"], trainer)

    def encode(text: str) -> list[int]:
        return tokenizer.encode(text).ids

    def decode(ids: Sequence[int]) -> str:
        return tokenizer.decode(list(ids))

    tensors = _as_tensors(splits, encode)
    return TokenizedText("byte-level BPE subwords", tokenizer.get_vocab_size(), tensors["train"], tensors["val"],
                         tensors["test"], splits, encode, decode)


def load_character_text() -> TokenizedText:
    """*Moby-Dick* one character per token: the characters of the training chapters after the special
    tokens, in order of first appearance. A character that occurs only in held-out chapters raises
    (there is none in this text)."""
    splits = moby_dick_splits()
    alphabet = list(dict.fromkeys("".join(splits["train"])))
    index = {c: i for i, c in enumerate(alphabet, len(SPECIAL_TOKENS))}
    unseen = sorted({c for texts in splits.values() for text in texts for c in text} - index.keys())
    if unseen:
        raise ValueError(f"characters {unseen!r} occur only outside the training chapters")

    def encode(text: str) -> list[int]:
        return [index[c] for c in text]

    def decode(ids: Sequence[int]) -> str:
        return "".join(alphabet[i - len(SPECIAL_TOKENS)] for i in ids)

    tensors = _as_tensors(splits, encode)
    return TokenizedText("characters", len(SPECIAL_TOKENS) + len(alphabet), tensors["train"], tensors["val"],
                         tensors["test"], splits, encode, decode)
