"""Translating sentences with a trained model and scoring the translations with corpus BLEU.

Sentences are decoded in batches of equal source length (no padding), then put back in the
order given. Hypotheses and references are whitespace-joined d2l-style tokens, so
``corpus_bleu`` compares them exactly as sacrebleu does with ``tokenize='none'``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import torch

from .decoding import decode
from .device import model_device
from .metrics import attention_aer, bootstrap_bleu, corpus_bleu


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
    """Translate ``sentences`` (strings, or token lists) with ``model`` and ``data``'s vocabularies.

    ``max_len`` defaults to ``data.num_steps``. Returns one ``Translation`` per sentence, in order.
    """
    if isinstance(sentences, str):
        raise ValueError("translate expects a list of sentences, got a single string (wrap it in a list)")
    device = model_device(model) if device is None else torch.device(device)
    max_len = data.num_steps if max_len is None else max_len
    src, _, src_valid_len, _ = data.build(list(sentences))
    sources = [s if isinstance(s, (list, tuple)) else data.tokenize(s) for s in sentences]
    by_length = defaultdict(list)
    for i, n in enumerate(src_valid_len.tolist()):
        by_length[n].append(i)
    results: list[Translation | None] = [None] * len(sources)
    vocab = data.tgt_vocab
    for n, indices in sorted(by_length.items()):
        for start in range(0, len(indices), batch_size):
            chunk = indices[start:start + batch_size]
            X = src[chunk, :n].to(device)  # (chunk, n): equal lengths, no padding
            lens = src_valid_len[chunk].to(device)
            out = decode(model, X, lens, vocab.bos, vocab.eos, max_len, beam_size, alpha)
            for j, i in enumerate(chunk):
                attn = None if out.attention is None else out.attention[j]
                results[i] = Translation(list(sources[i]), vocab.to_tokens(out.tokens[j]), out.scores[j], attn)
    return results


def translate_split(model, data, split: str = "test", **kwargs) -> tuple[list[str], list[str]]:
    """``(hypotheses, references)`` as strings for every pair of ``split`` (each English sentence is
    decoded once, however many French references it has)."""
    pairs = data.pairs(split)
    unique = list(dict.fromkeys(" ".join(s) for s in pairs.src))
    translated = dict(zip(unique, (t.text for t in translate(model, [u.split() for u in unique], data, **kwargs))))
    hypotheses = [translated[" ".join(s)] for s in pairs.src]
    references = [" ".join(t) for t in pairs.tgt]
    return hypotheses, references


def group_references(hypotheses, references, sources) -> tuple[list[str], list[list[str]]]:
    """One hypothesis per distinct source with *all* its references, for multi-reference BLEU.

    ``hypotheses``, ``references`` and ``sources`` (strings) are parallel, one entry per pair, as
    ``translate_split`` gives them; a source's pairs all carry the same hypothesis (it is decoded once).
    """
    if not len(hypotheses) == len(references) == len(sources):
        raise ValueError(f"expected as many hypotheses, references and sources, got {len(hypotheses)}, "
                         f"{len(references)} and {len(sources)}")
    grouped: dict[str, tuple[str, list[str]]] = {}
    for hyp, ref, src in zip(hypotheses, references, sources):
        grouped.setdefault(src, (hyp, []))[1].append(ref)
    return [hyp for hyp, _ in grouped.values()], [refs for _, refs in grouped.values()]


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


def bleu_report(model, data, split: str = "test", num_samples: int = 1000, seed: int = 0, **kwargs) -> dict:
    """Single- and multi-reference BLEU on ``split`` with bootstrap 95 % intervals (``bootstrap_bleu``).

    Returns ``{"bleu", "bleu_low", "bleu_high", "multi_bleu", "multi_low", "multi_high", "pairs",
    "sentences"}``: ``pairs`` scored with one reference each, ``sentences`` distinct English sentences
    scored against all their references. The model translates each sentence once for both.
    """
    hypotheses, refs = translate_split(model, data, split, **kwargs)
    single = bootstrap_bleu(hypotheses, refs, num_samples, seed=seed)
    grouped_hyps, grouped_refs = group_references(hypotheses, refs, [" ".join(s) for s in data.pairs(split).src])
    multi = bootstrap_bleu(grouped_hyps, grouped_refs, num_samples, seed=seed)
    return {"bleu": single.bleu, "bleu_low": single.low, "bleu_high": single.high, "multi_bleu": multi.bleu,
            "multi_low": multi.low, "multi_high": multi.high, "pairs": len(hypotheses),
            "sentences": len(grouped_hyps)}


def bleu_by_length(hypotheses, references, lengths, buckets, num_samples: int | None = None,
                   seed: int = 0) -> list[dict]:
    """Corpus BLEU within each length bucket.

    ``buckets`` is a list of ``(low, high)`` inclusive ranges of ``lengths`` (e.g. source lengths).
    Returns one dict per non-empty bucket: ``{'bucket': 'low-high', 'pairs': n, 'bleu': ...}``; with
    ``num_samples``, also ``'low'`` and ``'high'``, the bucket's bootstrap 95 % interval
    (``bootstrap_bleu``): a bucket of a few dozen sentences has a wide one.
    """
    if not len(hypotheses) == len(references) == len(lengths):
        raise ValueError(f"expected as many hypotheses, references and lengths, got {len(hypotheses)}, "
                         f"{len(references)} and {len(lengths)}")
    rows = []
    for low, high in buckets:
        keep = [i for i, n in enumerate(lengths) if low <= n <= high]
        if keep:
            label = str(low) if low == high else f"{low}-{high}"
            hyps, refs = [hypotheses[i] for i in keep], [references[i] for i in keep]
            if num_samples is None:
                rows.append({"bucket": label, "pairs": len(keep), "bleu": corpus_bleu(hyps, refs)})
            else:
                interval = bootstrap_bleu(hyps, refs, num_samples=num_samples, seed=seed)
                rows.append({"bucket": label, "pairs": len(keep), "bleu": interval.bleu, "low": interval.low,
                             "high": interval.high})
    return rows


@torch.no_grad()
def forced_attention(model, data, split: str = "test", batch_size: int = 256, device=None) -> list[torch.Tensor]:
    """The attention each pair of ``split`` gets when the decoder reads the *reference* translation.

    Teacher forcing: the decoder is fed ``<bos>`` and the reference, so row ``j`` of a pair's
    matrix holds the weights used to predict target token ``j`` (row ``len(target)``: ``<eos>``),
    and column ``i`` is source token ``i`` (the last column: the source's ``<eos>``). One
    ``(target tokens + 1, source tokens + 1)`` tensor per pair, on the CPU; the model's decoder
    must set ``attention_weights``.
    """
    if not getattr(model.decoder, "has_attention", False):
        raise ValueError(f"{type(model.decoder).__name__} has no attention weights to read (has_attention is False)")
    device = model_device(model) if device is None else torch.device(device)
    src, dec_input, src_valid_len, _ = data.arrays(split)
    pairs = data.pairs(split)
    model.eval()
    matrices = []
    for start in range(0, len(pairs), batch_size):
        rows = slice(start, start + batch_size)
        model(src[rows].to(device), dec_input[rows].to(device), src_valid_len[rows].to(device))
        weights = model.decoder.attention_weights.detach().float().cpu()  # (batch, tgt_steps, src_steps)
        for k, w in enumerate(weights, start=start):
            matrices.append(w[:len(pairs.tgt[k]) + 1, :len(pairs.src[k]) + 1])
    return matrices


def alignment_error(model, data, split: str = "test", **kwargs) -> float:
    """Alignment error rate of the model's attention against ``split``'s gold alignments.

    Each target word is linked to the source word its (teacher-forced, see ``forced_attention``)
    attention weighs most; attending to the source's ``<eos>`` links it to nothing. Only the
    bundled corpora (``'grammar'``, ``'dates'``) have gold alignments.
    """
    pairs = data.pairs(split)
    if pairs.alignments is None:
        raise ValueError(f"the {data.source!r} corpus has no gold alignments; use source='grammar' or 'dates'")
    attention = forced_attention(model, data, split, **kwargs)
    return attention_aer(attention, pairs.alignments, src_lens=[len(s) for s in pairs.src])
