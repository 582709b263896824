"""One key-value cache for every Transformer decoder: the translator's and the language models'.

A decoder that generates one token at a time keeps, for each block, the keys and values of the
positions it has seen, so that a new token's query attends to them without recomputing them. A
``KVCache`` holds them in one buffer per block, ``(batch, kv_heads, capacity, d / heads)``, of which
``positions`` slots along the positions axis are in use; ``keys`` and ``values`` show them for all
blocks at once, ``(num_blks, batch, kv_heads, positions, d / heads)``. A forward pass of ``T`` new
tokens:

1. ``cache.extended(T)``: a new cache over the same buffers (grown by doubling when full) with room
   for T more positions; the old cache still sees only its own positions, so it stays valid;
2. each block ``i`` writes its new keys and values with ``update(i, keys, values)``, which returns the
   keys and values this call attends to (the cached ones followed by its own): no copy of the cache
   (and, since each block has a buffer of its own, autograd can differentiate through the writes);
3. ``kept(window)``: with a sliding window only the last ``window`` positions stay in use.

So a token costs no copy of the cache (a list of tensors concatenated per token costs one per block,
and stacking them over the blocks another). A cache that is extended twice (two continuations of the
same prefix, as in a check of cached against uncached decoding) copies its part of the buffer the
second time, so that the two never write over each other.

A translator's cache also holds the source side: ``cross_keys`` and ``cross_values``, each block's
projection of the encoder's outputs, ``(num_blks, batch, heads, S, d / heads)``, computed once per
sentence, and ``src_valid_lens``, the source's valid lengths ``(batch,)``.
"""

from __future__ import annotations

import torch

from .checks import check_non_negative_int, check_positive_int


def _shape(t) -> str:
    return str(tuple(t.shape)) if isinstance(t, torch.Tensor) else type(t).__name__


class KVCache:
    """Keys and values per block, for the positions seen so far (see the module docstring).

    ``KVCache(keys, values, length=None, *, cross_keys=None, cross_values=None, src_valid_lens=None)``
    takes ``keys`` and ``values`` ``(num_blks, batch, kv_heads, P, d / heads)``; ``length`` is the
    number of tokens seen (the position of the next one), at least P (more when a sliding window
    dropped the earliest ones; default P).
    """

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, length: int | None = None, *,
                 cross_keys: torch.Tensor | None = None, cross_values: torch.Tensor | None = None,
                 src_valid_lens: torch.Tensor | None = None):
        for name, t in (("keys", keys), ("values", values)):
            if not isinstance(t, torch.Tensor) or t.dim() != 5:
                got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
                raise ValueError(f"the cache's {name} must be (num_blks, batch, kv_heads, positions, d / heads), "
                                 f"got {got}")
        if keys.shape != values.shape:
            raise ValueError(f"the cache's keys {tuple(keys.shape)} and values {tuple(values.shape)} must have "
                             f"one shape")
        if keys.shape[0] < 1:
            raise ValueError(f"the cache must hold at least one block, got keys of shape {tuple(keys.shape)}")
        if not keys.is_floating_point() or values.dtype != keys.dtype or values.device != keys.device:
            # keys written into an integer buffer would be truncated without a word
            raise ValueError(f"the cache's keys and values must be floating-point tensors of one dtype on one device, "
                             f"got keys {keys.dtype} on {keys.device} and values {values.dtype} on {values.device}")
        self._k, self._v = list(keys.unbind(0)), list(values.unbind(0))  # per block: (batch, kv_heads, capacity, dh)
        self._layout = (keys.shape[0], keys.shape[1], keys.shape[2], keys.shape[4], keys.device)
        self._start, self._end = 0, keys.shape[3]  # this cache's positions: buffer slots start .. end - 1
        self._claimed = [self._end]  # shared by the caches of one buffer: the last slot any of them wrote
        self.length = keys.shape[3] if length is None else length
        self.cross_keys, self.cross_values, self.src_valid_lens = cross_keys, cross_values, src_valid_lens

    @classmethod
    def empty(cls, num_blks: int, batch: int, kv_heads: int, head_dim: int, device=None, dtype=None,
              **source) -> KVCache:
        """A cache of no position; ``source`` holds the translator's ``cross_keys``, ``cross_values`` and
        ``src_valid_lens``."""
        for name, size in (("num_blks", num_blks), ("kv_heads", kv_heads), ("head_dim", head_dim)):
            check_positive_int(name, size)
        check_non_negative_int("batch", batch)
        empty = torch.zeros(num_blks, batch, kv_heads, 0, head_dim, device=device, dtype=dtype)
        return cls(empty, empty, 0, **source)

    @property
    def length(self) -> int:
        """The number of tokens seen, the position of the next one: an int, at least ``positions`` (more when
        a sliding window dropped the earliest ones). Setting it checks both, since a model places its new
        tokens (rotary angles, learned and sinusoidal positions) at ``length`` and the cached ones before."""
        return self._length

    @length.setter
    def length(self, length: int) -> None:
        if isinstance(length, bool) or not isinstance(length, int) or length < self.positions:
            raise ValueError(f"the cache's length (tokens seen) must be an int of at least its {self.positions} "
                             f"positions, got {length!r}")
        self._length = length

    @property
    def shape(self) -> tuple[int, int, int, int, int]:
        """``(num_blks, batch, kv_heads, positions, d / heads)``, the shape of ``keys`` without stacking them."""
        num_blks, batch, kv_heads, head_dim, _ = self._layout
        return (num_blks, batch, kv_heads, self.positions, head_dim)

    @property
    def device(self) -> torch.device:
        """Where the cached keys and values are."""
        return self._layout[4]

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the cached keys and values."""
        return self._k[0].dtype

    @property
    def keys(self) -> torch.Tensor:
        """``(num_blks, batch, kv_heads, positions, d / heads)``, stacked from the blocks' buffers (a copy)."""
        return torch.stack([k[:, :, self._start:self._end] for k in self._k])

    @property
    def values(self) -> torch.Tensor:
        return torch.stack([v[:, :, self._start:self._end] for v in self._v])

    @property
    def positions(self) -> int:
        """How many positions the cache holds (``length``, or fewer after a sliding window)."""
        return self._end - self._start

    @property
    def nbytes(self) -> int:
        """The memory the cached keys and values take (the buffers may have room for more)."""
        return sum(k[:, :, self._start:self._end].nbytes for k in self._k + self._v)

    def _with(self, k, v, start, end, claimed, length) -> KVCache:
        new = object.__new__(KVCache)
        new._k, new._v, new._start, new._end, new._claimed, new._layout = k, v, start, end, claimed, self._layout
        new.length = length
        new.cross_keys, new.cross_values, new.src_valid_lens = self.cross_keys, self.cross_values, self.src_valid_lens
        return new

    def with_length(self, length: int) -> KVCache:
        """The same positions, counted as ``length`` tokens seen (as if earlier ones had left a window)."""
        return KVCache(self.keys, self.values, length, cross_keys=self.cross_keys, cross_values=self.cross_values,
                       src_valid_lens=self.src_valid_lens)

    def extended(self, steps: int) -> KVCache:
        """A cache with room for ``steps`` more positions after this one's, for ``update`` to fill."""
        end = self._end + steps
        k, v, start, claimed = self._k, self._v, self._start, self._claimed
        if claimed[0] > self._end or end > k[0].shape[2]:
            # another cache already wrote after our positions, or the buffers are full: our positions
            # are copied into new buffers with room to double
            used = self._end - start
            shape = (*k[0].shape[:2], max(2 * (used + steps), 16), k[0].shape[3])
            k, v = [self._grown(t, shape) for t in k], [self._grown(t, shape) for t in v]
            start, end, claimed = 0, used + steps, [0]
        claimed[0] = end
        return self._with(k, v, start, end, claimed, self.length + steps)

    def _grown(self, buffer: torch.Tensor, shape) -> torch.Tensor:
        new = buffer.new_empty(shape)
        new[:, :, :self._end - self._start] = buffer[:, :, self._start:self._end]
        return new

    def update(self, block: int, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write this call's ``keys`` and ``values`` ``(batch, kv_heads, T, d / heads)`` into block ``block``'s
        last T positions (made by ``extended(T)``); return the block's keys and values, the cached ones
        followed by these, ``(batch, kv_heads, positions, d / heads)`` each (views)."""
        _, batch, kv_heads, head_dim, _ = self._layout
        T = keys.shape[2] if isinstance(keys, torch.Tensor) and keys.dim() == 4 else -1
        if not 0 <= T <= self.positions or tuple(keys.shape) != (batch, kv_heads, T, head_dim) \
                or not isinstance(values, torch.Tensor) or values.shape != keys.shape:
            raise ValueError(f"update takes keys and values of shape (batch={batch}, kv_heads={kv_heads}, T, "
                             f"d / heads={head_dim}) with T at most the cache's {self.positions} positions, got "
                             f"{_shape(keys)} and {_shape(values)}")
        self._k[block][:, :, self._end - T:self._end] = keys
        self._v[block][:, :, self._end - T:self._end] = values
        return self._k[block][:, :, self._start:self._end], self._v[block][:, :, self._start:self._end]

    def kept(self, window: int | None) -> KVCache:
        """This cache with only its last ``window`` positions in use (all of them for ``None``)."""
        if window is None or self.positions <= window:
            return self
        return self._with(self._k, self._v, self._end - window, self._end, self._claimed, self.length)

    def reorder(self, index: torch.Tensor) -> KVCache:
        """The cache of batch rows ``index`` (beam search picks and repeats rows): copies."""
        index = index.to(self._k[0].device)

        def pick(t):  # (num_blks, batch, ...): the batch axis is 1
            return None if t is None else t.index_select(1, index)

        src_valid_lens = None if self.src_valid_lens is None else self.src_valid_lens.index_select(0, index)
        return KVCache(pick(self.keys), pick(self.values), self.length, cross_keys=pick(self.cross_keys),
                       cross_values=pick(self.cross_values), src_valid_lens=src_valid_lens)

    def __repr__(self) -> str:
        source = "" if self.cross_keys is None else f", cross_keys {tuple(self.cross_keys.shape)}"
        return f"KVCache(keys {self.shape}, length {self.length}{source})"
