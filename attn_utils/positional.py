"""Positional encodings: the Transformer's sinusoids (d2l's ``PositionalEncoding``) and learned ones.

Self-attention is permutation-equivariant: it has no idea of order until positions are added to
its inputs. The sinusoidal encoding of Vaswani et al. (2017) is

    P[p, 2i] = sin(p / 10000^(2i/d)),   P[p, 2i+1] = cos(p / 10000^(2i/d)).

Each pair of columns rotates with position at its own frequency, so a fixed linear map (a
rotation per pair, ``relative_shift_matrix``) takes the encoding of position p to that of p + k
for every p.
"""

from __future__ import annotations

import torch
from torch import nn

from .checks import check_positive_int, check_probability, is_finite_number


def _check_size(num_hiddens, max_len) -> None:
    if not isinstance(num_hiddens, int) or num_hiddens < 2 or num_hiddens % 2:
        raise ValueError(f"num_hiddens must be an even int >= 2 (sines and cosines come in pairs), got {num_hiddens!r}")
    check_positive_int("max_len", max_len)


def frequencies(num_hiddens: int) -> torch.Tensor:
    """``1 / 10000^(2i/d)`` for ``i = 0 .. d/2 - 1``: the angular frequency of each column pair."""
    return 1.0 / torch.pow(10000.0, torch.arange(0, num_hiddens, 2, dtype=torch.float64) / num_hiddens)


def sinusoidal_encoding(max_len: int, num_hiddens: int) -> torch.Tensor:
    """The ``(max_len, num_hiddens)`` matrix P (float32), computed in float64 for accuracy."""
    _check_size(num_hiddens, max_len)
    angles = torch.arange(max_len, dtype=torch.float64).unsqueeze(1) * frequencies(num_hiddens)  # (max_len, d/2)
    P = torch.empty(max_len, num_hiddens, dtype=torch.float64)
    P[:, 0::2], P[:, 1::2] = torch.sin(angles), torch.cos(angles)
    return P.float()


def relative_shift_matrix(k: int, num_hiddens: int) -> torch.Tensor:
    """The ``(d, d)`` matrix M with ``P[p] @ M == P[p + k]`` for every position p.

    Block-diagonal: for the column pair with frequency w it is the 2 x 2 rotation by ``k w``, since
    ``(sin(a), cos(a)) -> (sin(a + kw), cos(a + kw))`` is linear in ``(sin a, cos a)``.
    """
    _check_size(num_hiddens, 1)
    if not is_finite_number(k):
        raise ValueError(f"k (the shift in positions) must be a finite number, got {k!r}")
    theta = k * frequencies(num_hiddens)  # (d/2,)
    M = torch.zeros(num_hiddens, num_hiddens, dtype=torch.float64)
    even, odd = torch.arange(0, num_hiddens, 2), torch.arange(1, num_hiddens, 2)
    # row vector times M: new_sin = sin*cos(t) + cos*sin(t), new_cos = cos*cos(t) - sin*sin(t)
    M[even, even], M[odd, even] = torch.cos(theta), torch.sin(theta)
    M[even, odd], M[odd, odd] = -torch.sin(theta), torch.cos(theta)
    return M.float()


class _Positions(nn.Module):
    """Shared checks: inputs ``(batch, steps, num_hiddens)`` and positions ``offset .. offset + steps - 1``."""

    def __init__(self, num_hiddens: int, dropout: float, max_len: int):
        super().__init__()
        _check_size(num_hiddens, max_len)
        self.num_hiddens, self.max_len = num_hiddens, max_len
        self.dropout = nn.Dropout(check_probability("dropout", dropout))

    def _check_shape(self, X) -> None:
        if not isinstance(X, torch.Tensor) or X.dim() != 3 or X.shape[-1] != self.num_hiddens \
                or not X.is_floating_point():  # integer X would silently truncate the encodings added to it
            got = f"{tuple(X.shape)} of dtype {X.dtype}" if isinstance(X, torch.Tensor) else type(X).__name__
            raise ValueError(f"expected a floating-point X of shape (batch, steps, {self.num_hiddens}), got {got}")

    def _check(self, X, offset: int) -> None:
        self._check_shape(X)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset (the position of X's first step) must be an int >= 0, got {offset!r}")
        if offset + X.shape[1] > self.max_len:
            raise ValueError(f"positions {offset}..{offset + X.shape[1] - 1} do not fit max_len={self.max_len}; "
                             f"build the encoding with a larger max_len")


class PositionalEncoding(_Positions):
    """d2l's ``PositionalEncoding(num_hiddens, dropout, max_len=1000)``: ``dropout(X + P[:steps])``.

    ``forward(X, offset=0)`` adds the encodings of positions ``offset, offset + 1, ...`` (a decoder
    that feeds one token at a time passes how many tokens came before). ``P`` is a buffer of shape
    ``(1, max_len, num_hiddens)``, moved with the module and not saved in its state dict.
    """

    def __init__(self, num_hiddens: int, dropout: float, max_len: int = 1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.register_buffer("P", sinusoidal_encoding(max_len, num_hiddens).unsqueeze(0), persistent=False)

    def forward(self, X, offset: int = 0):
        self._check(X, offset)
        return self.dropout(X + self.P[:, offset:offset + X.shape[1]].to(X.dtype))


class LearnedPositionalEncoding(_Positions):
    """The alternative the paper also tried: one learned vector per position (``nn.Embedding``),
    same interface as ``PositionalEncoding``. It cannot say anything about positions it never saw
    in training."""

    def __init__(self, num_hiddens: int, dropout: float, max_len: int = 1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.embedding = nn.Embedding(max_len, num_hiddens)
        nn.init.normal_(self.embedding.weight, std=0.02)

    def forward(self, X, offset: int = 0):
        self._check(X, offset)
        # in X's dtype, as PositionalEncoding: half-precision X stays half (the gradient still reaches the weights)
        return self.dropout(X + self.embedding.weight[offset:offset + X.shape[1]].unsqueeze(0).to(X.dtype))


class NoPositionalEncoding(_Positions):
    """For models whose positions enter inside attention (rotary, ALiBi): ``dropout(X)``, nothing added.
    Same interface as ``PositionalEncoding``, but any position is allowed: ``max_len`` is no limit."""

    def forward(self, X, offset: int = 0):
        self._check_shape(X)
        return self.dropout(X)
