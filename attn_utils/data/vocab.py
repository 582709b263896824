"""A vocabulary: tokens ↔ indices, in the spirit of d2l's ``Vocab``.

Differences from d2l, all for predictability: reserved tokens come first in the order given
(so with the course's ``RESERVED_TOKENS`` ``<pad>`` is 0, ``<bos>`` 1, ``<eos>`` 2, ``<unk>`` 3),
then the other tokens by falling frequency, ties broken alphabetically; ``to_tokens`` returns
a list for any sequence (d2l returns a bare string for a one-element list).
"""

from __future__ import annotations

import collections
import operator
from collections.abc import Iterable

import torch

from ..checks import check_non_negative_int

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
RESERVED_TOKENS = (PAD, BOS, EOS, UNK)


class Vocab:
    """Map tokens to indices and back.

    ``tokens`` is a list of tokens or a list of token lists (sentences), never a mix; tokens are hashable
    and of one comparable kind (strings, or ints), and a string is no list of tokens (split it first).
    Tokens seen fewer than ``min_freq`` (an int >= 0) times map to ``<unk>``, which is always in the
    vocabulary. ``reserved_tokens`` is a list of strings, given the first indices in its order.
    """

    def __init__(self, tokens: Iterable = (), min_freq: int = 0, reserved_tokens: Iterable[str] = ()):
        for name, value, expected in (("tokens", tokens, "a list of tokens or of token lists"),
                                      ("reserved_tokens", reserved_tokens, "a list of tokens")):
            if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):  # a string: its letters
                raise ValueError(f"{name} must be {expected}, got {type(value).__name__} {value!r:.60}")
        check_non_negative_int("min_freq", min_freq)
        tokens = list(tokens)
        if tokens and isinstance(tokens[0], (list, tuple)):
            if not all(isinstance(line, (list, tuple)) for line in tokens):  # a string would count its letters
                raise ValueError("tokens must be a list of tokens or a list of token lists, not a mix of both")
            tokens = [token for line in tokens for token in line]
        try:
            counter = collections.Counter(tokens)
            # (token, count), most frequent first; ties alphabetical so the order never depends on input order
            self.token_freqs = sorted(counter.items(), key=lambda item: (-item[1], item[0]))
            reserved = list(dict.fromkeys(reserved_tokens))
        except TypeError:  # a list among the tokens (unhashable), or strings beside ints (not comparable)
            raise ValueError(f"tokens must be hashable tokens of one kind (e.g. all strings), got "
                             f"{sorted({type(t).__name__ for t in tokens})}") from None
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
        if isinstance(tokens, torch.Tensor):  # hashed by identity: it would always be <unk>
            raise ValueError(f"tokens must be a token or a list/tuple of tokens, got a tensor {tuple(tokens.shape)} "
                             f"(to_tokens reads indices)")
        try:
            return self.token_to_idx.get(tokens, self.unk)
        except TypeError:
            raise ValueError(f"tokens must be a token or a list/tuple of tokens, got {type(tokens).__name__}") from None

    def to_tokens(self, indices):
        """Token of an index, or a list of tokens for a sequence (list, tuple, tensor, array) of indices:
        integers (not bools or floats) in ``[0, len(self))``."""
        if isinstance(indices, torch.Tensor):
            indices = indices.tolist()
        if hasattr(indices, "tolist") and not isinstance(indices, (list, tuple)):
            indices = indices.tolist()  # numpy arrays and scalars
        if isinstance(indices, (list, tuple)):
            return [self.to_tokens(i) for i in indices]
        try:
            if isinstance(indices, bool):
                raise TypeError
            index = operator.index(indices)  # int(1.7) would be 1, int("3") 3
        except TypeError:
            raise ValueError(f"indices must be integers, got {type(indices).__name__} {indices!r:.40}") from None
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
