"""Preprocessing and tokenising sentence pairs the way d2l does (``MTFraEng``), plus ’ → '.

A line of a pair file is ``English<TAB>French``, optionally followed by a third column (the
full Tatoeba export carries an attribution there), which is ignored. Lines that do not have
two or three tab-separated fields, or whose English or French is empty, are malformed: they
are skipped and counted, never silently dropped, and the first of them is kept to be shown
(``ParallelCorpus.first_malformed``). A byte-order mark at the start of the text is dropped. In
a Tatoeba file a last line without a line break was cut short, mid-sentence, and is malformed too.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass

from ..checks import check_bool

_SPACES = str.maketrans({"\u202f": " ", "\xa0": " ", "\u2009": " ", "\u2019": "'"})
# d2l inserts a space before , . ! ? unless the previous character is already a space.
_PUNCT = re.compile(r"(?<=[^ ])([,.!?])")


def preprocess(text: str) -> str:
    """d2l's ``_preprocess``: non-breaking spaces → spaces, lowercase, a space before , . ! ?.

    Also normalises the typographic apostrophe ’ to ' (so "l’eau" and "l'eau" are one token) and
    the thin space to a space (d2l leaves it inside tokens: "recule\u2009" beside "!"). ``text``: a string.
    """
    _check_text(text, "text")
    return _PUNCT.sub(r" \1", text.translate(_SPACES).lower())


def tokenize(sentence: str) -> list[str]:
    """Split a preprocessed sentence (a string) on whitespace (empty tokens never appear)."""
    _check_text(sentence, "sentence")
    return sentence.split()


def _check_text(text, name: str) -> None:
    if not isinstance(text, str):
        raise ValueError(f"{name} must be a string, got {type(text).__name__} {text!r:.40}")


@dataclass
class ParallelCorpus:
    """Tokenised sentence pairs, with optional gold word alignments.

    ``alignments[k]`` is a list of ``(source_index, target_index)`` links between the tokens of
    ``src[k]`` and ``tgt[k]`` (no ``<eos>``/``<bos>``), or ``None`` where a corpus has none.
    ``malformed`` counts the lines skipped when the corpus was read; ``first_malformed`` shows the
    first of them (``"line 51: 'no tab on this line' (1 tab-separated field(s), expected 2 or 3)"``), or is
    empty.
    """

    src: list[list[str]]
    tgt: list[list[str]]
    alignments: list[list[tuple[int, int]]] | None = None
    malformed: int = 0
    name: str = ""
    first_malformed: str = ""

    def __post_init__(self):
        for name, sentences in (("src", self.src), ("tgt", self.tgt)):
            if not isinstance(sentences, (list, tuple)) or not all(isinstance(s, (list, tuple)) for s in sentences):
                raise ValueError(f"{name} must be a list of token lists (a string is no token list), got "
                                 f"{type(sentences).__name__} {sentences!r:.60}")
        if len(self.src) != len(self.tgt):
            raise ValueError(f"src and tgt must have the same number of sentences, "
                             f"got {len(self.src)} and {len(self.tgt)}")
        if self.alignments is not None and len(self.alignments) != len(self.src):
            raise ValueError(f"expected one alignment per pair ({len(self.src)}), got {len(self.alignments)}")

    def __len__(self) -> int:
        return len(self.src)

    def __repr__(self) -> str:
        aligned = "with" if self.alignments is not None else "without"
        return f"ParallelCorpus({self.name!r}: {len(self):,} pairs {aligned} alignments, {self.malformed} malformed)"

    def subset(self, indices, name: str | None = None) -> ParallelCorpus:
        """The pairs at ``indices`` (ints in ``[0, len(self))``; a negative one would count from the end), in
        that order."""
        try:
            indices = list(indices)
            if any(isinstance(i, bool) for i in indices):  # True would be pair 1
                raise TypeError
            indices = [operator.index(i) for i in indices]  # not a float or a string
        except TypeError:
            raise ValueError(f"indices must be integers in [0, {len(self)}), got {indices!r:.60}") from None
        if indices and not 0 <= min(indices) <= max(indices) < len(self):
            raise ValueError(f"indices must be integers in [0, {len(self)}), got {min(indices)}..{max(indices)}")
        return ParallelCorpus(
            src=[self.src[i] for i in indices],
            tgt=[self.tgt[i] for i in indices],
            alignments=None if self.alignments is None else [self.alignments[i] for i in indices],
            malformed=0,
            name=self.name if name is None else name,
        )


def parse_alignment(text: str) -> list[tuple[int, int]]:
    """Read Pharaoh-style links ``"0-1 2-0"`` (a string) into ``[(0, 1), (2, 0)]`` (source-target)."""
    _check_text(text, "text")
    links = []
    for item in text.split():
        src, sep, tgt = item.partition("-")
        if not sep or not src.isdigit() or not tgt.isdigit():
            raise ValueError(f"alignment links look like 'i-j' (source-target), got {item!r} in {text!r}")
        links.append((int(src), int(tgt)))
    return links


def format_alignment(links) -> str:
    """Write links as Pharaoh-style ``"i-j"`` pairs (source-target), in the order given."""
    return " ".join(f"{i}-{j}" for i, j in links)


def parse_pairs(text: str, name: str = "", with_alignments: bool = False,
                ends_with_newline: bool = False) -> ParallelCorpus:
    """Read ``English<TAB>French[<TAB>third column]`` lines into a preprocessed ``ParallelCorpus``.

    Blank lines are ignored. With ``with_alignments=True`` the third column holds the gold
    alignment (``"i-j ..."``) and is required; otherwise a third column (Tatoeba's attribution)
    is ignored. Malformed lines are skipped and counted in ``.malformed``. With
    ``ends_with_newline=True`` (a file that ends every line with a line break, as d2l's does), a last
    line without one was cut short in copying or downloading, mid-sentence: it is malformed too.
    ``text`` is a string (decode bytes first), the flags are bools.
    """
    _check_text(text, "text")
    check_bool("with_alignments", with_alignments)
    check_bool("ends_with_newline", ends_with_newline)
    if text.startswith("\ufeff"):  # a byte-order mark (Windows editors write one): not part of the first word
        text = text[1:]
    src, tgt, aligns = [], [], []
    malformed, first_malformed = 0, ""
    cut_short = ""
    if ends_with_newline and text.rsplit("\n", 1)[-1].strip():
        cut_short = _show_line(text, text.count("\n") + 1, "no line break after it: the file was cut short "
                               "here; copy or download it again")
        text = text.rsplit("\n", 1)[0] if "\n" in text else ""
    # One pass over the whole text is several times faster than one per field, and gives the same
    # tokens: a space it inserts after a tab or a line break is dropped by the tokenizer. Lines end
    # at "\n" only, as in d2l (a "\r" before it is whitespace to the tokenizer).
    for number, line in enumerate(preprocess(text).split("\n"), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) not in (2, 3) or (with_alignments and len(fields) != 3):
            malformed += 1
            first_malformed = first_malformed or _show_line(
                text, number, f"{len(fields)} tab-separated field(s), expected {'3' if with_alignments else '2 or 3'}")
            continue
        english, french = tokenize(fields[0]), tokenize(fields[1])
        if not english or not french:
            malformed += 1
            first_malformed = first_malformed or _show_line(text, number, "empty English or French")
            continue
        src.append(english)
        tgt.append(french)
        if with_alignments:
            aligns.append(parse_alignment(fields[2]))
    if cut_short:
        malformed, first_malformed = malformed + 1, first_malformed or cut_short
    return ParallelCorpus(src, tgt, aligns if with_alignments else None, malformed, name, first_malformed)


def _show_line(text: str, number: int, why: str, width: int = 60) -> str:
    """``"line 51: 'no tab on this line' (why)"``: the line as written (not preprocessed), cut to ``width``."""
    line = text.split("\n", number)[number - 1].rstrip("\r")
    shown = line if len(line) <= width else line[:width] + "..."
    return f"line {number}: {shown!r} ({why})"
