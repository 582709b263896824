"""Language models on running text: random windows to train on, sliding windows to score a text.

A book is far longer than the context a model sees at once. Training reads windows of ``length + 1``
tokens cut at random places of the training text (``random_windows``). Scoring reads every held-out
token exactly once, in windows of ``context`` tokens that overlap: the first window scores all of its
targets, each later one moves ``stride`` tokens on and scores only its last ``stride`` targets, so
every token after the first window is predicted from at least ``context - stride`` tokens before it
(``sliding_window_logprobs``; the recipe of Hugging Face's perplexity guide). ``perplexity`` is
``exp`` of the mean negative log-probability over all the tokens of several texts, and
``loss_by_position`` how the loss falls as a window's model sees more context. For a masked
language model, ``predict_hidden_tokens`` hides each token of a text in turn, in a window around it.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .checks import check_positive_int
from .device import model_device
from .training_loop import evaluation_mode


def _check_stream(stream, name: str, min_length: int) -> None:
    if not isinstance(stream, torch.Tensor) or stream.dim() != 1 or stream.is_floating_point():
        got = f"shape {tuple(stream.shape)}, dtype {stream.dtype}" if isinstance(stream, torch.Tensor) \
            else type(stream).__name__
        raise ValueError(f"{name} must be a 1-D integer tensor of token indices, got {got}")
    if len(stream) < min_length:
        raise ValueError(f"{name} must hold at least {min_length} tokens, got {len(stream)}")


def model_logits(model: nn.Module, X: torch.Tensor) -> torch.Tensor:
    """``model(X)``'s logits ``(batch, steps, vocab)`` (the first element when the model returns a tuple,
    as ``CausalLanguageModel`` does), in float32 at least, so that a softmax of half-precision logits
    does not lose the small probabilities."""
    out = model(X)
    logits = out[0] if isinstance(out, tuple) else out
    return logits.to(torch.promote_types(logits.dtype, torch.float32))


def _target_logprobs(model: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    """``(batch, steps - 1)``: the log-probability of ``tokens[:, 1:]`` given the tokens before each,
    on the model's device (the tokens may come from the CPU)."""
    tokens = tokens.to(model_device(model, tokens.device))
    logits = model_logits(model, tokens[:, :-1])  # (batch, steps - 1, vocab)
    return torch.log_softmax(logits, dim=-1).gather(-1, tokens[:, 1:, None])[..., 0]


def random_windows(stream: torch.Tensor, batch_size: int, length: int,
                   generator: torch.Generator | None = None) -> torch.Tensor:
    """``(batch_size, length + 1)`` token windows starting at uniform random places of ``stream`` (1-D):
    inputs ``[:, :-1]`` and next-token targets ``[:, 1:]``."""
    check_positive_int("batch_size", batch_size)
    check_positive_int("length", length)
    _check_stream(stream, "stream", length + 1)
    starts = torch.randint(len(stream) - length, (batch_size,), generator=generator)
    offsets = torch.arange(length + 1)
    return stream[(starts[:, None] + offsets).to(stream.device)]  # (batch_size, length + 1)


def window_starts(num_tokens: int, context: int, stride: int) -> list[tuple[int, int]]:
    """The windows that score a sequence of ``num_tokens`` tokens: ``(start, skip)`` pairs.

    A window reads tokens ``start .. start + context - 1`` (fewer for a short sequence) and predicts
    ``start + 1 .. start + context``; it scores all but its first ``skip`` predictions. Together the
    windows score tokens ``1 .. num_tokens - 1`` once each (token 0, ``<bos>``, is never predicted).
    """
    for name, value in [("num_tokens", num_tokens), ("context", context), ("stride", stride)]:
        check_positive_int(name, value)
    if stride > context:
        raise ValueError(f"stride must be at most context={context} (else some tokens are never scored), got {stride}")
    windows = [(0, 0)]
    scored = min(context, num_tokens - 1)  # the last token scored so far
    while scored < num_tokens - 1:
        end = min(scored + stride, num_tokens - 1)  # the last token this window predicts
        start = end - context
        windows.append((start, scored - start))
        scored = end
    return windows


@torch.no_grad()
def sliding_window_logprobs(model: nn.Module, sequence: torch.Tensor, context: int, stride: int | None = None,
                            batch_size: int = 64) -> torch.Tensor:
    """``(len(sequence) - 1,)``: the log-probability of each token of ``sequence`` (1-D, from the
    second) under ``model``, read in the windows of ``window_starts`` (``stride`` defaults to
    ``context // 2``). ``model(X)`` takes ``(batch, steps)`` tokens and returns logits ``(batch, steps,
    vocab)``, or a tuple whose first element they are (``CausalLanguageModel``)."""
    check_positive_int("context", context)
    stride = max(context // 2, 1) if stride is None else stride
    _check_stream(sequence, "sequence", 2)
    windows = window_starts(len(sequence), context, stride)
    width = min(context, len(sequence) - 1)
    offsets = torch.arange(width + 1, device=sequence.device)
    pieces = []
    for i in range(0, len(windows), batch_size):
        chunk = windows[i:i + batch_size]
        starts = torch.tensor([s for s, _ in chunk], device=sequence.device)
        tokens = sequence[starts[:, None] + offsets]  # (windows, width + 1)
        logp = _target_logprobs(model, tokens)  # (windows, width)
        pieces.extend(row[skip:] for row, (_, skip) in zip(logp, chunk))
    return torch.cat(pieces).cpu()


def perplexity(model: nn.Module, sequences, context: int, stride: int | None = None) -> float:
    """``exp`` of the mean negative log-probability of every token of ``sequences`` (a list of 1-D token
    tensors, each scored from its second token on) with ``sliding_window_logprobs``."""
    if not isinstance(sequences, (list, tuple)) or not sequences:
        raise ValueError(f"sequences must be a non-empty list of 1-D token tensors, got {type(sequences).__name__}")
    with evaluation_mode(model):
        logps = torch.cat([sliding_window_logprobs(model, s, context, stride) for s in sequences])
    return math.exp(-logps.double().mean().item())


@torch.no_grad()
def loss_by_position(model: nn.Module, sequences, context: int) -> torch.Tensor:
    """``(context,)``: the mean negative log-probability of the token at window position ``i + 1`` given
    the ``i + 1`` tokens before it, over the non-overlapping windows of ``context + 1`` tokens that fit
    in ``sequences`` (1-D token tensors). Entry 0 is the loss with one token of context, the last with
    ``context``: how much the model gains from looking further back."""
    check_positive_int("context", context)
    windows = [s[i:i + context + 1] for s in sequences for i in range(0, len(s) - context, context)]
    if not windows:
        raise ValueError(f"no sequence holds a window of context + 1 = {context + 1} tokens")
    tokens = torch.stack(windows)  # (windows, context + 1)
    total = torch.zeros(context, dtype=torch.float64)
    with evaluation_mode(model):
        for i in range(0, len(tokens), 64):
            logp = _target_logprobs(model, tokens[i:i + 64])  # (batch, context)
            total -= logp.double().sum(dim=0).cpu()
    return total / len(tokens)


@torch.no_grad()
def predict_hidden_tokens(model: nn.Module, sequence: torch.Tensor, context: int, mask_id: int,
                          never=(), batch_size: int = 256) -> torch.Tensor:
    """``(len(sequence) - 1,)``: a masked language model's guess for each token of ``sequence`` from the
    second on, each hidden in turn (replaced by ``mask_id``, the rest intact) in a window of ``context``
    tokens around it (centred where the sequence allows). ``model(X)`` returns logits ``(batch, steps,
    vocab)``; the tokens in ``never`` (e.g. padding and ``<mask>``) are never guessed."""
    check_positive_int("context", context)
    _check_stream(sequence, "sequence", 2)
    sequence = sequence.to(model_device(model, sequence.device))  # it may come from the CPU
    width = min(context, len(sequence))
    positions = torch.arange(1, len(sequence), device=sequence.device)
    starts = (positions - width // 2).clamp(0, len(sequence) - width)
    guesses = []
    with evaluation_mode(model):
        for i in range(0, len(positions), batch_size):
            pos, start = positions[i:i + batch_size], starts[i:i + batch_size]
            X = sequence[start[:, None] + torch.arange(width, device=sequence.device)]  # (batch, width)
            rows, at = torch.arange(len(pos), device=sequence.device), pos - start
            X[rows, at] = mask_id
            logits = model(X)[rows, at]  # (batch, vocab): the scores at each hidden position
            logits[:, list(never)] = float("-inf")
            guesses.append(logits.argmax(dim=-1))
    return torch.cat(guesses).cpu()
