"""Running a trained model over data to score it: the one home of the course's evaluations.

The scores themselves, functions of predictions alone (BLEU, the alignment error rate, accuracy's
relatives, a spread over seeds), are in ``metrics``; this module produces what they read. Every
function reads the model in evaluation mode or without gradients and leaves its weights alone.

* **Translation** (chapters 4–6, 10): ``translate`` decodes sentences in batches of equal source
  length (no padding), then puts them back in the order given; ``evaluate_bleu`` and
  ``bleu_report`` score a split with corpus BLEU (hypotheses and references are whitespace-joined
  d2l-style tokens, so ``corpus_bleu`` compares them exactly as sacrebleu does with
  ``tokenize='none'``); ``forced_attention`` and ``alignment_error`` score the attention against
  gold alignments.
* **Classification** (chapter 7): ``predict`` and ``accuracy``.
* **Language models on running text** (chapter 11): a book is far longer than the context a model
  sees at once, so scoring reads every held-out token exactly once, in windows of ``context`` tokens
  that overlap: the first window scores all of its targets, each later one moves ``stride`` tokens
  on and scores only its last ``stride`` targets, so every token after the first window is predicted
  from at least ``context - stride`` tokens before it (``sliding_window_logprobs``; the recipe of
  Hugging Face's perplexity guide). ``perplexity`` is ``exp`` of the mean negative log-probability
  over all the tokens of several texts, ``loss_by_position`` how the loss falls as a window's model
  sees more context (``losses_by_window`` keeps every window, for intervals, and
  ``ngram_losses_by_window`` scores an n-gram model on the same windows); for a masked language
  model, ``hidden_token_scores`` hides each token of a text in turn, in a window around it
  (``draw_gaps`` and ``fill_gaps`` do so at random places of several texts).
  ``copy_accuracy`` scores the copying task of ``induction``; ``copy_scores`` adds the loss there and
  every head's scores, to record during training, and ``head_curves`` reads them back.
"""

from __future__ import annotations

import math
import operator
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

from .checks import (
    check_bool,
    check_device,
    check_labelled_inputs,
    check_non_negative_int,
    check_positive_int,
    check_seed,
    check_stream,
    is_finite_number,
)
from .data.splits import check_buckets
from .decoding import decode
from .device import model_device
from .metrics import attention_aer, bleu_by_length, bootstrap_bleu, corpus_bleu, group_references
from .modes import evaluation_mode
from .ngram import BOUNDARY

if TYPE_CHECKING:
    from .induction import RepeatedSegments


@dataclass
class Translation:
    """One translated sentence: its tokens, the joined string, score and attention (or None)."""

    source: list[str]
    tokens: list[str]
    score: float
    attention: torch.Tensor | None

    @property
    def text(self) -> str:
        return " ".join(self.tokens)


def translate(model, sentences, data, beam_size: int = 1, alpha: float = 0.0, max_len: int | None = None,
              batch_size: int = 256, device=None) -> list[Translation]:
    """Translate ``sentences`` (a list of strings, or of token lists) with ``model`` and ``data``'s vocabularies
    (a ``TranslationData``).

    ``max_len`` defaults to ``data.num_steps``; a source is cut to ``data.num_steps`` tokens with its
    ``<eos>``, as in training. ``device``: a device or its name (default: the model's). Returns one
    ``Translation`` per sentence, in order.
    """
    if isinstance(sentences, str):
        raise ValueError("translate expects a list of sentences, got a single string (wrap it in a list)")
    if not isinstance(sentences, (list, tuple)) or not all(
            isinstance(s, str) or isinstance(s, (list, tuple)) and all(isinstance(t, str) for t in s)
            for s in sentences):
        raise ValueError(f"sentences must be a list of strings or of token lists (strings), got "
                         f"{type(sentences).__name__} {sentences!r:.60}")
    _check_data(data)
    check_positive_int("batch_size", batch_size)
    check_positive_int("beam_size", beam_size)  # here too, for a list of no sentence
    if max_len is not None:
        check_positive_int("max_len", max_len)
    if not is_finite_number(alpha):
        raise ValueError(f"alpha (the length-normalisation exponent) must be a finite number, got {alpha!r}")
    device = model_device(model) if device is None else check_device("device", device)
    max_len = data.num_steps if max_len is None else max_len
    src, _, src_valid_lens, _ = data.build(list(sentences))
    sources = [s if isinstance(s, (list, tuple)) else data.tokenize(s) for s in sentences]
    by_length = defaultdict(list)
    for i, n in enumerate(src_valid_lens.tolist()):
        by_length[n].append(i)
    results: list[Translation | None] = [None] * len(sources)
    vocab = data.tgt_vocab
    for n, indices in sorted(by_length.items()):
        for start in range(0, len(indices), batch_size):
            chunk = indices[start:start + batch_size]
            X = src[chunk, :n].to(device)  # (chunk, n): equal lengths, no padding
            lens = src_valid_lens[chunk].to(device)
            out = decode(model, X, lens, vocab.bos, vocab.eos, max_len, beam_size, alpha)
            for j, i in enumerate(chunk):
                attn = None if out.attention is None else out.attention[j]
                results[i] = Translation(list(sources[i]), vocab.to_tokens(out.tokens[j]), out.scores[j], attn)
    return results


def _check_data(data) -> None:
    if not all(hasattr(data, name) for name in ("build", "pairs", "tgt_vocab", "num_steps")):
        raise ValueError(f"data must be the TranslationData of load_translation_data, got {type(data).__name__}")


def translate_split(model, data, split: str = "test", **kwargs) -> tuple[list[str], list[str]]:
    """``(hypotheses, references)`` as strings for every pair of ``split`` (``"train"``, ``"val"`` or ``"test"``;
    each English sentence is decoded once, however many French references it has). ``kwargs`` go to
    ``translate``."""
    pairs = data.pairs(split)
    if len(pairs) == 0:  # BLEU of no sentence is undefined; say which split was empty
        raise ValueError(f"the {split!r} split is empty ({data.summary()}): there is nothing to translate")
    unique = list(dict.fromkeys(" ".join(s) for s in pairs.src))
    translated = dict(zip(unique, (t.text for t in translate(model, [u.split() for u in unique], data, **kwargs))))
    hypotheses = [translated[" ".join(s)] for s in pairs.src]
    references = [" ".join(t) for t in pairs.tgt]
    return hypotheses, references


def evaluate_bleu(model, data, split: str = "test", references: str = "single", **kwargs) -> float:
    """Corpus BLEU (0–100) on ``split``, greedy unless ``kwargs`` ask for a beam.

    ``references="single"``: one reference per pair, each pair scored (the course's targets);
    ``"all"``: multi-reference BLEU, each distinct English sentence scored once against all of its
    French translations in the split (splits keep an English sentence's pairs together).
    """
    if references not in ("single", "all"):
        raise ValueError(f"references must be 'single' or 'all', got {references!r}")
    hypotheses, refs = translate_split(model, data, split, **kwargs)
    if references == "all":
        hypotheses, refs = group_references(hypotheses, refs, [" ".join(s) for s in data.pairs(split).src])
    return corpus_bleu(hypotheses, refs)


def bleu_report(model, data, split: str = "test", num_samples: int = 1000, seed: int = 0, buckets=None,
                keep_hypotheses: bool = False, **kwargs) -> dict:
    """Single- and multi-reference BLEU on ``split`` with bootstrap 95 % intervals (``bootstrap_bleu``).

    Returns ``{"bleu", "bleu_low", "bleu_high", "multi_bleu", "multi_low", "multi_high", "pairs",
    "sentences"}``: ``pairs`` scored with one reference each, ``sentences`` distinct English sentences
    scored against all their references. The model translates each sentence once for both. With
    ``buckets`` (English length ranges, e.g. ``data.split.buckets``), also ``"by_length"``: single-reference
    BLEU with its interval in each bucket (``bleu_by_length``); with ``keep_hypotheses``, ``"hypotheses"``,
    one per pair of the split in order, for paired comparisons (``metrics.paired_bootstrap_bleu``).
    ``num_samples`` is a positive int, ``seed`` an int, ``keep_hypotheses`` a bool (all checked, with ``buckets``,
    before decoding).
    """
    check_positive_int("num_samples", num_samples)
    seed = check_seed("seed", seed)
    check_bool("keep_hypotheses", keep_hypotheses)
    if buckets is not None:
        buckets = check_buckets(buckets)
    hypotheses, refs = translate_split(model, data, split, **kwargs)
    single = bootstrap_bleu(hypotheses, refs, num_samples, seed=seed)
    grouped_hyps, grouped_refs = group_references(hypotheses, refs, [" ".join(s) for s in data.pairs(split).src])
    multi = bootstrap_bleu(grouped_hyps, grouped_refs, num_samples, seed=seed)
    report = {"bleu": single.bleu, "bleu_low": single.low, "bleu_high": single.high, "multi_bleu": multi.bleu,
              "multi_low": multi.low, "multi_high": multi.high, "pairs": len(hypotheses),
              "sentences": len(grouped_hyps)}
    if buckets is not None:
        lengths = [len(s) for s in data.pairs(split).src]
        report["by_length"] = bleu_by_length(hypotheses, refs, lengths, buckets, num_samples=num_samples, seed=seed)
    if keep_hypotheses:
        report["hypotheses"] = hypotheses
    return report


@torch.no_grad()
def forced_attention(model, data, split: str = "test", batch_size: int = 256, device=None,
                     heads: bool = False) -> list[torch.Tensor]:
    """The attention each pair of ``split`` gets when the decoder reads the *reference* translation.

    Teacher forcing: the decoder is fed ``<bos>`` and the reference, so row ``j`` of a pair's
    matrix holds the weights used to predict target token ``j`` (row ``len(target)``: ``<eos>``),
    and column ``i`` is source token ``i`` (the last column: the source's ``<eos>``). One
    ``(target tokens + 1, source tokens + 1)`` tensor per pair, on the CPU; the model's decoder
    must set ``attention_weights``. ``batch_size`` is a positive int, ``device`` a device or its name.
    With ``heads=True`` (a Transformer's decoder, which keeps ``cross_attention_weights``) each pair's
    tensor is ``(blocks, heads, target tokens + 1, source tokens + 1)``: every cross-attention head
    instead of the last block's mean over heads.
    """
    if not getattr(getattr(model, "decoder", None), "has_attention", False):
        raise ValueError(f"{type(getattr(model, 'decoder', model)).__name__} has no attention weights to read "
                         f"(has_attention is False)")
    check_bool("heads", heads)
    if heads and not hasattr(type(model.decoder), "cross_attention_weights"):
        raise ValueError(f"heads=True reads a Transformer decoder's cross_attention_weights; "
                         f"{type(model.decoder).__name__} keeps one attention per step")
    _check_data(data)
    check_positive_int("batch_size", batch_size)
    device = model_device(model) if device is None else check_device("device", device)
    src, dec_input, src_valid_lens, _ = data.arrays(split)
    pairs = data.pairs(split)
    model.eval()
    matrices = []
    for start in range(0, len(pairs), batch_size):
        rows = slice(start, start + batch_size)
        model(src[rows].to(device), dec_input[rows].to(device), src_valid_lens[rows].to(device))
        if heads:  # (batch, blocks, heads, tgt_steps, src_steps)
            weights = torch.stack(model.decoder.cross_attention_weights, dim=1)
        else:  # (batch, tgt_steps, src_steps)
            weights = model.decoder.attention_weights
        for k, w in enumerate(weights.detach().float().cpu(), start=start):
            matrices.append(w[..., :len(pairs.tgt[k]) + 1, :len(pairs.src[k]) + 1])
    return matrices


def alignment_error(model, data, split: str = "test", heads: bool = False, **kwargs):
    """Alignment error rate of the model's attention against ``split``'s gold alignments.

    Each target word is linked to the source word its (teacher-forced, see ``forced_attention``)
    attention weighs most; attending to the source's ``<eos>`` links it to nothing. Only the
    bundled corpora (``'grammar'``, ``'dates'``) have gold alignments. A float; with ``heads=True``
    (a Transformer) a ``(blocks, heads)`` tensor, the rate of every cross-attention head alone.
    """
    pairs = data.pairs(split)
    if pairs.alignments is None:
        raise ValueError(f"the {data.source!r} corpus has no gold alignments; use source='grammar' or 'dates'")
    attention = forced_attention(model, data, split, heads=heads, **kwargs)
    lengths = [len(s) for s in pairs.src]
    if not heads:
        return attention_aer(attention, pairs.alignments, src_valid_lens=lengths)
    blocks, num_heads = attention[0].shape[:2]
    return torch.tensor([[attention_aer([a[b, h] for a in attention], pairs.alignments, src_valid_lens=lengths)
                          for h in range(num_heads)] for b in range(blocks)], dtype=torch.float64)


# ---------------------------------------------------------------------------------------------
# Classification
# ---------------------------------------------------------------------------------------------

@torch.no_grad()
def predict(model: nn.Module, inputs: Sequence[torch.Tensor], batch_size: int = 512):
    """Class predictions ``(n,)`` and the attention weights of every example (concatenated on dim 0).

    The weights are whatever the model keeps in ``attention_weights`` after each call (``None``
    when it keeps none); the model is put in evaluation mode. ``inputs`` is a list or tuple of the tensors
    ``model`` takes, each with one row per example (one input ``X``: ``(X,)``).
    """
    if isinstance(inputs, torch.Tensor):  # tuple(X) would be its rows, each passed as an argument
        raise ValueError(f"inputs must be a sequence of tensors, got one tensor {tuple(inputs.shape)}: pass (X,)")
    inputs = tuple(inputs)
    if not inputs or not all(isinstance(x, torch.Tensor) and x.dim() >= 1 for x in inputs):
        raise ValueError(f"inputs must be a non-empty sequence of tensors (one row per example), got "
                         f"{[type(x).__name__ for x in inputs]}")
    if len({x.shape[0] for x in inputs}) != 1:
        raise ValueError(f"inputs must have one row per example each, got {[x.shape[0] for x in inputs]} rows")
    check_positive_int("batch_size", batch_size)
    if inputs[0].shape[0] == 0:  # torch.cat of no batch fails; say why
        raise ValueError("inputs hold no example (0 rows): nothing to predict")
    model.eval()
    device = model_device(model, inputs[0].device)  # a model without parameters takes them where they are
    predictions, weights = [], []
    for start in range(0, inputs[0].shape[0], batch_size):
        batch = [x[start:start + batch_size].to(device) for x in inputs]
        predictions.append(model(*batch).argmax(-1).cpu())
        w = getattr(model, "attention_weights", None)
        if w is not None:
            weights.append(w.detach().cpu())
    return torch.cat(predictions), (torch.cat(weights) if weights else None)


def accuracy(model: nn.Module, inputs: Sequence[torch.Tensor], labels: torch.Tensor, batch_size: int = 512) -> float:
    """Fraction of ``labels`` (a 1-D integer tensor of class indices) that ``model`` predicts from ``inputs``
    (as ``predict`` takes them)."""
    if isinstance(inputs, torch.Tensor):
        raise ValueError(f"inputs must be a sequence of tensors, got one tensor {tuple(inputs.shape)}: pass (X,)")
    inputs = tuple(inputs)
    check_labelled_inputs(inputs, labels)
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise ValueError(f"labels must be integer class indices, got dtype {labels.dtype}")
    predictions, _ = predict(model, inputs, batch_size)
    return float((predictions == labels.cpu()).float().mean())


# ---------------------------------------------------------------------------------------------
# Language models on running text
# ---------------------------------------------------------------------------------------------

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


def window_starts(num_tokens: int, context: int, stride: int) -> list[tuple[int, int]]:
    """The windows that score a sequence of ``num_tokens`` tokens: ``(start, skip)`` pairs.

    A window reads tokens ``start .. start + context - 1`` (fewer for a short sequence) and predicts
    ``start + 1 .. start + context``; it scores all but its first ``skip`` predictions. Together the
    windows score tokens ``1 .. num_tokens - 1`` once each (token 0, ``<bos>``, is never predicted).
    All three are positive ints, ``stride <= context``.
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
    check_positive_int("batch_size", batch_size)
    stride = max(context // 2, 1) if stride is None else stride
    check_stream(sequence, "sequence", 2)
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


def text_nats(model: nn.Module, sequences, context: int, stride: int | None = None) -> tuple[float, int]:
    """``(nats, tokens)``: the summed negative log-probability (natural log) of every token of
    ``sequences`` (a list of 1-D token tensors, each scored from its second token on) with
    ``sliding_window_logprobs`` (``context`` and ``stride`` as it takes them), in evaluation mode, and the number
    of tokens scored. Divided by a text's characters (``data.subwords.bits_per_character``) it compares
    tokenisations."""
    if not isinstance(sequences, (list, tuple)) or not sequences:
        raise ValueError(f"sequences must be a non-empty list of 1-D token tensors, got {type(sequences).__name__}")
    with evaluation_mode(model):
        logps = torch.cat([sliding_window_logprobs(model, s, context, stride) for s in sequences])
    return -logps.double().sum().item(), len(logps)


def perplexity(model: nn.Module, sequences, context: int, stride: int | None = None) -> float:
    """``exp`` of the mean negative log-probability of every token of ``sequences`` (``text_nats``)."""
    nats, tokens = text_nats(model, sequences, context, stride)
    return math.exp(nats / tokens)


def position_windows(sequences, context: int) -> list:
    """The non-overlapping windows of ``context + 1`` tokens that fit in ``sequences`` (a list of 1-D token
    tensors or lists), in order: each is read from its first token and predicts the other ``context``."""
    check_positive_int("context", context)
    _check_sequences(sequences)
    windows = [s[i:i + context + 1] for s in sequences for i in range(0, len(s) - context, context)]
    if not windows:
        raise ValueError(f"no sequence holds a window of context + 1 = {context + 1} tokens")
    return windows


def _token_ids(ids, name: str) -> list[int]:
    """``ids`` (ints, or a 1-D integer tensor) as a list of ints >= 0, else ``ValueError`` naming ``name``."""
    try:
        if isinstance(ids, (str, bytes)) or any(isinstance(i, bool) for i in ids):
            raise TypeError
        ids = [operator.index(i) for i in ids]
    except TypeError:
        raise ValueError(f"{name} must be a collection of token ids (ints >= 0), got {ids!r:.60}") from None
    if any(i < 0 for i in ids):
        raise ValueError(f"{name} must be a collection of token ids (ints >= 0), got {ids!r:.60}")
    return ids


def _check_sequences(sequences) -> None:
    """Raise unless ``sequences`` is a list or tuple of 1-D token tensors, lists or tuples (one text: ``[tokens]``)."""
    if not isinstance(sequences, (list, tuple)) or not all(
            isinstance(s, (list, tuple)) or isinstance(s, torch.Tensor) and s.dim() == 1 for s in sequences):
        got = f"one tensor {tuple(sequences.shape)}" if isinstance(sequences, torch.Tensor) \
            else f"{type(sequences).__name__} {sequences!r:.60}"
        raise ValueError(f"sequences must be a list of 1-D token tensors or lists (one text: [tokens]), got {got}")


@torch.no_grad()
def losses_by_window(model: nn.Module, sequences, context: int) -> torch.Tensor:
    """``(windows, context)`` float64: the negative log-probability of the token at window position
    ``i + 1`` given the ``i + 1`` tokens before it, in each window of ``position_windows``. Column 0
    is the loss with one token of context, the last with ``context``."""
    tokens = torch.stack([torch.as_tensor(w) for w in position_windows(sequences, context)])  # (windows, context + 1)
    rows = []
    with evaluation_mode(model):
        for i in range(0, len(tokens), 64):
            rows.append(-_target_logprobs(model, tokens[i:i + 64]).double().cpu())  # (batch, context)
    return torch.cat(rows)


def ngram_losses_by_window(lm, sequences, context: int, bos: int | None = None) -> torch.Tensor:
    """``losses_by_window`` for a fitted ``ngram.KneserNeyLM`` on the same windows: the n-gram model
    sees only the window's tokens (the last ``order - 1`` of them), as the network does, and the
    boundary padding where the window has fewer.

    ``bos``: the token that starts each sequence for the network (its ``<bos>``), if the sequences hold
    one. The n-gram model pads a sequence's start with its own boundary ``"<s>"`` instead, so a ``bos``
    in a window's context is read as that boundary: both models then know where a chapter starts."""
    if not getattr(lm, "fitted", False) or not hasattr(lm, "logprob"):
        raise ValueError(f"lm must be a fitted KneserNeyLM, got {type(lm).__name__}")
    if bos is not None:
        bos = _token_ids([bos], "bos")[0]
    windows = [w.tolist() if isinstance(w, torch.Tensor) else list(w) for w in position_windows(sequences, context)]
    windows = [[BOUNDARY if t == bos else t for t in w] for w in windows]
    unknown = next((t for w in windows for t in w if t != BOUNDARY and not lm._known(t)), None)
    if unknown is not None:
        hint = "" if bos is not None else " (if it is the <bos> that starts each sequence, pass bos=its id)"
        raise ValueError(f"sequences hold the token {unknown!r}, which is not in the n-gram model's "
                         f"vocabulary{hint}")
    return torch.tensor([[-lm.logprob(w[j + 1], w[:j + 1]) for j in range(context)] for w in windows],
                        dtype=torch.float64)  # (windows, context)


def loss_by_position(model: nn.Module, sequences, context: int) -> torch.Tensor:
    """``(context,)``: ``losses_by_window`` averaged over the windows. Entry 0 is the loss with one
    token of context, the last with ``context``: how much the model gains from looking further back."""
    return losses_by_window(model, sequences, context).mean(dim=0)


@torch.no_grad()
def hidden_token_scores(model: nn.Module, sequence: torch.Tensor, context: int, mask_id: int, never=(),
                        positions=None, batch_size: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
    """A masked language model filling gaps: ``(guesses, logprobs)``, each ``(len(positions),)`` on the
    CPU, the model's most likely token and the log-probability it gives the true one at each position
    of ``sequence``, hidden in turn (replaced by ``mask_id``, the rest intact) in a window of
    ``context`` tokens around it (centred where the sequence allows). ``positions`` (1-D integers in
    ``1 .. len(sequence) - 1``) defaults to all of them. ``model(X)`` returns logits ``(batch, steps,
    vocab)``; the tokens in ``never`` (e.g. padding and ``<mask>``; ids in ``[0, vocab)``, not all of them)
    get probability zero. ``mask_id`` is a token id (an int >= 0)."""
    check_positive_int("context", context)
    check_positive_int("batch_size", batch_size)
    check_stream(sequence, "sequence", 2)
    check_non_negative_int("mask_id", mask_id)
    never = _token_ids(never, "never")
    sequence = sequence.to(model_device(model, sequence.device))  # it may come from the CPU
    width = min(context, len(sequence))
    if positions is None:
        positions = torch.arange(1, len(sequence), device=sequence.device)
    else:
        try:
            positions = torch.as_tensor(positions).to(sequence.device)
        except (TypeError, ValueError, RuntimeError):
            raise ValueError(f"positions must be 1-D integers in 1 .. {len(sequence) - 1}, got {positions!r:.60}") \
                from None
        if positions.dim() == 1 and positions.numel() == 0:
            positions = positions.long()  # [] is read as float32: no position, not a fractional one
        if positions.dim() != 1 or positions.is_floating_point() or positions.dtype == torch.bool or (
                len(positions) and not (int(positions.min()) >= 1 and int(positions.max()) < len(sequence))):
            raise ValueError(f"positions must be 1-D integers in 1 .. {len(sequence) - 1}, got "
                             f"{positions.tolist() if positions.numel() <= 8 else tuple(positions.shape)}")
    starts = (positions - width // 2).clamp(0, len(sequence) - width)
    guesses, logprobs = [], []
    with evaluation_mode(model):
        for i in range(0, len(positions), batch_size):
            pos, start = positions[i:i + batch_size], starts[i:i + batch_size]
            X = sequence[start[:, None] + torch.arange(width, device=sequence.device)]  # (batch, width)
            rows, at = torch.arange(len(pos), device=sequence.device), pos - start
            X[rows, at] = mask_id
            logits = model_logits(model, X)[rows, at]  # (batch, vocab): the scores at each hidden position
            if never and (max(never) >= logits.shape[-1] or len(set(never)) == logits.shape[-1]):
                raise ValueError(f"never must hold token ids in [0, {logits.shape[-1]}) and leave some token "
                                 f"possible, got {sorted(set(never))[:8]}")
            logits[:, never] = float("-inf")
            guesses.append(logits.argmax(dim=-1))
            logprobs.append(torch.log_softmax(logits, dim=-1)[rows, sequence[pos]])
    if not guesses:
        return torch.zeros(0, dtype=torch.long), torch.zeros(0)
    return torch.cat(guesses).cpu(), torch.cat(logprobs).cpu()


def draw_gaps(sequences, count: int, seed: int) -> list[tuple[int, int]]:
    """``count`` gaps ``(sequence, position)`` drawn uniformly over all the tokens of ``sequences`` (1-D
    token tensors, each starting with ``<bos>``, which is never drawn), with a generator seeded by ``seed`` (an
    int); draws may repeat."""
    check_positive_int("count", count)
    seed = check_seed("seed", seed)
    _check_sequences(sequences)
    lengths = torch.tensor([len(s) - 1 for s in sequences])  # tokens after each <bos>
    if not len(lengths) or int(lengths.max()) < 1:
        raise ValueError("sequences must hold at least one token after its <bos> to draw gaps from")
    draws, gaps = torch.Generator().manual_seed(seed), []
    for _ in range(count):
        c = int(torch.multinomial(lengths.double(), 1, generator=draws))
        gaps.append((c, 1 + int(torch.randint(int(lengths[c]), (1,), generator=draws))))
    return gaps


def fill_gaps(model: nn.Module, sequences, gaps, context: int, mask_id: int,
              never=()) -> tuple[torch.Tensor, torch.Tensor]:
    """``hidden_token_scores`` at every gap ``(sequence, position)`` of ``gaps`` (from ``draw_gaps``): the
    guesses and the log-probabilities of the hidden tokens, each ``(len(gaps),)``, in ``gaps``' order. Each gap
    names a sequence of ``sequences`` by its index and a position in it (ints)."""
    _check_sequences(sequences)
    for gap in gaps:  # a gap of no sequence would be left unfilled, as whatever memory torch.empty found
        if not (isinstance(gap, (tuple, list)) and len(gap) == 2 and all(
                isinstance(v, int) and not isinstance(v, bool) for v in gap) and 0 <= gap[0] < len(sequences)):
            raise ValueError(f"gaps must be (sequence, position) pairs of ints with 0 <= sequence < "
                             f"{len(sequences)}, got {gap!r}")
    guesses, logprobs = torch.empty(len(gaps), dtype=torch.long), torch.empty(len(gaps))
    for c, sequence in enumerate(sequences):
        at = [i for i, (chapter, _) in enumerate(gaps) if chapter == c]
        if at:
            where = torch.tensor([gaps[i][1] for i in at])
            guesses[at], logprobs[at] = hidden_token_scores(model, sequence, context, mask_id, never, positions=where)
    return guesses, logprobs


def predict_hidden_tokens(model: nn.Module, sequence: torch.Tensor, context: int, mask_id: int,
                          never=(), batch_size: int = 256) -> torch.Tensor:
    """``(len(sequence) - 1,)``: the guesses of ``hidden_token_scores`` for every token of ``sequence``
    from the second on."""
    return hidden_token_scores(model, sequence, context, mask_id, never, batch_size=batch_size)[0]


@torch.no_grad()
def copy_accuracy(model, batch: RepeatedSegments) -> float:
    """The share of ``batch``'s predictable positions at which ``model``'s most probable next token is the
    right one (a batch of ``induction.repeated_segments``), in evaluation mode (``model(X)`` returns logits
    ``(batch, T, vocab)`` or a tuple starting with them)."""
    if not all(isinstance(getattr(batch, name, None), torch.Tensor) for name in ("tokens", "predictable")):
        raise ValueError(f"batch must be the RepeatedSegments of induction.repeated_segments, got "
                         f"{type(batch).__name__}")
    device = model_device(model, torch.device("cpu"))
    with evaluation_mode(model):
        logits = model_logits(model, batch.tokens[:, :-1].to(device))  # (batch, length - 1, vocab)
    mask = batch.predictable[:, :-1].to(logits.device)
    if not bool(mask.any()):
        raise ValueError("the batch has no predictable position: make the segments longer")
    hits = logits.argmax(dim=-1) == batch.tokens[:, 1:].to(logits.device)
    return hits[mask].float().mean().item()


@torch.no_grad()
def previous_token_accuracy(model, tokens: torch.Tensor, batch_size: int = 100) -> float:
    """The share of positions 1..n-1 of ``tokens`` ``(batch, n)`` at which ``model``'s most probable output
    is the token one position earlier (section 11.3's task, ``trainers.train_previous_token_lm``), in
    evaluation mode (``model(X)`` returns logits ``(batch, n, vocab)`` or a tuple starting with them),
    ``batch_size`` sequences at a time (a model that keeps its attention weights keeps only theirs)."""
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.shape[1] < 2 or tokens.is_floating_point():
        raise ValueError(f"tokens must be an integer tensor (batch, n) with n >= 2, got "
                         f"{tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else type(tokens).__name__}")
    check_positive_int("batch_size", batch_size)
    device = model_device(model, torch.device("cpu"))
    hits = 0
    with evaluation_mode(model):
        for chunk in tokens.split(batch_size):
            logits = model_logits(model, chunk.to(device))  # (chunk, n, vocab)
            hits += int((logits[:, 1:].argmax(dim=-1) == chunk[:, :-1].to(logits.device)).sum())
    return hits / (tokens.shape[0] * (tokens.shape[1] - 1))


HEAD_SCORES = ("previous", "induction", "duplicate")


@torch.no_grad()
def copy_scores(model, batch: RepeatedSegments, *, heads: bool = True) -> dict[str, float]:
    """The copying task's measurements of ``model`` on ``batch``, all from one pass over its tokens (all
    but the last), in evaluation mode: what ``fit`` records when it gets
    ``evaluate=lambda m: copy_scores(m, test)``, to follow a model through training.

    * ``"copy accuracy"``: ``copy_accuracy`` (the same number);
    * ``"copy loss"``: the mean cross-entropy (nats) at the predictable positions, the loss that only
      the context can lower (the in-context loss of the task);
    * with ``heads``, every head's ``induction.head_scores`` on that pass, one entry per score and head,
      named ``"previous 1.2"`` for layer 1, head 2 (counted from 1), likewise ``"induction 2.1"`` and
      ``"duplicate 2.1"``; ``head_curves`` puts a history's entries back into a tensor. The model must
      keep its last pass's weights in ``attention_weights`` (``CausalLanguageModel`` does).
    """
    from .induction import head_scores  # a model-layer module, imported where it is used

    device = model_device(model, torch.device("cpu"))
    inputs = batch.tokens[:, :-1]
    with evaluation_mode(model):
        logits = model_logits(model, inputs.to(device))  # (batch, length - 1, vocab)
        weights = model.attention_weights if heads else None
    mask = batch.predictable[:, :-1].to(logits.device)
    if not bool(mask.any()):
        raise ValueError("the batch has no predictable position: make the segments longer")
    targets = batch.tokens[:, 1:].to(logits.device)
    hits = logits.argmax(dim=-1) == targets
    losses = torch.nn.functional.cross_entropy(logits[mask], targets[mask])
    result = {"copy accuracy": hits[mask].float().mean().item(), "copy loss": losses.item()}
    if heads:
        scores = head_scores(weights, inputs.to(device))
        for kind in HEAD_SCORES:
            for layer, row in enumerate(scores[kind].tolist()):  # (layers, heads)
                for head, value in enumerate(row):
                    result[f"{kind} {layer + 1}.{head + 1}"] = value
    return result


def head_curves(history, kind: str) -> tuple[list[int], torch.Tensor]:
    """``(steps, scores)``: the ``kind`` score (``"previous"``, ``"induction"`` or ``"duplicate"``) of
    every head at each evaluation of a ``History`` that recorded ``copy_scores``; ``scores`` is
    ``(evaluations, layers, heads)``, ``scores[i, l, h]`` the entry ``"{kind} {l + 1}.{h + 1}"``."""
    if kind not in HEAD_SCORES:
        raise ValueError(f"kind must be one of {HEAD_SCORES}, got {kind!r}")
    names = {tuple(int(n) for n in name.split(" ")[1].split(".")): name for name in history.evals
             if name.startswith(kind + " ")}
    if not names:
        raise ValueError(f"the history has no {kind!r} head scores: train with evaluate=lambda m: copy_scores(m, "
                         f"batch); it has {sorted(history.evals)}")
    layers, heads = max(layer for layer, _ in names), max(head for _, head in names)
    scores = torch.tensor([[history.evals[names[(layer, head)]] for head in range(1, heads + 1)]
                           for layer in range(1, layers + 1)])  # (layers, heads, evaluations)
    return list(history.eval_steps), scores.permute(2, 0, 1)
