"""Fixed-length index arrays (d2l's ``_build_array``) and batches bucketed by source length.

Every sentence gets ``<eos>``, is truncated or padded with ``<pad>`` to ``num_steps``, and target
sentences then get ``<bos>`` in front (``num_steps + 1`` columns), exactly as in d2l: the decoder
input is ``tgt[:, :-1]`` and the label ``tgt[:, 1:]``. Batching sentences of equal source length
together wastes no computation on source padding and was what made short training runs work.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

import torch

from ..checks import check_positive_int
from .vocab import BOS, EOS, PAD, Vocab


def pad_or_truncate(tokens: Sequence[str], num_steps: int, pad: str = PAD) -> list[str]:
    """The first ``num_steps`` tokens, padded with ``pad`` up to ``num_steps``."""
    tokens = list(tokens)
    return tokens[:num_steps] if len(tokens) > num_steps else tokens + [pad] * (num_steps - len(tokens))


def build_array(sentences: Sequence[Sequence[str]], vocab: Vocab, num_steps: int, is_tgt: bool = False):
    """d2l's ``_build_array``: ``(array, valid_len)`` for tokenised sentences (without ``<eos>``).

    ``array`` is ``(len(sentences), num_steps)`` (``num_steps + 1`` with ``<bos>`` for targets) of
    int64 indices; ``valid_len`` counts the non-padding tokens of each row.
    """
    check_positive_int("num_steps", num_steps)
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
    """

    def __init__(self, lengths, batch_size: int, seed: int = 0, shuffle: bool = True, drop_last: bool = False):
        if isinstance(lengths, torch.Tensor):
            lengths = lengths.tolist()
        check_positive_int("batch_size", batch_size)
        self.buckets: dict[int, list[int]] = {}
        for index, length in enumerate(lengths):
            self.buckets.setdefault(int(length), []).append(index)
        self.batch_size, self.seed, self.shuffle, self.drop_last = batch_size, seed, shuffle, drop_last
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration produce epoch ``epoch``'s batches."""
        self.epoch = epoch

    def batches(self, epoch: int) -> list[list[int]]:
        """The batches of epoch ``epoch`` (no side effect)."""
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
