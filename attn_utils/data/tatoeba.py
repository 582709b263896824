"""The Tatoeba English–French pairs: the ``fra-eng.zip`` d2l uses, or a local copy of ``fra.txt``.

Where the text comes from, first found wins:

1. the ``data_path`` argument, then 2. the environment variable ``ATTN_UTILS_DATA``: either may
   name ``fra.txt`` itself, ``fra-eng.zip``, or a folder holding ``fra.txt``, ``fra-eng/fra.txt``
   or ``fra-eng.zip``;
3. the download cache (``paths.default_cache_dir``), downloading the zip there first if needed.

The pairs are CC BY 2.0 (France), from the Tatoeba Project (https://tatoeba.org).
"""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

from . import cache
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
    """The pair file at or under ``path`` (see the module docstring); ``ValueError`` if there is none."""
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
    """The text of ``fra.txt``, or of the ``fra.txt`` inside a zip such as ``fra-eng.zip``."""
    path = Path(path)
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            members = [m for m in archive.namelist() if m.rsplit("/", 1)[-1] == "fra.txt"]
            if not members:
                raise ValueError(f"{path.name} holds no fra.txt (expected fra-eng/fra.txt), "
                                 f"got {archive.namelist()[:5]}")
            with archive.open(members[0]) as f:
                return io.TextIOWrapper(f, encoding="utf-8").read()
    return path.read_text(encoding="utf-8")


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
                 verbose: bool = True, url: str = FRA_ENG_URL, sha1: str = FRA_ENG_SHA1) -> ParallelCorpus:
    """The preprocessed, tokenised pairs; malformed lines are counted in ``.malformed`` and reported."""
    path, origin = locate(data_path, cache_dir, url, sha1)
    corpus = parse_pairs(read_pairs_text(path), name="tatoeba")
    if verbose:
        print(describe(corpus, path.name, origin))
    return corpus


def describe(corpus: ParallelCorpus, filename: str, origin: str) -> str:
    """One line naming the file read, its size and the length of its English sentences (no paths):
    length claims about "the corpus" hold for the file this line describes."""
    lengths = [len(s) for s in corpus.src] or [0]
    return (f"Tatoeba English-French: {filename} from {origin}, {len(corpus):,} pairs (d2l's full file holds "
            f"about {FULL_FILE_PAIRS:,}), English sentences of {min(lengths)} to {max(lengths)} tokens, "
            f"{corpus.malformed:,} malformed line(s) skipped")
