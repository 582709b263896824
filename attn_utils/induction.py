"""In-context copying: a task that only attention to the context can solve, and the heads that solve it.

``repeated_segments`` writes sequences of random tokens in which one segment occurs twice, at random
places and with a random length. Inside the second occurrence the next token is determined by the
context ("the token that followed this one last time") and by nothing else: an n-gram model fitted
on other sequences, or any model without access to the whole context, is at chance there. A
two-layer Transformer can learn the rule with two heads (Elhage et al., 2021, "A mathematical framework
for Transformer circuits"; Olsson et al., 2022, "In-context learning and induction heads", traced their
forming during training): a *previous-token head* in the first layer copies each position's predecessor
into it, and an *induction head* in the second layer matches the current token against those copies
and attends to the position right after the earlier occurrence. ``head_scores`` measures both
behaviours in every head from its attention weights, and ``ablate_heads`` switches heads off to
test what each one is needed for. How often a model copies right is ``evaluate.copy_accuracy``;
``evaluate.copy_scores`` records that, the loss there and every head's scores during training.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from .checks import check_non_negative_int, check_positive_int, check_tokens


@dataclass(frozen=True)
class RepeatedSegments:
    """A batch of the copying task.

    ``tokens`` ``(batch, length)``; ``first`` and ``second`` ``(batch,)`` the start of each occurrence
    of the segment, ``segment_lengths`` ``(batch,)`` its length. ``predictable`` ``(batch, length)`` is
    True at the positions whose *next* token the context determines: the second occurrence but its
    last token (position t predicts token t + 1), so ``predictable[:, :-1]`` marks targets ``tokens[:, 1:]``.
    """

    tokens: torch.Tensor
    first: torch.Tensor
    second: torch.Tensor
    segment_lengths: torch.Tensor
    predictable: torch.Tensor

    def __len__(self) -> int:
        return self.tokens.shape[0]

    def __getitem__(self, rows) -> RepeatedSegments:
        """The sequences ``rows`` (an index, a slice or a mask of the batch) as a batch of their own:
        ``test[:500]`` is the first 500."""
        if isinstance(rows, int):
            rows = slice(rows, rows + 1 if rows != -1 else None)
        return RepeatedSegments(self.tokens[rows], self.first[rows], self.second[rows], self.segment_lengths[rows],
                                self.predictable[rows])


def repeated_segments(num_sequences: int, length: int, vocab_size: int, min_segment: int, max_segment: int, *,
                      first_token: int = 0, generator: torch.Generator | None = None) -> RepeatedSegments:
    """``num_sequences`` sequences of ``length`` tokens drawn uniformly from ``first_token .. vocab_size - 1``.

    Each draws a segment length ``L`` uniformly in ``min_segment .. max_segment`` and two non-overlapping
    places for it, uniformly (the second after the first), then copies the first occurrence onto the
    second. The tokens are independent draws, so outside the copy nothing is predictable, and no model
    gains from excluding tokens already seen. ``predictable`` marks the positions of the copy (but its
    last) whose token occurs only once before, at its source: there "the token after the earlier
    occurrence" is defined (a large vocabulary keeps such clashes rare). Counts are positive ints,
    ``first_token`` an int >= 0, ``generator`` a ``torch.Generator`` or ``None`` (a fixed seed, 0).
    """
    for name, value in (("num_sequences", num_sequences), ("length", length), ("min_segment", min_segment),
                        ("max_segment", max_segment), ("vocab_size", vocab_size)):
        check_positive_int(name, value)
    check_non_negative_int("first_token", first_token)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    if min_segment > max_segment:
        raise ValueError(f"need min_segment <= max_segment, got min_segment={min_segment}, max_segment={max_segment}")
    if 2 * max_segment > length:
        raise ValueError(f"two segments of up to max_segment={max_segment} tokens do not fit in length={length}")
    if not 0 <= first_token < vocab_size - 1:
        raise ValueError(f"need at least 2 tokens in first_token..vocab_size - 1, got first_token={first_token}, "
                         f"vocab_size={vocab_size}")
    rand = torch.Generator().manual_seed(0) if generator is None else generator
    tokens = torch.randint(first_token, vocab_size, (num_sequences, length), generator=rand)
    lengths = torch.randint(min_segment, max_segment + 1, (num_sequences,), generator=rand)
    cuts = (torch.rand(num_sequences, 2, generator=rand) * (length - 2 * lengths + 1)[:, None]).long().sort().values
    firsts = cuts[:, 0]  # gaps: cuts[:, 0] before the first occurrence, cuts[:, 1] - cuts[:, 0] between the two
    seconds = firsts + lengths + cuts[:, 1] - cuts[:, 0]
    predictable = torch.zeros(num_sequences, length, dtype=torch.bool)
    for i, (a, b, L) in enumerate(zip(firsts.tolist(), seconds.tolist(), lengths.tolist())):
        tokens[i, b:b + L] = tokens[i, a:a + L]
        row = tokens[i].tolist()
        for t in range(b, b + L - 1):
            predictable[i, t] = row[:t].count(row[t]) == 1  # seen once before: at its source a + t - b
    return RepeatedSegments(tokens, firsts, seconds, lengths, predictable)


def earlier_occurrences(tokens: torch.Tensor) -> torch.Tensor:
    """``(batch, T, T)`` boolean: True at ``(t, j)`` where ``j < t`` and ``tokens[j] == tokens[t]``; ``tokens`` is
    an integer tensor ``(batch, T)``."""
    check_tokens(tokens, "tokens")
    T = tokens.shape[1]
    earlier = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril(-1)  # j < t
    return (tokens[:, :, None] == tokens[:, None, :]) & earlier


def induction_targets(tokens: torch.Tensor) -> torch.Tensor:
    """``(batch, T, T)`` boolean: True at ``(t, j + 1)`` for every earlier occurrence ``j`` of the token at
    ``t``: the keys an ideal induction head attends to, the tokens that followed this one before."""
    same = earlier_occurrences(tokens)
    target = torch.zeros_like(same)
    target[:, :, 1:] = same[:, :, :-1]  # shift each match one key to the right
    return target


def head_scores(attention_weights, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    """How much each head behaves as a previous-token head and as an induction head.

    ``attention_weights`` is a list (one entry a layer) of ``(batch, heads, T, T)`` self-attention
    weights of a causal model that read ``tokens`` ``(batch, T)``. Returns ``(layers, heads)`` tensors:

    * ``"previous"``: the mean weight that position t puts on position t - 1 (t >= 1);
    * ``"induction"``: the mean weight that a position t whose token occurred earlier, at j < t, puts
      on position j + 1, the token that followed it (averaged over such positions; NaN-free: a batch
      with no repeated token raises);
    * ``"duplicate"``: the mean weight that such a position puts on the earlier occurrence j itself
      (a *duplicate-token head*, the other half of another two-layer circuit for the same task: find
      the earlier occurrence first, then look one position further).
    """
    check_tokens(tokens, "tokens")
    batch, T = tokens.shape
    if not isinstance(attention_weights, (list, tuple, torch.Tensor)) or len(attention_weights) == 0 \
            or not all(isinstance(w, torch.Tensor) for w in attention_weights):
        raise ValueError(f"attention_weights must be a non-empty list of tensors (batch, heads, T, T), one a layer, "
                         f"got {type(attention_weights).__name__}")
    weights = torch.stack([w.detach().float() for w in attention_weights])  # (layers, batch, heads, T, T)
    if weights.dim() != 5 or weights.shape[1] != batch or weights.shape[3:] != (T, T):
        raise ValueError(f"attention_weights must be (batch={batch}, heads, {T}, {T}) per layer, got "
                         f"{[tuple(w.shape) for w in attention_weights]}")
    t = torch.arange(1, T)
    previous = weights[:, :, :, t, t - 1].mean(dim=(1, 3))  # (layers, heads)
    same = earlier_occurrences(tokens)
    target = induction_targets(tokens)
    queries = target.any(dim=2)  # (batch, T): the positions whose token occurred before
    if not bool(queries.any()):
        raise ValueError("no token of the batch repeats an earlier one: the induction score is undefined")
    q = queries[None, :, None].to(weights.device)  # (1, batch, 1, T)

    def mean_mass(keys):  # keys (batch, T, T): the weight a query puts on them, averaged over the queries
        mass = (weights * keys[None, :, None].to(weights.device)).sum(dim=-1)  # (layers, batch, heads, T)
        return ((mass * q).sum(dim=(1, 3)) / q.sum(dim=(1, 3))).cpu()  # (layers, heads)

    return {"previous": previous.cpu(), "induction": mean_mass(target), "duplicate": mean_mass(same)}


@contextmanager
def ablate_heads(model, heads: Iterable[tuple[int, int]]):
    """Within the ``with`` block, the listed ``(layer, head)`` pairs of ``model`` contribute nothing.

    ``model.blks[layer].attention1`` must be a ``MultiHeadAttention`` (``CausalLanguageModel``'s
    self-attention): the head's slice of the concatenated head outputs is set to zero before ``W_o``,
    which is what removing the head from the sum ``W_o concat(head_1, ..., head_h)`` means. The
    attention weights are still computed (and recorded) as usual. Layers and heads are ints (not bools).
    """
    by_layer: dict[int, list[int]] = {}
    for pair in heads:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2 or any(
                isinstance(i, bool) or not isinstance(i, numbers.Integral) for i in pair):
            raise ValueError(f"heads must hold (layer, head) pairs of ints, got {pair!r}")
        layer, head = int(pair[0]), int(pair[1])
        if not 0 <= layer < len(model.blks):
            raise ValueError(f"layer must lie in 0..{len(model.blks) - 1}, got {layer}")
        num_heads = model.blks[layer].attention1.num_heads
        if not 0 <= head < num_heads:
            raise ValueError(f"head must lie in 0..{num_heads - 1} (layer {layer} has {num_heads} heads), got {head}")
        by_layer.setdefault(layer, []).append(head)
    handles = []

    def zero_heads(chosen, num_heads):
        def hook(_module, args):
            (X,) = args  # (batch, Q, heads * dh): head i is columns i * dh .. (i + 1) * dh - 1
            X = X.clone()
            dh = X.shape[-1] // num_heads
            for h in chosen:
                X[..., h * dh:(h + 1) * dh] = 0
            return (X,)
        return hook

    try:
        for layer, chosen in by_layer.items():
            attention = model.blks[layer].attention1
            handles.append(attention.W_o.register_forward_pre_hook(zero_heads(chosen, attention.num_heads)))
        yield model
    finally:
        for handle in handles:
            handle.remove()
