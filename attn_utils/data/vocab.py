"""A vocabulary: tokens ↔ indices, in the spirit of d2l's ``Vocab``.

Differences from d2l, all for predictability: reserved tokens come first in the order given
(so with the course's ``RESERVED_TOKENS`` ``<pad>`` is 0, ``<bos>`` 1, ``<eos>`` 2, ``<unk>`` 3),
then the other tokens by falling frequency, ties broken alphabetically; ``to_tokens`` returns
a list for any sequence (d2l returns a bare string for a one-element list).
"""

from __future__ import annotations

import collections
from collections.abc import Iterable

import torch

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
RESERVED_TOKENS = (PAD, BOS, EOS, UNK)


class Vocab:
    """Map tokens to indices and back.

    ``tokens`` is a list of tokens or a list of token lists (sentences). Tokens seen fewer than
    ``min_freq`` times map to ``<unk>``, which is always in the vocabulary.
    """

    def __init__(self, tokens: Iterable = (), min_freq: int = 0, reserved_tokens: Iterable[str] = ()):
        tokens = list(tokens)
        if tokens and isinstance(tokens[0], (list, tuple)):
            tokens = [token for line in tokens for token in line]
        counter = collections.Counter(tokens)
        # (token, count), most frequent first; ties alphabetical so the order never depends on input order
        self.token_freqs = sorted(counter.items(), key=lambda item: (-item[1], item[0]))
        reserved = list(dict.fromkeys(reserved_tokens))
        if UNK not in reserved:
            reserved.append(UNK)
        self.idx_to_token = reserved + [t for t, freq in self.token_freqs if freq >= min_freq and t not in reserved]
        self.token_to_idx = {token: idx for idx, token in enumerate(self.idx_to_token)}
        self.min_freq = min_freq

    def __len__(self) -> int:
        return len(self.idx_to_token)

    def __contains__(self, token) -> bool:
        return token in self.token_to_idx

    def __getitem__(self, tokens):
        """Index of a token (``unk`` when unknown), or a list of indices for a list/tuple of tokens."""
        if isinstance(tokens, (list, tuple)):
            return [self[token] for token in tokens]
        return self.token_to_idx.get(tokens, self.unk)

    def to_tokens(self, indices):
        """Token of an index, or a list of tokens for a sequence (list, tuple, tensor, array) of indices."""
        if isinstance(indices, torch.Tensor):
            indices = indices.tolist()
        if hasattr(indices, "tolist") and not isinstance(indices, (list, tuple)):
            indices = indices.tolist()  # numpy arrays and scalars
        if isinstance(indices, (list, tuple)):
            return [self.to_tokens(i) for i in indices]
        index = int(indices)
        if not 0 <= index < len(self):
            raise ValueError(f"index {index} is out of range for a vocabulary of {len(self)} tokens "
                             f"(expected 0..{len(self) - 1})")
        return self.idx_to_token[index]

    @property
    def unk(self) -> int:
        """Index of ``<unk>``."""
        return self.token_to_idx[UNK]

    @property
    def pad(self) -> int:
        """Index of ``<pad>`` (KeyError if the vocabulary has none)."""
        return self.token_to_idx[PAD]

    @property
    def bos(self) -> int:
        """Index of ``<bos>``."""
        return self.token_to_idx[BOS]

    @property
    def eos(self) -> int:
        """Index of ``<eos>``."""
        return self.token_to_idx[EOS]

    def __repr__(self) -> str:
        head = ", ".join(self.idx_to_token[:8])
        return f"Vocab({len(self)} tokens, min_freq={self.min_freq}: {head}{', ...' if len(self) > 8 else ''})"
