"""Fixed-length index arrays (d2l's ``_build_array``) and batches bucketed by source length.

Every sentence gets ``<eos>``, is truncated or padded with ``<pad>`` to ``num_steps``, and target
sentences then get ``<bos>`` in front (``num_steps + 1`` columns), exactly as in d2l: the decoder
input is ``tgt[:, :-1]`` and the label ``tgt[:, 1:]``. Batching sentences of equal source length
together wastes no computation on source padding and was what made short training runs work.
"""

from __future__ import annotations

import operator
import random
from collections.abc import Iterable, Iterator, Sequence

import torch

from ..checks import check_bool, check_non_negative_int, check_positive_int, check_seed
from .vocab import BOS, EOS, PAD, Vocab


def pad_or_truncate(tokens: Sequence[str], num_steps: int, pad: str = PAD) -> list[str]:
    """The first ``num_steps`` (an int >= 0) of ``tokens`` (a list, not a string), padded with ``pad`` up to
    ``num_steps``."""
    check_non_negative_int("num_steps", num_steps)
    if isinstance(tokens, (str, bytes)):
        raise ValueError(f"tokens must be a list of tokens, got a string {tokens!r:.40} (split it first)")
    tokens = list(tokens)
    return tokens[:num_steps] if len(tokens) > num_steps else tokens + [pad] * (num_steps - len(tokens))


def build_array(sentences: Sequence[Sequence[str]], vocab: Vocab, num_steps: int, is_tgt: bool = False):
    """d2l's ``_build_array``: ``(array, valid_len)`` for tokenised sentences (without ``<eos>``).

    ``sentences`` is a list of token lists (a string is no token list: tokenise it first), ``vocab`` a
    ``Vocab`` holding ``<pad>``, ``<eos>`` and, for targets (``is_tgt``), ``<bos>``. ``array`` is
    ``(len(sentences), num_steps)`` (``num_steps + 1`` with ``<bos>`` for targets) of int64 indices;
    ``valid_len`` counts the non-padding tokens of each row.
    """
    check_positive_int("num_steps", num_steps)
    check_bool("is_tgt", is_tgt)
    if not isinstance(vocab, Vocab):
        raise ValueError(f"vocab must be a Vocab, got {type(vocab).__name__}")
    missing = [t for t in (PAD, EOS, BOS)[:3 if is_tgt else 2] if t not in vocab]
    if missing:  # they would map to <unk>, and valid_len would count <unk> tokens as padding
        raise ValueError(f"vocab must hold the reserved tokens {missing} (build it with "
                         f"reserved_tokens=RESERVED_TOKENS), got {vocab!r}")
    if isinstance(sentences, (str, bytes)) or not isinstance(sentences, Sequence) or not all(
            isinstance(s, (list, tuple)) for s in sentences):
        raise ValueError(f"sentences must be a list of token lists (a string is no token list: tokenise it first), "
                         f"got {type(sentences).__name__} {sentences!r:.60}")
    lookup, unk = vocab.token_to_idx.get, vocab.unk
    prefix = [BOS] if is_tgt else []
    width = num_steps + 1 if is_tgt else num_steps
    flat = [lookup(token, unk) for s in sentences
            for token in prefix + pad_or_truncate([*s, EOS], num_steps)]  # row after row
    array = torch.tensor(flat, dtype=torch.long).reshape(len(sentences), width)
    valid_len = (array != vocab[PAD]).sum(dim=1)  # (batch,)
    return array, valid_len


class BucketBatchSampler(torch.utils.data.Sampler):
    """Batches of indices whose ``lengths`` are all equal, for ``DataLoader(batch_sampler=...)``.

    Each epoch the indices of each length are shuffled and cut into batches of ``batch_size``
    (the last batch of a length may be smaller; ``drop_last`` drops it), then the order of all
    batches is shuffled. Epoch ``e`` uses the seed ``seed + e``; iterating again moves to the
    next epoch (``set_epoch`` picks one), so a new sampler with the same seed repeats the run.
    With ``shuffle=False`` batches come in order of length and index, the same every epoch.
    ``lengths``: integers (a list or a 1-D tensor); ``seed`` an int, ``shuffle`` and ``drop_last`` bools.
    """

    def __init__(self, lengths, batch_size: int, seed: int = 0, shuffle: bool = True, drop_last: bool = False):
        if isinstance(lengths, torch.Tensor):
            lengths = lengths.tolist()
        check_positive_int("batch_size", batch_size)
        seed = check_seed("seed", seed)
        check_bool("shuffle", shuffle)
        check_bool("drop_last", drop_last)
        if isinstance(lengths, (str, bytes)) or not isinstance(lengths, Iterable):
            raise ValueError(f"lengths must be a list or 1-D tensor of integers, got {type(lengths).__name__}")
        self.buckets: dict[int, list[int]] = {}
        for index, length in enumerate(lengths):
            try:
                if isinstance(length, bool):
                    raise TypeError
                length = operator.index(length)  # int(2.5) would be 2, int(nan) an error of Python's
            except TypeError:
                raise ValueError(f"lengths must be integers, got {type(length).__name__} {length!r:.40} at index "
                                 f"{index}") from None
            self.buckets.setdefault(length, []).append(index)
        self.batch_size, self.seed, self.shuffle, self.drop_last = batch_size, seed, shuffle, drop_last
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration produce epoch ``epoch``'s batches (an int >= 0)."""
        self.epoch = check_non_negative_int("epoch", epoch)

    def batches(self, epoch: int) -> list[list[int]]:
        """The batches of epoch ``epoch`` (an int >= 0; no side effect)."""
        check_non_negative_int("epoch", epoch)
        rng = random.Random(self.seed + epoch)
        batches = []
        for length in sorted(self.buckets):
            indices = list(self.buckets[length])
            if self.shuffle:
                rng.shuffle(indices)
            for start in range(0, len(indices), self.batch_size):
                batch = indices[start:start + self.batch_size]
                if len(batch) == self.batch_size or not self.drop_last:
                    batches.append(batch)
        if self.shuffle:
            rng.shuffle(batches)
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        batches = self.batches(self.epoch)
        self.epoch += 1
        return iter(batches)

    def __len__(self) -> int:
        rounding = 0 if self.drop_last else self.batch_size - 1
        return sum((len(b) + rounding) // self.batch_size for b in self.buckets.values())
