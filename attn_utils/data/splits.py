"""Held-out train/validation/test splits in which no English sentence is in two splits.

One English sentence often has several French translations (and the pair file is sorted by
length), so slicing the file would leak English sentences from training into the test set and
give a test set of only the shortest sentences. Instead pairs are grouped by their (preprocessed)
English string and whole groups are *sampled*, with a seed, into the test and validation sets.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..checks import check_non_negative_int, check_positive_int
from .text import ParallelCorpus


@dataclass
class Split:
    """Indices into a corpus for each split (each sorted), and the settings that made them."""

    train: list[int]
    val: list[int]
    test: list[int]
    seed: int
    max_eval_len: int | None

    def sizes(self) -> dict[str, int]:
        return {"train": len(self.train), "val": len(self.val), "test": len(self.test)}


def _take(groups: list[list[int]], wanted: int, what: str) -> tuple[list[int], list[list[int]]]:
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
            f"cannot fill a {what} set of {wanted} pairs from whole English groups: only "
            f"{wanted - need} were available (expected a smaller size or a longer max_eval_len)"
        )
    return taken, rest


def split_by_source(corpus: ParallelCorpus, num_val: int, num_test: int, num_train: int | None = None,
                    max_eval_len: int | None = 8, seed: int = 0) -> Split:
    """Sample disjoint splits by English string.

    The test set (``num_test`` pairs) and then the validation set (``num_val`` pairs) are whole
    groups of pairs sharing an English sentence, drawn at random among sentences of at most
    ``max_eval_len`` tokens (``None``: any length). Training gets every remaining pair, or a random
    ``num_train`` of them. The same arguments always give the same split.
    """
    for name, value in (("num_val", num_val), ("num_test", num_test)):
        check_non_negative_int(name, value)
    if max_eval_len is not None:
        check_positive_int("max_eval_len", max_eval_len, hint="(tokens) or None (any length)")
    groups: dict[str, list[int]] = {}
    for i, tokens in enumerate(corpus.src):
        groups.setdefault(" ".join(tokens), []).append(i)
    keys = list(groups)  # first-occurrence order: deterministic for a given file
    rng = random.Random(seed)
    rng.shuffle(keys)
    shuffled = [groups[k] for k in keys]

    def short(group: list[int]) -> bool:
        return max_eval_len is None or len(corpus.src[group[0]]) <= max_eval_len

    eligible = [group for group in shuffled if short(group)]
    others = [group for group in shuffled if not short(group)]
    test, eligible = _take(eligible, num_test, "test")
    val, eligible = _take(eligible, num_val, "validation")
    train = sorted(i for group in eligible + others for i in group)
    if num_train is not None:
        if isinstance(num_train, bool) or not isinstance(num_train, int) or not 0 <= num_train <= len(train):
            raise ValueError(f"num_train must be an int in 0..{len(train)} (the pairs left for training), "
                             f"got {num_train!r}")
        rng.shuffle(train)  # then take the first num_train: a seeded sample
        train = sorted(train[:num_train])
    return Split(train=train, val=sorted(val), test=sorted(test), seed=seed, max_eval_len=max_eval_len)
