"""Held-out train/validation/test splits in which no English sentence is in two splits.

One English sentence often has several French translations (and the pair file is sorted by
length), so slicing the file would leak English sentences from training into the test set and
give a test set of only the shortest sentences. Instead pairs are grouped by their (preprocessed)
English string and whole groups are *sampled*, with a seed, into the test and validation sets:
from the sentences up to a length, or in equal shares from several length buckets (stratified), so
that the few long sentences of a corpus are tested as thoroughly as the many short ones.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..checks import check_non_negative_int, check_positive_int, check_seed
from .text import ParallelCorpus

#: A range of English lengths in tokens, ``(low, high)`` inclusive; ``high=None``: no upper bound.
Bucket = tuple[int, "int | None"]


def bucket_label(bucket: Bucket) -> str:
    """``(9, 12)`` -> ``'9-12'``, ``(17, None)`` -> ``'17+'``, ``(5, 5)`` -> ``'5'``."""
    low, high = bucket
    return f"{low}+" if high is None else str(low) if low == high else f"{low}-{high}"


def in_bucket(length: int, bucket: Bucket) -> bool:
    low, high = bucket
    return low <= length and (high is None or length <= high)


def check_buckets(buckets) -> tuple[Bucket, ...]:
    """``buckets`` as a tuple of ``(low, high)`` ranges that are positive, ordered and disjoint (``ValueError``
    naming the first that is not); only the last may be open (``high=None``)."""
    try:
        ranges = tuple((low, high) for low, high in buckets)
    except (TypeError, ValueError):
        raise ValueError(f"buckets must be (low, high) pairs of token lengths, got {buckets!r}") from None
    if not ranges:
        raise ValueError("buckets must hold at least one (low, high) range, got none")
    previous = 0
    for i, (low, high) in enumerate(ranges):
        ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (low,) + (() if high is None else (high,)))
        if not ints or low <= previous or (high is not None and high < low) or (high is None and i < len(ranges) - 1):
            raise ValueError(f"buckets must be ranges (low, high) of positive integer lengths, in increasing order "
                             f"without overlap, only the last one open (high=None); got {ranges[i]!r} in {ranges!r}")
        previous = high if high is not None else low
    return ranges


def merge_sparse_buckets(lengths, buckets, needed: int) -> tuple[Bucket, ...]:
    """``buckets`` with each one that holds fewer than ``needed`` (an int >= 0) of ``lengths`` (ints) merged into
    the bucket before it (the first into the one after): a local file of short sentences keeps the buckets it
    can fill."""
    buckets = check_buckets(buckets)
    check_non_negative_int("needed", needed)
    if isinstance(lengths, (str, bytes)) or not hasattr(lengths, "__iter__") or not all(
            isinstance(n, int) and not isinstance(n, bool) for n in lengths):
        raise ValueError(f"lengths must be a list of integers (sentence lengths in tokens), got {lengths!r:.60}")
    merged: list[list] = []  # [low, high, count]
    for low, high in buckets:
        count = sum(in_bucket(n, (low, high)) for n in lengths)
        if merged and count < needed:
            merged[-1][1:] = [high, merged[-1][2] + count]
        else:
            merged.append([low, high, count])
    if len(merged) > 1 and merged[0][2] < needed:
        merged[1][0], merged[1][2] = merged[0][0], merged[1][2] + merged[0][2]
        merged.pop(0)
    return tuple((low, high) for low, high, _ in merged)


@dataclass
class Split:
    """Indices into a corpus for each split (each sorted), and the settings that made them: ``buckets`` are
    the English length ranges the held-out pairs were drawn from, in equal shares."""

    train: list[int]
    val: list[int]
    test: list[int]
    seed: int
    buckets: tuple[Bucket, ...]

    def sizes(self) -> dict[str, int]:
        return {"train": len(self.train), "val": len(self.val), "test": len(self.test)}


def _take(groups: list[list[int]], wanted: int, what: str, within: str = "") -> tuple[list[int], list[list[int]]]:
    """Whole groups, in the given (shuffled) order, adding up to exactly ``wanted`` pairs."""
    taken, rest, need = [], [], wanted
    for group in groups:
        if 0 < len(group) <= need:
            taken.extend(group)
            need -= len(group)
        else:
            rest.append(group)
    if need:
        raise ValueError(
            f"cannot fill a {what} set of {wanted} pairs{within} from whole English groups: only "
            f"{wanted - need} were available (expected a smaller size, a longer max_eval_len or wider buckets)"
        )
    return taken, rest


def equal_shares(total: int, parts: int) -> list[int]:
    """``total`` (an int >= 0) split into ``parts`` (an int >= 1) shares that differ by at most one, the larger
    ones first."""
    check_non_negative_int("total", total)
    check_positive_int("parts", parts)
    return [total // parts + (i < total % parts) for i in range(parts)]


def split_by_source(corpus: ParallelCorpus, num_val: int, num_test: int, num_train: int | None = None,
                    max_eval_len: int | None = 8, seed: int = 0, *, buckets=None) -> Split:
    """Sample disjoint splits by English string.

    The test set (``num_test`` pairs) and then the validation set (``num_val`` pairs) are whole
    groups of pairs sharing an English sentence, drawn at random among sentences of at most
    ``max_eval_len`` tokens (``None``: any length). ``buckets``, ranges ``(low, high)`` of English
    lengths in tokens (``high=None``: no bound; give ``max_eval_len=None`` with them), stratifies both
    sets instead: each bucket gets an equal share of ``num_test`` and of ``num_val`` (``equal_shares``),
    so that long sentences, rare in a corpus, are tested as often as short ones, and sentences of no
    bucket are used for training only. Training gets every remaining pair, or a random ``num_train`` of
    them. The same arguments always give the same split (``seed``: an int); one bucket ``(1, max_eval_len)``
    gives the split of ``max_eval_len``. ``corpus`` is a ``ParallelCorpus``.
    """
    for name, value in (("num_val", num_val), ("num_test", num_test)):
        check_non_negative_int(name, value)
    seed = check_seed("seed", seed)
    if not isinstance(corpus, ParallelCorpus):
        raise ValueError(f"corpus must be a ParallelCorpus, got {type(corpus).__name__}")
    if buckets is None:
        if max_eval_len is not None:
            check_positive_int("max_eval_len", max_eval_len, hint="(tokens) or None (any length)")
        buckets = ((1, max_eval_len),)
    elif max_eval_len is not None:
        raise ValueError(f"give either max_eval_len or buckets, not both: got max_eval_len={max_eval_len!r} and "
                         f"buckets={buckets!r} (a bucket's high bound caps its lengths)")
    buckets = check_buckets(buckets)
    groups: dict[str, list[int]] = {}
    for i, tokens in enumerate(corpus.src):
        groups.setdefault(" ".join(tokens), []).append(i)
    keys = list(groups)  # first-occurrence order: deterministic for a given file
    rng = random.Random(seed)
    rng.shuffle(keys)
    shuffled = [groups[k] for k in keys]
    test, val, leftover = [], [], []
    placed = set()
    for bucket, test_share, val_share in zip(buckets, equal_shares(num_test, len(buckets)),
                                             equal_shares(num_val, len(buckets))):
        eligible = [g for g in shuffled if in_bucket(len(corpus.src[g[0]]), bucket)]
        placed.update(id(g) for g in eligible)
        within = "" if len(buckets) == 1 else f" (English of {bucket_label(bucket)} tokens)"
        taken, eligible = _take(eligible, test_share, "test", within)
        test += taken
        taken, eligible = _take(eligible, val_share, "validation", within)
        val += taken
        leftover += eligible
    others = [g for g in shuffled if id(g) not in placed]
    train = sorted(i for group in leftover + others for i in group)
    if num_train is not None:
        if isinstance(num_train, bool) or not isinstance(num_train, int) or not 0 <= num_train <= len(train):
            raise ValueError(f"num_train must be an int in 0..{len(train)} (the pairs left for training), "
                             f"got {num_train!r}")
        rng.shuffle(train)  # then take the first num_train: a seeded sample
        train = sorted(train[:num_train])
    return Split(train=train, val=sorted(val), test=sorted(test), seed=seed, buckets=buckets)
