"""The Tatoeba English–French pairs: the ``fra-eng.zip`` d2l uses, or a local copy of ``fra.txt``.

Where the text comes from, first found wins:

1. the ``data_path`` argument, then 2. the environment variable ``ATTN_UTILS_DATA``: either may
   name ``fra.txt`` itself, ``fra-eng.zip``, or a folder holding ``fra.txt``, ``fra-eng/fra.txt``
   or ``fra-eng.zip``;
3. the download cache (``paths.default_cache_dir``), downloading the zip there first if needed.

The pairs are CC BY 2.0 (France), from the Tatoeba Project (https://tatoeba.org).

What is read is checked, so that a wrong file fails with its name and what to do rather than
later and misleadingly: a local ``fra-eng.zip`` must be a zip with d2l's SHA-1 (as a download
must); the text must be UTF-8 (a byte-order mark is dropped; the first undecodable line is named);
a file in which most lines are malformed, or whose first column looks French
(``check_column_order``), is refused.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

from . import cache
from .cache import sha1_of
from .text import ParallelCorpus, parse_pairs

DATA_ENV_VAR = "ATTN_UTILS_DATA"
DATA_URL = "http://d2l-data.s3-accelerate.amazonaws.com/"
FRA_ENG_URL = DATA_URL + "fra-eng.zip"
FRA_ENG_SHA1 = "94646ad1522d915e7b0f9296181140edcf86a4f5"
#: about how many pairs d2l's ``fra-eng.zip`` holds (a local copy may be a subset of it)
FULL_FILE_PAIRS = 167_000
_CANDIDATES = ("fra.txt", os.path.join("fra-eng", "fra.txt"), "fra-eng.zip")


class TatoebaUnavailable(cache.DownloadError):
    """Neither a local copy nor a download of the Tatoeba pairs could be had."""


def ways_out(reason: str) -> str:
    """The message shown when the pairs cannot be had: the reason, then what the reader can do."""
    return (f"The Tatoeba English-French pairs are not available ({reason}). Ways out: set the environment "
            f"variable {DATA_ENV_VAR} to a folder holding fra.txt (or fra-eng/fra.txt, or fra-eng.zip) or to "
            f"the file itself; or pass data_path=... ; or use the bundled corpus, source='grammar'.")


def find_local_copy(path: str | os.PathLike, origin: str = "data_path") -> Path:
    """The pair file at or under ``path`` (a string or a path; see the module docstring); ``ValueError`` if there
    is none."""
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"{origin} must be a string or a path (fra.txt, fra-eng.zip or a folder holding one), got "
                         f"{type(path).__name__} {path!r:.40}")
    path = Path(path).expanduser()
    if path.is_file():
        return path
    if path.is_dir():
        for name in _CANDIDATES:
            if (path / name).is_file():
                return path / name
        raise ValueError(f"{origin} names a folder without the pairs: expected one of "
                         f"{', '.join(_CANDIDATES)} in it, found none")
    raise ValueError(f"{origin} names {str(path)!r}, which does not exist: expected fra.txt, fra-eng.zip "
                     "or a folder holding one of them")


def read_pairs_text(path: str | os.PathLike) -> str:
    """The text of ``fra.txt``, or of the ``fra.txt`` inside a zip such as ``fra-eng.zip``.

    The bytes must be UTF-8 (``ValueError`` naming the file and the first line that is not); a
    leading byte-order mark is dropped. A ``.zip`` that is not a zip archive is a ``ValueError``.
    """
    path = Path(path)
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            members = [m for m in archive.namelist() if m.rsplit("/", 1)[-1] == "fra.txt"]
            if not members:
                raise ValueError(f"{path.name} holds no fra.txt (expected fra-eng/fra.txt), "
                                 f"got {archive.namelist()[:5]}")
            with archive.open(members[0]) as f:
                return decode_pairs(f.read(), f"{path.name}/{members[0]}")
    if path.suffix.lower() == ".zip":
        raise ValueError(not_a_zip(path))
    return decode_pairs(path.read_bytes(), path.name)


def not_a_zip(path: Path) -> str:
    with open(path, "rb") as f:
        head = f.read(40)
    html = b"<html" in head.lower() or b"<!doctype" in head.lower()
    return (f"{path.name} is not a zip archive (it begins {head!r}{', an HTML page' if html else ''}): a failed or "
            f"interrupted download saved under that name? Download it again from {FRA_ENG_URL}, or point "
            f"data_path/{DATA_ENV_VAR} at the unzipped fra.txt")


def decode_pairs(data: bytes, filename: str) -> str:
    """``data`` (bytes) as UTF-8 text without a leading byte-order mark; ``ValueError`` naming the first bad line."""
    if not isinstance(data, (bytes, bytearray)):
        raise ValueError(f"data must be bytes, got {type(data).__name__}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        if data[:2] in (b"\xff\xfe", b"\xfe\xff") or data[:200].count(b"\x00") > 20:
            advice = "the file looks UTF-16: save it as UTF-8 (e.g. iconv -f UTF-16 -t UTF-8)"
        elif err.end >= len(data) and err.reason == "unexpected end of data":
            advice = "the file ends in the middle of a character, so it was cut short: copy or download it again"
        else:
            advice = "Latin-1 or Windows-1252? Save it as UTF-8 (e.g. iconv -f LATIN1 -t UTF-8)"
        raise ValueError(f"{filename}: line {line} is not UTF-8 (byte {data[err.start:err.start + 1]!r} at "
                         f"offset {err.start}: {err.reason}); {advice}") from None


def check_local_zip(path: Path, sha1: str = FRA_ENG_SHA1) -> None:
    """A local ``fra-eng.zip`` must be d2l's (the download's SHA-1); any other name is not checked.

    A copy of one's own (a subset, say) can be used unzipped: a local ``fra.txt`` is not checked.
    """
    if path.name != "fra-eng.zip":
        return
    if not zipfile.is_zipfile(path):
        raise ValueError(not_a_zip(path))
    got = sha1_of(path)
    if got != sha1:
        raise ValueError(f"{path.name}: checksum mismatch, SHA-1 {got} instead of d2l's {sha1} (an incomplete "
                         f"or altered copy?). Download it again from {FRA_ENG_URL}, or, for a file of your own, "
                         f"unzip it and point data_path/{DATA_ENV_VAR} at fra.txt (which is not checked)")


#: markers of French in the first column: accented letters and frequent French words (none English)
_FRENCH_LETTERS = frozenset("éèêëàâçîïôûùœ")
_FRENCH_WORDS = frozenset(["je", "j'ai", "tu", "il", "elle", "nous", "vous", "ils", "elles", "est", "c'est", "suis",
                           "sont", "le", "la", "les", "un", "une", "des", "du", "de", "ne", "pas", "et", "qui", "que",
                           "ce", "mon", "ma", "mes"])


def french_share(sentences) -> float:
    """The share of tokenised sentences (a list of token lists) that hold an accented letter or a frequent French
    word."""
    if isinstance(sentences, (str, bytes)) or not hasattr(sentences, "__iter__"):
        raise ValueError(f"sentences must be a list of token lists, got {type(sentences).__name__}")
    sentences = list(sentences)
    if not all(isinstance(s, (list, tuple)) and all(isinstance(t, str) for t in s) for s in sentences):
        raise ValueError("sentences must be a list of token lists (lists of strings)")
    hits = sum(any(t in _FRENCH_WORDS or not _FRENCH_LETTERS.isdisjoint(t) for t in s) for s in sentences)
    return hits / max(1, len(sentences))


def check_column_order(corpus: ParallelCorpus, filename: str, sample: int = 500) -> None:
    """``ValueError`` when the English column looks French: columns swapped (French<TAB>English).

    Over the first ``sample`` pairs, the share of sentences with a French marker (``french_share``):
    the columns are deemed swapped when over half the first column's have one and fewer than half
    as many of the second column's. English sentences rarely have one (a name such as "Zoé").
    """
    first, second = french_share(corpus.src[:sample]), french_share(corpus.tgt[:sample])
    if first > 0.5 and second < first / 2:
        raise ValueError(f"{filename}: the columns look swapped: {first:.0%} of the first column's sentences look "
                         f"French against {second:.0%} of the second's (first {sample} pairs). Each line must be "
                         "English<TAB>French, as in d2l's fra.txt; swap the columns, e.g. "
                         "awk -F'\\t' -v OFS='\\t' '{print $2, $1}' fra.txt, or pass check_columns=False")


def locate(data_path: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None,
           url: str = FRA_ENG_URL, sha1: str = FRA_ENG_SHA1) -> tuple[Path, str]:
    """``(file, origin)``: where the pairs are, and a path-free description of how they were found.

    Raises ``TatoebaUnavailable`` (naming the ways out) when nothing is configured and the
    download fails, and ``ValueError`` when ``data_path``/``ATTN_UTILS_DATA`` name a missing copy.
    """
    if data_path is not None:
        return find_local_copy(data_path, "data_path"), "data_path"
    if os.environ.get(DATA_ENV_VAR):
        return find_local_copy(os.environ[DATA_ENV_VAR], DATA_ENV_VAR), DATA_ENV_VAR
    try:
        return cache.download(url, sha1, cache_dir, filename="fra-eng.zip"), "the download cache"
    except cache.DownloadError as err:
        raise TatoebaUnavailable(ways_out(str(err))) from err


def load_tatoeba(data_path: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None,
                 verbose: bool = True, url: str = FRA_ENG_URL, sha1: str = FRA_ENG_SHA1,
                 check_columns: bool = True) -> ParallelCorpus:
    """The preprocessed, tokenised pairs; malformed lines are counted in ``.malformed`` and reported.

    ``ValueError`` (naming the file) for a local ``fra-eng.zip`` that is not d2l's, text that is not
    UTF-8, a file with no pair or with more malformed lines than pairs, and, with ``check_columns``,
    French in the English column (see the module docstring).
    """
    path, origin = locate(data_path, cache_dir, url, sha1)
    if origin != "the download cache":  # the cache checks its copy itself
        check_local_zip(path, sha1)
    corpus = parse_pairs(read_pairs_text(path), name="tatoeba", ends_with_newline=True)
    if len(corpus) == 0 or corpus.malformed > len(corpus):
        raise ValueError(f"{path.name}: {corpus.malformed:,} malformed line(s) against {len(corpus):,} pair(s), the "
                         f"first at {corpus.first_malformed or '(none)'}; each line must be English<TAB>French, "
                         "optionally <TAB> and an attribution, as in d2l's fra.txt")
    if check_columns:
        check_column_order(corpus, path.name)
    if verbose:
        print(describe(corpus, path.name, origin))
    return corpus


def describe(corpus: ParallelCorpus, filename: str, origin: str) -> str:
    """One line naming the file read, its size and the length of its English sentences (no paths):
    length claims about "the corpus" hold for the file this line describes."""
    lengths = [len(s) for s in corpus.src] or [0]
    return (f"Tatoeba English-French: {filename} from {origin}, {len(corpus):,} pairs (d2l's full file holds "
            f"about {FULL_FILE_PAIRS:,}), English sentences of {min(lengths)} to {max(lengths)} tokens, "
            f"{corpus.malformed:,} malformed line(s) skipped" + (f", the first at {corpus.first_malformed}"
                                                                  if corpus.first_malformed else ""))
