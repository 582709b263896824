"""Data for the course: translation corpora, vocabularies, batches.

``load_translation_data(source="auto"|"tatoeba"|"grammar"|"dates", ...)`` is the entry point.
The Tatoeba pairs come from ``data_path=``, the environment variable ``ATTN_UTILS_DATA``, or
a download cached in the repository's ``data/cache/`` (a per-user cache folder when the package
is installed without the repository); offline with none of these, ``"auto"`` falls back to the
bundled grammar corpus. Small modules: ``text`` (preprocessing), ``vocab``, ``batching``,
``splits``, ``cache`` and ``tatoeba`` (files), ``grammar`` and ``dates`` (generators with gold
alignments), ``bundled`` (their snapshots), ``generate`` (rewrites the snapshots), ``loader``.
"""

from __future__ import annotations

from .batching import BucketBatchSampler, build_array, pad_or_truncate
from .bundled import BUNDLED, bundled_text, load_bundled
from .cache import DownloadError, download, sha1_of
from .dates import format_date, generate_dates, iso_date, tokenize_date
from .grammar import generate_grammar
from .loader import TranslationData, load_translation_data
from .paths import default_cache_dir, repository_data_dir
from .splits import Split, split_by_source
from .tatoeba import DATA_ENV_VAR, FRA_ENG_SHA1, FRA_ENG_URL, TatoebaUnavailable, load_tatoeba
from .text import ParallelCorpus, parse_pairs, preprocess, tokenize
from .vocab import RESERVED_TOKENS, Vocab

__all__ = [
    "BUNDLED", "BucketBatchSampler", "DATA_ENV_VAR", "DownloadError", "FRA_ENG_SHA1", "FRA_ENG_URL",
    "ParallelCorpus", "RESERVED_TOKENS", "Split", "TatoebaUnavailable", "TranslationData", "Vocab",
    "build_array", "bundled_text", "default_cache_dir", "download", "format_date", "generate_dates",
    "generate_grammar", "iso_date", "load_bundled", "load_tatoeba", "load_translation_data",
    "pad_or_truncate", "parse_pairs", "preprocess", "repository_data_dir", "sha1_of", "split_by_source",
    "tokenize", "tokenize_date",
]
