"""Greedy decoding and beam search for any ``EncoderDecoder`` (see ``seq2seq``), batched.

Both return a ``Decoded``: for each source sentence the generated token indices (without
``<bos>``, cut before ``<eos>``), the summed log-probability of the tokens emitted (``<eos>``
included), and, when the decoder exposes ``attention_weights``, a ``(target_steps,
source_steps)`` tensor with one row per emitted token (``<eos>`` included); ``None`` otherwise.

Arguments: ``src`` integer token ids ``(batch, steps)`` (an empty batch decodes to empty lists),
``src_valid_lens`` ``None`` or a ``(batch,)`` tensor, ``bos`` and ``eos`` token indices below the
decoder's vocabulary size, ``max_len`` and ``beam_size`` positive ints, ``alpha`` a finite number.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from .checks import check_non_negative_int, check_positive_int, check_tokens, is_finite_number


@dataclass
class Decoded:
    """Output of ``greedy_decode`` / ``beam_search``, one entry per source sentence."""

    tokens: list[list[int]]
    scores: list[float]
    attention: list[torch.Tensor] | None


def _check(src, src_valid_lens, max_len, bos, eos):
    check_tokens(src, "src")
    if src_valid_lens is not None and (not isinstance(src_valid_lens, torch.Tensor)
                                       or tuple(src_valid_lens.shape) != (src.shape[0],)):
        got = tuple(src_valid_lens.shape) if isinstance(src_valid_lens, torch.Tensor) else type(src_valid_lens).__name__
        raise ValueError(f"src_valid_lens must be a tensor of shape ({src.shape[0]},), got {got}")
    check_positive_int("max_len", max_len)
    check_non_negative_int("bos", bos)
    if eos is not None:
        check_non_negative_int("eos", eos)


def _check_bos(model, bos: int) -> None:
    """``bos`` must be a token the decoder can read: below the size of its ``embedding`` (where it has one)."""
    embedding = getattr(getattr(model, "decoder", None), "embedding", None)
    if isinstance(embedding, nn.Embedding) and bos >= embedding.num_embeddings:
        raise ValueError(f"bos must be a token index below the decoder's vocabulary size {embedding.num_embeddings}, "
                         f"got {bos}")


def _empty(model) -> Decoded:
    """The result for an empty batch: no sentence, and no attention unless the decoder has some."""
    return Decoded([], [], [] if getattr(getattr(model, "decoder", None), "has_attention", False) else None)


def _check_eos(eos, vocab: int) -> None:
    """``eos`` must be a token the decoder can emit (known once its first logits give the vocabulary's size)."""
    if eos is not None and eos >= vocab:
        raise ValueError(f"eos must be a token index below the decoder's vocabulary size {vocab}, got {eos}")


def _step_attention(decoder):
    """The attention weights of the last decoder step, ``(batch, source_steps)``, or None."""
    weights = getattr(decoder, "attention_weights", None)
    if weights is None:
        return None
    return weights.detach()[:, -1]  # (batch, steps=1, source_steps) -> (batch, source_steps)


def _start(model, src, src_valid_lens):
    args = () if src_valid_lens is None else (src_valid_lens,)
    enc_all_outputs = model.encoder(src, *args)
    return model.decoder.init_state(enc_all_outputs, *args)


def length_normalised(scores: torch.Tensor, lengths: torch.Tensor, alpha: float) -> torch.Tensor:
    """``scores / lengths**alpha``: log-probabilities made comparable across output lengths
    (``alpha=0`` leaves them unchanged; lengths below 1 count as 1). ``scores`` and ``lengths`` are tensors of
    one shape, ``alpha`` a finite number."""
    if not is_finite_number(alpha):
        raise ValueError(f"alpha (the length-normalisation exponent) must be a finite number, got {alpha!r}")
    if scores.shape != lengths.shape:
        raise ValueError(f"scores and lengths must have the same shape, got {tuple(scores.shape)} "
                         f"and {tuple(lengths.shape)}")
    return scores / lengths.clamp(min=1).to(scores.dtype) ** alpha if alpha else scores


def _cut(seq: list[int], eos: int) -> int:
    """Number of tokens up to and including the first ``<eos>`` (all of them if there is none)."""
    return seq.index(eos) + 1 if eos in seq else len(seq)


@torch.no_grad()
def greedy_decode(model, src: torch.Tensor, src_valid_lens: torch.Tensor | None, bos: int, eos: int | None,
                  max_len: int, *, use_cache: bool = True) -> Decoded:
    """Feed back the most probable token at every step, for a whole batch at once.

    A sentence stops at its first ``<eos>`` or after ``max_len`` tokens; the batch stops when
    every sentence has stopped (``eos=None``: every sentence runs ``max_len`` steps, as d2l's
    ``predict_step``). With ``use_cache`` each step feeds the newest token to the decoder's state
    (a Transformer's key-value cache); without, each step re-runs the decoder on the whole prefix
    from the state ``init_state`` made (the same tokens, slower: chapter 10 times the two).
    """
    _check(src, src_valid_lens, max_len, bos, eos)
    _check_bos(model, bos)
    if src.shape[0] == 0:
        return _empty(model)
    model.eval()
    batch, device = src.shape[0], src.device
    state = fresh = _start(model, src, src_valid_lens)
    X = prefix = torch.full((batch, 1), bos, dtype=torch.long, device=device)
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    tokens, logps, attns = [], [], []
    for _ in range(max_len):
        if use_cache:
            logits, state = model.decoder(X, state)  # (batch, 1, vocab)
        else:
            logits, _ = model.decoder(prefix, fresh)  # the whole prefix again: (batch, steps, vocab)
        logp = F.log_softmax(logits[:, -1].float(), dim=-1)  # (batch, vocab)
        _check_eos(eos, logp.shape[-1])
        best_logp, X = logp.max(dim=-1)
        tokens.append(X)
        logps.append(torch.where(done, 0.0, best_logp))
        attn = _step_attention(model.decoder)
        if attn is not None:
            attns.append(attn)
        X = X.unsqueeze(1)  # (batch, 1)
        if not use_cache:
            prefix = torch.cat([prefix, X], dim=1)
        if eos is not None:
            done = done | X[:, 0].eq(eos)
            if bool(done.all()):
                break
    token_rows = torch.stack(tokens, dim=1).tolist()  # (batch, steps)
    total = torch.stack(logps, dim=1).sum(dim=1).tolist()  # (batch,)
    attn_all = torch.stack(attns, dim=1).cpu() if attns else None  # (batch, steps, source_steps)
    out_tokens, out_attn = [], [] if attn_all is not None else None
    for b, row in enumerate(token_rows):
        n = len(row) if eos is None else _cut(row, eos)
        out_tokens.append(row[:n - 1] if row[n - 1:n] == [eos] else row[:n])
        if out_attn is not None:
            out_attn.append(attn_all[b, :n])
    return Decoded(out_tokens, total, out_attn)


@torch.no_grad()
def beam_search(model, src: torch.Tensor, src_valid_lens: torch.Tensor | None, bos: int, eos: int,
                max_len: int, beam_size: int = 4, alpha: float = 0.0) -> Decoded:
    """Keep the ``beam_size`` most probable prefixes at every step, for a whole batch at once.

    A prefix that emits ``<eos>`` is finished: it keeps its place in the beam and its score
    (later steps add nothing to it). Search stops when every beam of every sentence is finished
    or after ``max_len`` steps. The result is the beam with the highest ``score / length**alpha``
    (length = tokens emitted, ``<eos>`` included; ``alpha=0``: the most probable). The returned
    score is the unnormalised log-probability. With ``beam_size=1`` this is greedy decoding.
    """
    _check(src, src_valid_lens, max_len, bos, eos)
    check_positive_int("beam_size", beam_size)
    if eos is None:
        raise ValueError("beam_search needs an eos token (a finished beam keeps emitting it), got None")
    if not is_finite_number(alpha):
        raise ValueError(f"alpha (the length-normalisation exponent) must be a finite number, got {alpha!r}")
    _check_bos(model, bos)
    if src.shape[0] == 0:
        return _empty(model)
    model.eval()
    batch, device, K = src.shape[0], src.device, beam_size
    state = _start(model, src, src_valid_lens)
    state = model.decoder.reorder_state(state, torch.arange(batch, device=device).repeat_interleave(K))
    scores = torch.full((batch, K), float("-inf"), device=device)
    scores[:, 0] = 0.0  # all beams start as the same empty prefix: keep one of them
    lengths = torch.zeros(batch, K, dtype=torch.long, device=device)
    done = torch.zeros(batch, K, dtype=torch.bool, device=device)
    history = torch.empty(batch, K, 0, dtype=torch.long, device=device)  # tokens of each beam
    attn_history = None
    X = torch.full((batch * K, 1), bos, dtype=torch.long, device=device)
    for _ in range(max_len):
        logits, state = model.decoder(X, state)  # (batch * K, 1, vocab)
        logp = F.log_softmax(logits[:, -1].float(), dim=-1).reshape(batch, K, -1)  # (batch, K, vocab)
        logp = logp.nan_to_num(nan=float("-inf"))  # a row of impossible tokens only: nothing follows
        vocab = logp.shape[-1]
        _check_eos(eos, vocab)
        # A finished beam has one continuation, <eos> again, at no cost (it marks the padding).
        finished_row = torch.full((vocab,), float("-inf"), device=device)
        finished_row[eos] = 0.0
        logp = torch.where(done.unsqueeze(-1), finished_row, logp)
        candidates = (scores.unsqueeze(-1) + logp).reshape(batch, K * vocab)  # (batch, K * vocab)
        scores, flat = candidates.topk(K, dim=-1)  # (batch, K)
        parent, token = flat // vocab, flat % vocab  # (batch, K)
        rows = (parent + torch.arange(batch, device=device).unsqueeze(1) * K).reshape(-1)  # (batch * K,)
        history = torch.cat([history.gather(1, parent.unsqueeze(-1).expand(-1, -1, history.shape[-1])),
                             token.unsqueeze(-1)], dim=-1)  # (batch, K, steps)
        was_done = done.gather(1, parent)
        lengths = lengths.gather(1, parent) + (~was_done).long()
        done = was_done | (token == eos)
        attn = _step_attention(model.decoder)
        if attn is not None:
            attn = attn.index_select(0, rows).reshape(batch, K, 1, -1)  # (batch, K, 1, source_steps)
            attn_history = attn if attn_history is None else torch.cat(
                [attn_history.reshape(batch * K, -1, attn.shape[-1]).index_select(0, rows)
                 .reshape(batch, K, -1, attn.shape[-1]), attn], dim=2)  # (batch, K, steps, source_steps)
        state = model.decoder.reorder_state(state, rows)
        X = token.reshape(batch * K, 1)
        if bool(done.all()):
            break
    normalised = length_normalised(scores, lengths, alpha)
    best = normalised.argmax(dim=-1)  # (batch,)
    out_tokens, out_scores = [], []
    out_attn = [] if attn_history is not None else None
    for b in range(batch):
        k = int(best[b])
        row = history[b, k].tolist()
        n = int(lengths[b, k])
        out_tokens.append(row[:n - 1] if row[n - 1:n] == [eos] else row[:n])
        out_scores.append(float(scores[b, k]))
        if out_attn is not None:
            out_attn.append(attn_history[b, k, :n].cpu())
    return Decoded(out_tokens, out_scores, out_attn)


def decode(model, src, src_valid_lens, bos: int, eos: int, max_len: int, beam_size: int = 1,
           alpha: float = 0.0) -> Decoded:
    """Greedy decoding for ``beam_size=1``, beam search otherwise (``beam_size`` a positive int, not ``True``)."""
    check_positive_int("beam_size", beam_size)
    if not is_finite_number(alpha):
        raise ValueError(f"alpha (the length-normalisation exponent) must be a finite number, got {alpha!r}")
    if beam_size == 1:
        return greedy_decode(model, src, src_valid_lens, bos, eos, max_len)
    return beam_search(model, src, src_valid_lens, bos, eos, max_len, beam_size, alpha)
