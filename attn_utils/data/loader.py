"""One entry point for the translation chapters: ``load_translation_data``.

It returns a ``TranslationData``: the corpus, a held-out split by English string, vocabularies
built on the training pairs only, fixed-length arrays as d2l makes them, and DataLoaders whose
batches hold sources of equal length. Sources:

* ``"tatoeba"``: the real English–French pairs (``tatoeba.py`` says where they come from);
* ``"grammar"``, ``"dates"``: the bundled generated corpora, with gold alignments;
* ``"auto"`` (default): Tatoeba when it can be had, else the grammar corpus, announced in one line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch

from ..checks import check_bool, check_non_negative_int, check_positive_int, check_seed
from .batching import BucketBatchSampler, build_array
from .bundled import BUNDLED, load_bundled
from .dates import tokenize_date
from .splits import Split, check_buckets, merge_sparse_buckets, split_by_source
from .tatoeba import DATA_ENV_VAR, TatoebaUnavailable, load_tatoeba
from .text import ParallelCorpus, preprocess, tokenize
from .vocab import RESERVED_TOKENS, Vocab

SOURCES = ("auto", "tatoeba", "grammar", "dates")
SPLITS = ("train", "val", "test")
#: English lengths (tokens; punctuation counts, ``<eos>`` does not) of Tatoeba's held-out buckets
TATOEBA_EVAL_BUCKETS = ((1, 8), (9, 12), (13, 16), (17, None))
#: Tatoeba's held-out pairs per bucket: test and validation
TATOEBA_TEST_PER_BUCKET, TATOEBA_VAL_PER_BUCKET = 300, 200
#: held-out pairs of each set when the lengths are capped instead (``max_eval_len``)
TATOEBA_EVAL_SIZE = 1000


@dataclass
class TranslationData:
    """A corpus split three ways, with vocabularies, arrays and batches.

    ``train``, ``val``, ``test`` are ``ParallelCorpus`` objects (token lists, and alignments for
    the bundled corpora). ``arrays(split)`` gives d2l's four tensors ``(src, dec_input,
    src_valid_lens, label)``; ``dataloader(split, batch_size)`` batches them.
    """

    source: str
    corpus: ParallelCorpus
    split: Split
    src_vocab: Vocab
    tgt_vocab: Vocab
    num_steps: int
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def pairs(self, split: str) -> ParallelCorpus:
        """The pairs of ``split`` (``'train'``, ``'val'`` or ``'test'``)."""
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        if ("pairs", split) not in self._cache:
            self._cache["pairs", split] = self.corpus.subset(getattr(self.split, split), name=f"{self.source}/{split}")
        return self._cache["pairs", split]

    @property
    def train(self) -> ParallelCorpus:
        return self.pairs("train")

    @property
    def val(self) -> ParallelCorpus:
        return self.pairs("val")

    @property
    def test(self) -> ParallelCorpus:
        return self.pairs("test")

    def sizes(self) -> dict[str, int]:
        """Number of pairs in each split."""
        return self.split.sizes()

    def unseen_pairs(self, min_length: int = 1) -> list[int]:
        """Indices (into ``corpus``, in order) of the pairs no split uses whose source sentence never occurs in
        training and has at least ``min_length`` tokens (an int >= 0): held out as well as the test set, for larger
        samples."""
        check_non_negative_int("min_length", min_length)
        if "unseen" not in self._cache:
            train_sources = {" ".join(self.corpus.src[i]) for i in self.split.train}
            used = set(self.split.train) | set(self.split.val) | set(self.split.test)
            self._cache["unseen"] = [i for i in range(len(self.corpus)) if i not in used
                                     and " ".join(self.corpus.src[i]) not in train_sources]
        return [i for i in self._cache["unseen"] if len(self.corpus.src[i]) >= min_length]

    def tokenize(self, sentence: str) -> list[str]:
        """Tokens of a sentence typed by hand (a string), preprocessed the way this corpus was."""
        if not isinstance(sentence, str):
            raise ValueError(f"sentence must be a string, got {type(sentence).__name__} {sentence!r:.40}")
        return tokenize_date(sentence) if self.source == "dates" else tokenize(preprocess(sentence))

    def build(self, src_sentences, tgt_sentences=None):
        """d2l's ``build``: arrays for new sentences (strings or token lists) with this data's vocabularies.

        Returns ``(src, dec_input, src_valid_lens, label)``; without ``tgt_sentences`` the targets
        are empty (``dec_input`` is then ``<bos>`` followed by ``<eos>`` and padding). Both are lists (a single
        string would be read as one sentence per character).
        """
        for name, sentences in (("src_sentences", src_sentences), ("tgt_sentences", tgt_sentences)):
            if sentences is None and name == "tgt_sentences":
                continue
            if not isinstance(sentences, (list, tuple)) or not all(
                    isinstance(s, (str, list, tuple)) for s in sentences):
                raise ValueError(f"{name} must be a list of sentences (strings or token lists), got "
                                 f"{type(sentences).__name__} {sentences!r:.60}")
        src = [s if isinstance(s, (list, tuple)) else self.tokenize(s) for s in src_sentences]
        tgt = [[] for _ in src] if tgt_sentences is None else [
            t if isinstance(t, (list, tuple)) else self.tokenize(t) for t in tgt_sentences]
        if len(src) != len(tgt):
            raise ValueError(f"expected as many target sentences as sources, got {len(tgt)} and {len(src)}")
        return self._build(src, tgt)

    def _build(self, src, tgt):
        src_array, src_valid_lens = build_array(src, self.src_vocab, self.num_steps)
        tgt_array, _ = build_array(tgt, self.tgt_vocab, self.num_steps, is_tgt=True)
        return src_array, tgt_array[:, :-1], src_valid_lens, tgt_array[:, 1:]

    def arrays(self, split: str):
        """``(src, dec_input, src_valid_lens, label)`` for every pair of ``split`` (computed once)."""
        if not isinstance(split, str) or split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        if ("arrays", split) not in self._cache:
            pairs = self.pairs(split)
            self._cache["arrays", split] = self._build(pairs.src, pairs.tgt)
        return self._cache["arrays", split]

    def dataloader(self, split: str = "train", batch_size: int = 128, shuffle: bool | None = None,
                   seed: int = 0, bucket: bool = True) -> torch.utils.data.DataLoader:
        """Batches ``(src, dec_input, src_valid_lens, label)`` of ``split``.

        ``bucket=True`` groups sources of equal length (``BucketBatchSampler``); ``shuffle`` (a bool)
        defaults to True for training only; ``seed`` (an int) fixes the order of every epoch.
        """
        check_positive_int("batch_size", batch_size)
        seed = check_seed("seed", seed)
        check_bool("bucket", bucket)
        if shuffle is not None:
            check_bool("shuffle", shuffle)
        dataset = torch.utils.data.TensorDataset(*self.arrays(split))
        shuffle = split == "train" if shuffle is None else shuffle
        if bucket:
            sampler = BucketBatchSampler(self.arrays(split)[2], batch_size, seed=seed, shuffle=shuffle)
            return torch.utils.data.DataLoader(dataset, batch_sampler=sampler)
        generator = torch.Generator().manual_seed(seed)
        return torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, generator=generator)

    def __repr__(self) -> str:
        return f"TranslationData({self.summary()})"

    def summary(self) -> str:
        """One line: source, split sizes, vocabulary sizes, num_steps."""
        sizes = ", ".join(f"{k} {v:,}" for k, v in self.sizes().items())
        return (f"{self.source}: {sizes} pairs; vocabularies {len(self.src_vocab):,} (source) and "
                f"{len(self.tgt_vocab):,} (target) tokens; num_steps {self.num_steps}")


def _load_corpus(source: str, data_path, cache_dir, num_examples, verbose: bool) -> tuple[str, ParallelCorpus]:
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    if source in BUNDLED:
        return source, load_bundled(source, num_examples)
    try:
        return "tatoeba", load_tatoeba(data_path, cache_dir, verbose=verbose)
    except TatoebaUnavailable as err:
        if source == "tatoeba":
            raise
        corpus = load_bundled("grammar", num_examples)
        if verbose:
            print(fallback_banner(str(err.__cause__ or err), len(corpus)))
        return "grammar", corpus


def fallback_banner(reason: str, pairs: int) -> str:
    """The notice printed when the Tatoeba pairs cannot be had and the grammar corpus stands in.

    A chapter's text describes its stored Tatoeba run; offline, every number printed comes from a
    small generated corpus on which the same models score far higher, so the notice says so plainly.
    """
    rule = "=" * 72
    return "\n".join([
        rule,
        "OFFLINE: the Tatoeba pairs are not available",
        f"  ({reason}).",
        f"This run uses the bundled English-French grammar corpus instead: {pairs:,} generated",
        "sentence pairs from a vocabulary of about a hundred words, far easier than real sentences.",
        "Every number printed below comes from it, while the text describes the book's run on",
        "Tatoeba: expect other numbers (a much higher BLEU), and cells whose analysis needs Tatoeba",
        "say so and skip it.",
        f"To use Tatoeba: set {DATA_ENV_VAR} to a folder holding fra.txt or fra-eng.zip, or pass",
        "data_path=... to load_translation_data.",
        rule])


def _eval_buckets(corpus: ParallelCorpus, tatoeba: bool, max_eval_len, eval_buckets):
    """The length buckets of the held-out pairs, or None for one draw capped by ``max_eval_len``."""
    if eval_buckets != "auto":
        if eval_buckets is not None and max_eval_len not in ("auto", None):
            raise ValueError(f"give either max_eval_len or eval_buckets, not both: got max_eval_len={max_eval_len!r} "
                             f"and eval_buckets={eval_buckets!r}")
        return None if eval_buckets is None else check_buckets(eval_buckets)
    if not tatoeba or max_eval_len != "auto":
        return None
    needed = 2 * (TATOEBA_TEST_PER_BUCKET + TATOEBA_VAL_PER_BUCKET)  # held out, and as many left to train on
    return merge_sparse_buckets([len(s) for s in corpus.src], TATOEBA_EVAL_BUCKETS, needed)


def load_translation_data(source: str = "auto", *, data_path: str | os.PathLike | None = None,
                          num_steps: int | None = None, min_freq: int = 2, num_train: int | None = None,
                          num_val: int | None = None, num_test: int | None = None,
                          max_eval_len: int | None | str = "auto", eval_buckets="auto", seed: int = 0,
                          num_examples: int | None = None, cache_dir: str | os.PathLike | None = None,
                          verbose: bool = True) -> TranslationData:
    """Load a translation corpus, split it and build vocabularies (see the module docstring).

    * ``data_path``: a local copy of the Tatoeba pairs (else ``ATTN_UTILS_DATA``, else the cache
      and a download).
    * Splits (by English string, sampled with ``seed``): Tatoeba's held-out pairs are stratified by
      English length (``eval_buckets='auto'``: ``TATOEBA_EVAL_BUCKETS``, 1-8, 9-12, 13-16 and 17 or more
      tokens, punctuation counting and ``<eos>`` not): 300 test and 200 validation pairs per bucket, each
      set at least 1,000 pairs in all, shared equally among the buckets (d2l's full file: 300 and 250 per
      bucket); a bucket the file holds fewer than 1,000 pairs of joins the one before it. ``eval_buckets``
      names other buckets; ``num_test`` and ``num_val`` are then shared equally among them.
      ``max_eval_len=k`` draws 1,000 of each from the sentences of at most k tokens instead, unstratified.
      The bundled corpora hold out 10% each, of any length. ``num_train`` samples that many of the
      remaining pairs (default: all of them). ``data.split.buckets`` gives the buckets used.
    * Vocabularies are built on the training pairs only, keeping tokens seen ``min_freq`` times,
      with ``<pad>`` = 0, ``<bos>`` = 1, ``<eos>`` = 2, ``<unk>`` = 3.
    * ``num_steps``: length of the padded arrays (sentences with ``<eos>`` are truncated to it);
      default: the longest sentence of the corpus plus ``<eos>``, so nothing is truncated.
    * ``num_examples``: size of a bundled corpus (default: the committed snapshot's).

    Counts are ints (``num_steps`` and ``num_examples`` positive, the others >= 0), ``seed`` an int,
    ``verbose`` a bool; they are checked before anything is read.
    """
    if num_steps is not None:
        check_positive_int("num_steps", num_steps, hint="or None (the longest sentence and <eos>)")
    check_non_negative_int("min_freq", min_freq)
    seed = check_seed("seed", seed)
    check_bool("verbose", verbose)
    requested = source
    source, corpus = _load_corpus(source, data_path, cache_dir, num_examples, verbose)
    tatoeba = source == "tatoeba"
    buckets = _eval_buckets(corpus, tatoeba, max_eval_len, eval_buckets)
    if buckets is not None or max_eval_len == "auto":
        max_eval_len = None
    defaults = {"num_val": TATOEBA_VAL_PER_BUCKET, "num_test": TATOEBA_TEST_PER_BUCKET}
    if tatoeba and buckets is not None and eval_buckets == "auto":  # per bucket, and never fewer in all than capped
        defaults = {k: max(TATOEBA_EVAL_SIZE, share * len(buckets)) for k, share in defaults.items()}
    else:
        defaults = dict.fromkeys(defaults, TATOEBA_EVAL_SIZE if tatoeba else len(corpus) // 10)
    num_val = defaults["num_val"] if num_val is None else num_val
    num_test = defaults["num_test"] if num_test is None else num_test
    if requested == "auto" and not tatoeba and num_train is not None:
        # fell back to the small bundled corpus: a Tatoeba-sized num_train takes what it has
        num_train = min(num_train, max(0, len(corpus) - num_val - num_test))
    split = split_by_source(corpus, num_val, num_test, num_train, max_eval_len, seed, buckets=buckets)
    if not split.train:  # vocabularies of the 4 reserved tokens, and a trainer with nothing to learn from
        raise ValueError(f"the training set is empty: num_train={num_train!r} of the {len(corpus):,} pairs of "
                         f"{source!r} ({num_val:,} for validation, {num_test:,} for test); ask for num_train > 0, "
                         "or leave it None to train on every pair left")
    train_src = [corpus.src[i] for i in split.train]
    train_tgt = [corpus.tgt[i] for i in split.train]
    src_vocab = Vocab(train_src, min_freq=min_freq, reserved_tokens=RESERVED_TOKENS)
    tgt_vocab = Vocab(train_tgt, min_freq=min_freq, reserved_tokens=RESERVED_TOKENS)
    if num_steps is None:
        num_steps = max(len(s) for s in corpus.src + corpus.tgt) + 1
    data = TranslationData(source, corpus, split, src_vocab, tgt_vocab, num_steps)
    if verbose:
        print(data.summary())
    return data
