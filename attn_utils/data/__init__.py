"""Data for the course: translation corpora, vocabularies, batches, and chapter 7's classification data.

``load_translation_data(source="auto"|"tatoeba"|"grammar"|"dates", ...)`` is the entry point.
The Tatoeba pairs come from ``data_path=``, the environment variable ``ATTN_UTILS_DATA``, or
a download cached in the repository's ``data/cache/`` (a per-user cache folder when the package
is installed without the repository); offline with none of these, ``"auto"`` falls back to the
bundled grammar corpus. Small modules: ``text`` (preprocessing), ``vocab``, ``batching``,
``splits``, ``cache`` and ``tatoeba`` (files), ``grammar`` and ``dates`` (generators with gold
alignments), ``bundled`` (their snapshots), ``generate`` (rewrites the snapshots), ``loader``.
Chapter 7: ``relations`` (generated SemEval-style relation sentences, labels, tensors), ``semeval``
(the SemEval-2010 Task 8 files), ``reviews`` (generated reviews in which one sentence decides) and
``digits`` (canvases of ``sklearn``'s handwritten digits with a frame around the one to read).
Chapter 11: ``moby_dick`` (running text) and ``windows`` (random windows of it to train on).
The data modules import nothing of the package but each other and its foundation (``checks``,
``canvas``): no model, trainer or evaluation.
"""

from __future__ import annotations

from .batching import BucketBatchSampler, build_array, pad_or_truncate
from .bundled import BUNDLED, bundled_text, load_bundled
from .cache import DownloadError, download, sha1_of
from .dates import format_date, generate_dates, iso_date, tokenize_date
from .digits import canvas_layout, digit_split, draw_canvases, load_digit_images, make_digit_canvases
from .grammar import generate_grammar
from .loader import TranslationData, load_translation_data
from .paths import default_cache_dir, repository_data_dir
from .relations import (
    RelationCorpus,
    RelationExample,
    RelationTensors,
    make_relation_corpus,
    relation_tensors,
    relation_type,
    relation_vocab,
)
from .reviews import (
    Review,
    ReviewData,
    ReviewSplit,
    documents_to_tensors,
    make_review_data,
    make_reviews,
    review_label,
    review_vocab,
)
from .semeval import SEMEVAL_ENV_VAR, load_semeval, load_semeval_splits
from .splits import Split, split_by_source
from .tatoeba import DATA_ENV_VAR, FRA_ENG_SHA1, FRA_ENG_URL, TatoebaUnavailable, load_tatoeba
from .text import ParallelCorpus, parse_pairs, preprocess, tokenize
from .vocab import RESERVED_TOKENS, Vocab
from .windows import random_windows

__all__ = [
    "BUNDLED", "BucketBatchSampler", "DATA_ENV_VAR", "DownloadError", "FRA_ENG_SHA1", "FRA_ENG_URL",
    "ParallelCorpus", "RESERVED_TOKENS", "RelationCorpus", "RelationExample", "RelationTensors", "Review",
    "ReviewData", "ReviewSplit", "SEMEVAL_ENV_VAR", "Split", "TatoebaUnavailable", "TranslationData", "Vocab",
    "build_array", "bundled_text", "canvas_layout", "default_cache_dir", "digit_split", "documents_to_tensors",
    "download", "draw_canvases", "format_date", "generate_dates", "generate_grammar", "iso_date",
    "load_bundled", "load_digit_images", "load_semeval", "load_semeval_splits", "load_tatoeba",
    "load_translation_data", "make_digit_canvases", "make_relation_corpus", "make_review_data", "make_reviews",
    "pad_or_truncate", "parse_pairs", "preprocess", "random_windows", "relation_tensors", "relation_type",
    "relation_vocab", "repository_data_dir", "review_label", "review_vocab", "sha1_of", "split_by_source",
    "tokenize", "tokenize_date",
]
