"""The course's scores, as functions of what a model produced (predictions, attention weights, a
training history, one number per seed), never of the model itself: ``evaluate`` runs a model over
data to produce what they read.

* Translation: corpus BLEU (as sacrebleu computes it), with several references
  (``group_references``), a bootstrap interval and per length bucket; two systems compared by paired
  bootstrap resampling, each the mean of its runs (seeds), overall or per length bucket; d2l's
  sentence BLEU.
* Alignment: the alignment error rate of attention weights against gold word alignments.
* Classification (chapter 7): SemEval-2010 Task 8's official macro-F1, the evidence hit rate of
  attention weights, and ``steps_to_reach``, when a training run first reached a level.
* Several seeds: ``spread``, the mean and range of a number measured once per seed.
"""

from __future__ import annotations

import collections
import math
import numbers
import operator
from collections.abc import Iterable, Mapping, Sequence
from statistics import fmean
from typing import TYPE_CHECKING, NamedTuple

import torch

from .checks import check_positive_int, check_seed, is_finite_number
from .data.relations import LABELS, relation_type
from .data.splits import bucket_label, check_buckets, in_bucket

if TYPE_CHECKING:
    from .training_loop import History

_LOG_ZERO = -9999999999  # sacrebleu's floor for log(0)


def _ngram_counts(tokens: Sequence[str], max_order: int) -> collections.Counter:
    return collections.Counter(tuple(tokens[i:i + n]) for n in range(1, max_order + 1)
                               for i in range(len(tokens) - n + 1))


def _tokens(text, what: str) -> list[str]:
    if isinstance(text, str):
        return text.split()
    if isinstance(text, (list, tuple)) and all(isinstance(t, str) for t in text):
        return list(text)
    raise ValueError(f"{what} must be a string (or, for a hypothesis, a list of tokens), "
                     f"got {type(text).__name__} {text!r}")


def _listlike(value, name: str, expected: str):
    """``value`` if it is a list, a tuple or another sized sequence (not a string or a dict), else ``ValueError``
    naming ``name``: a generator, ``None`` or a single string would fail later, or be read character by character."""
    if isinstance(value, (str, bytes, Mapping)) or not (hasattr(value, "__len__") and hasattr(value, "__getitem__")):
        raise ValueError(f"{name} must be {expected}, got {type(value).__name__} {value!r:.60}")
    return value


def _index(value, name: str) -> int:
    """``value`` as an int if it is one (a Python, NumPy or 0-d torch integer, not a bool), else ``ValueError``
    naming ``name``: ``int(1.5)`` would silently be 1."""
    try:
        if isinstance(value, bool):
            raise TypeError
        return operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {type(value).__name__} {value!r}") from None


def _check_confidence(confidence) -> None:
    if not is_finite_number(confidence) or not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")


def _closest_ref_len(hyp_len: int, ref_lens: list[int]) -> int:
    """The reference length closest to the hypothesis length, the shorter on a tie (as sacrebleu)."""
    return min(ref_lens, key=lambda r: (abs(hyp_len - r), r))


def corpus_bleu(hypotheses: Sequence, references: Sequence, max_order: int = 4, smooth: str = "exp") -> float:
    """Corpus BLEU (0–100) of whitespace-tokenised strings, as ``sacrebleu.corpus_bleu(hypotheses,
    [references], tokenize='none').score``.

    ``hypotheses`` and ``references`` are lists of equal length (at least one). ``references[k]`` is the
    reference string of ``hypotheses[k]``, or a list/tuple of strings for several references (clipped
    counts take the maximum over them; the brevity penalty uses the reference length closest to the
    hypothesis), so a reference given as a list of tokens reads as several one-word references: join
    it first. A hypothesis may also be a list of tokens (strings). ``max_order``: a positive int.
    n-gram counts and lengths are summed over the corpus; the brevity penalty is
    exp(1 − r/c) when the hypotheses are shorter (c < r), 0 when they are empty. ``smooth='exp'``
    (sacrebleu's default) gives an order with no match the precision 1/(2^k · total), k counting
    such orders so far; ``'none'`` leaves it 0, and BLEU is then 0. As in sacrebleu, a corpus with
    no n-gram of some order ≤ ``max_order`` at all (every hypothesis shorter than 4 tokens) scores 0.
    """
    statistics = bleu_statistics(hypotheses, references, max_order)
    return bleu_from_statistics(statistics.sum(dim=0), max_order, smooth)


def bleu_statistics(hypotheses: Sequence, references: Sequence, max_order: int = 4) -> torch.Tensor:
    """Each sentence's BLEU counts: a ``(sentences, 2 * max_order + 2)`` integer tensor whose row holds the
    clipped n-gram matches for n = 1..max_order, the n-gram totals, the hypothesis length and the
    (closest) reference length. Corpus BLEU is ``bleu_from_statistics`` of their sum over any set of
    rows, which is what makes bootstrap resampling cheap (``bootstrap_bleu``).
    """
    if isinstance(hypotheses, str) or isinstance(references, str):
        raise ValueError("corpus_bleu takes a list of hypotheses and a list of references, got a single string")
    _listlike(hypotheses, "hypotheses", "a list of hypotheses (strings or lists of tokens)")
    _listlike(references, "references", "a list of references (a string, or a list of strings, per hypothesis)")
    if len(hypotheses) != len(references):
        raise ValueError(f"expected one reference (or list of references) per hypothesis: got "
                         f"{len(hypotheses)} hypotheses and {len(references)} references")
    if not hypotheses:
        raise ValueError("corpus_bleu needs at least one hypothesis, got none")
    check_positive_int("max_order", max_order)
    rows = []
    for hyp, refs in zip(hypotheses, references):
        hyp_tokens = _tokens(hyp, "a hypothesis")
        if not isinstance(refs, (str, list, tuple)):
            raise ValueError(f"each entry of references must be a string or a list/tuple of strings (several "
                             f"references), got {type(refs).__name__} {refs!r:.60}")
        refs = [refs] if isinstance(refs, str) else list(refs)
        if not refs:
            raise ValueError(f"every hypothesis needs at least one reference, got none for {hyp!r}")
        ref_ngrams: collections.Counter = collections.Counter()
        ref_lens = []
        for ref in refs:
            if not isinstance(ref, str):
                raise ValueError(f"references must be strings, got {type(ref).__name__} {ref!r}")
            ref_tokens = ref.split()
            ref_lens.append(len(ref_tokens))
            ref_ngrams |= _ngram_counts(ref_tokens, max_order)  # max count over references
        correct, total = [0] * max_order, [0] * max_order
        for ngram, count in _ngram_counts(hyp_tokens, max_order).items():
            total[len(ngram) - 1] += count
            correct[len(ngram) - 1] += min(count, ref_ngrams[ngram])
        rows.append(correct + total + [len(hyp_tokens), _closest_ref_len(len(hyp_tokens), ref_lens)])
    return torch.tensor(rows, dtype=torch.long)


def bleu_from_statistics(statistics: torch.Tensor, max_order: int = 4, smooth: str = "exp") -> float:
    """Corpus BLEU (0–100) from summed ``bleu_statistics``: a 1-D integer tensor of ``2 * max_order + 2``
    counts, each >= 0, the matches of each order at most its n-grams (``bleu_statistics(...).sum(dim=0)``)."""
    if smooth not in ("exp", "none"):
        raise ValueError(f"smooth must be 'exp' or 'none', got {smooth!r}")
    check_positive_int("max_order", max_order)
    if not isinstance(statistics, torch.Tensor) or statistics.dim() != 1 or statistics.is_floating_point() \
            or statistics.is_complex() or statistics.dtype == torch.bool:
        got = f"shape {tuple(statistics.shape)}, dtype {statistics.dtype}" if isinstance(statistics, torch.Tensor) \
            else type(statistics).__name__
        raise ValueError(f"statistics must be a 1-D integer tensor of summed counts (bleu_statistics(...).sum(dim=0)), "
                         f"got {got}")
    counts = [int(c) for c in statistics.tolist()]
    if len(counts) != 2 * max_order + 2:
        raise ValueError(f"expected {2 * max_order + 2} summed counts for max_order={max_order}, got {len(counts)}")
    if min(counts) < 0 or any(c > t for c, t in zip(counts[:max_order], counts[max_order:2 * max_order])):
        raise ValueError(f"statistics must be counts >= 0 with at most as many matches as n-grams of each order, "
                         f"got {counts}")
    return _bleu_from_statistics(counts[:max_order], counts[max_order:2 * max_order], counts[-2], counts[-1],
                                 smooth)


class BleuInterval(NamedTuple):
    """Corpus BLEU with a bootstrap confidence interval (``low``, ``high``), all 0–100."""

    bleu: float
    low: float
    high: float


def bootstrap_bleu(hypotheses: Sequence, references: Sequence, num_samples: int = 1000, confidence: float = 0.95,
                   seed: int = 0, max_order: int = 4) -> BleuInterval:
    """Corpus BLEU and its percentile bootstrap interval (Koehn, 2004): the sentences are resampled
    with replacement ``num_samples`` times and BLEU recomputed on each resample; ``low`` and ``high``
    are the ``(1 ± confidence) / 2`` quantiles of those scores (``confidence`` in (0, 1)). Seeded (``seed``: an
    int), so the interval is reproducible. The arguments otherwise as ``corpus_bleu``'s.
    """
    _check_confidence(confidence)
    check_positive_int("num_samples", num_samples)
    seed = check_seed("seed", seed)
    statistics = bleu_statistics(hypotheses, references, max_order)  # (sentences, 2 * max_order + 2)
    generator = torch.Generator().manual_seed(seed)
    picks = torch.randint(len(statistics), (num_samples, len(statistics)), generator=generator)
    sums = statistics[picks].sum(dim=1)  # (samples, sentences, counts) -> (samples, counts)
    scores = torch.tensor([bleu_from_statistics(row, max_order) for row in sums], dtype=torch.float64)
    tail = (1 - confidence) / 2
    low, high = torch.quantile(scores, torch.tensor([tail, 1 - tail], dtype=torch.float64)).tolist()
    return BleuInterval(bleu_from_statistics(statistics.sum(dim=0), max_order), low, high)


class MeanInterval(NamedTuple):
    """Means along the first axis with their percentile bootstrap interval: tensors of one shape."""

    mean: torch.Tensor
    low: torch.Tensor
    high: torch.Tensor


def bootstrap_means(samples: torch.Tensor, num_samples: int = 1000, confidence: float = 0.95,
                    seed: int = 0) -> MeanInterval:
    """The mean of ``samples`` ``(n, ...)`` over its first axis (e.g. the loss at each position, one row
    per text window) and its percentile bootstrap interval: the rows are resampled with replacement
    ``num_samples`` times, the same rows for every column (so a difference of two columns keeps its
    pairing), and ``low``/``high`` are the ``(1 ± confidence) / 2`` quantiles of the resampled means.
    Computed in float64; seeded, so the interval is reproducible. ``samples``: a real (not complex), finite
    tensor with at least one column; ``confidence`` in (0, 1); ``seed`` an int."""
    if not isinstance(samples, torch.Tensor) or samples.dim() < 1 or len(samples) < 2:
        got = tuple(samples.shape) if isinstance(samples, torch.Tensor) else type(samples).__name__
        raise ValueError(f"samples must be a tensor (n, ...) with n >= 2 rows to resample, got {got}")
    if samples.is_complex() or samples[0].numel() == 0:
        raise ValueError(f"samples must be a real tensor (n, ...) with at least one column, got shape "
                         f"{tuple(samples.shape)}, dtype {samples.dtype}")
    _check_confidence(confidence)
    check_positive_int("num_samples", num_samples)
    seed = check_seed("seed", seed)
    values = samples.detach().double().cpu()
    if not bool(values.isfinite().all()):
        raise ValueError("samples must be finite: a NaN or infinite value would make every interval NaN")
    picks = torch.randint(len(values), (num_samples, len(values)), generator=torch.Generator().manual_seed(seed))
    rows = values.flatten(1) if values.dim() > 1 else values[:, None]  # (n, columns)
    counts = torch.zeros(num_samples, len(values), dtype=torch.float64)
    counts.scatter_add_(1, picks, torch.ones_like(picks, dtype=torch.float64))  # times each row is drawn
    means = counts @ rows / len(values)  # (num_samples, columns): the mean of each resample
    tail = (1 - confidence) / 2
    low, high = torch.quantile(means, torch.tensor([tail, 1 - tail], dtype=torch.float64), dim=0)
    shape = values.shape[1:]
    return MeanInterval(values.mean(dim=0), low.reshape(shape), high.reshape(shape))


def group_references(hypotheses, references, sources) -> tuple[list[str], list[list[str]]]:
    """One hypothesis per distinct source with *all* its references, for multi-reference BLEU.

    ``hypotheses``, ``references`` and ``sources`` (strings) are parallel, one entry per pair, as
    ``translate_split`` gives them; a source's pairs all carry the same hypothesis (it is decoded once).
    """
    for name, value in (("hypotheses", hypotheses), ("references", references), ("sources", sources)):
        _listlike(value, name, "a list of strings, one per pair")
    if not len(hypotheses) == len(references) == len(sources):
        raise ValueError(f"expected as many hypotheses, references and sources, got {len(hypotheses)}, "
                         f"{len(references)} and {len(sources)}")
    grouped: dict[str, tuple[str, list[str]]] = {}
    for hyp, ref, src in zip(hypotheses, references, sources):
        if not isinstance(src, str):
            raise ValueError(f"sources must be strings (the source sentences), got {type(src).__name__} {src!r:.60}")
        grouped.setdefault(src, (hyp, []))[1].append(ref)
    return [hyp for hyp, _ in grouped.values()], [refs for _, refs in grouped.values()]


def _lengths(lengths) -> list[int]:
    """``lengths`` (a list, or a 1-D tensor) as ints >= 0, else ``ValueError``: a NaN or fractional length
    lies in no bucket, and its pair would silently be left out."""
    if isinstance(lengths, torch.Tensor):
        lengths = lengths.tolist()
    _listlike(lengths, "lengths", "a list of lengths in tokens, one per pair")
    checked = []
    for n in lengths:
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
            raise ValueError(f"lengths must be integers >= 0 (lengths in tokens), got {type(n).__name__} {n!r}")
        checked.append(int(n))
    return checked


def bleu_by_length(hypotheses, references, lengths, buckets, num_samples: int | None = None,
                   seed: int = 0) -> list[dict]:
    """Corpus BLEU within each length bucket.

    ``buckets`` is a list of ``(low, high)`` inclusive ranges of ``lengths`` (e.g. source lengths), in
    increasing order, the last one possibly open (``high=None``, labelled ``'17+'``); a loaded corpus's
    are ``data.split.buckets``. Returns one dict per non-empty bucket: ``{'bucket': 'low-high', 'pairs':
    n, 'bleu': ...}``; with ``num_samples``, also ``'low'`` and ``'high'``, the bucket's bootstrap 95 %
    interval (``bootstrap_bleu``): a bucket of a few dozen sentences has a wide one. ``lengths`` are ints >= 0,
    one per hypothesis; a pair whose length lies in no bucket is left out.
    """
    _listlike(hypotheses, "hypotheses", "a list of hypotheses (strings or lists of tokens)")
    _listlike(references, "references", "a list of references (a string, or a list of strings, per hypothesis)")
    lengths = _lengths(lengths)
    seed = check_seed("seed", seed)
    if num_samples is not None:  # checked here, not only when a bucket holds pairs
        check_positive_int("num_samples", num_samples, hint="or None (no interval)")
    if not len(hypotheses) == len(references) == len(lengths):
        raise ValueError(f"expected as many hypotheses, references and lengths, got {len(hypotheses)}, "
                         f"{len(references)} and {len(lengths)}")
    rows = []
    for bucket in check_buckets(buckets):
        keep = [i for i, n in enumerate(lengths) if in_bucket(n, bucket)]
        if keep:
            hyps, refs = [hypotheses[i] for i in keep], [references[i] for i in keep]
            row = {"bucket": bucket_label(bucket), "pairs": len(keep)}
            if num_samples is None:
                rows.append({**row, "bleu": corpus_bleu(hyps, refs)})
            else:
                interval = bootstrap_bleu(hyps, refs, num_samples=num_samples, seed=seed)
                rows.append({**row, "bleu": interval.bleu, "low": interval.low, "high": interval.high})
    return rows


class BleuDifference(NamedTuple):
    """BLEU of system A minus system B (each the mean over its runs), its paired bootstrap interval
    (``low``, ``high``) and ``a_wins``, the share of resamples in which A scored higher."""

    difference: float
    low: float
    high: float
    a_wins: float


def _runs(runs, references, what: str) -> list[list]:
    _listlike(references, "references", "a list of references (a string, or a list of strings, per hypothesis)")
    if isinstance(runs, str) or not runs or not isinstance(runs, Iterable) or any(
            isinstance(run, str) or not hasattr(run, "__len__") for run in runs):
        raise ValueError(f"{what} must be a non-empty list of runs, each a list of hypotheses (one run: [hypotheses])")
    for run in runs:
        if len(run) != len(references):
            raise ValueError(f"every run of {what} needs one hypothesis per reference ({len(references)}), got "
                             f"{len(run)}")
    return [list(run) for run in runs]


def paired_bootstrap_bleu(runs_a, runs_b, references, num_samples: int = 1000, confidence: float = 0.95,
                          seed: int = 0, max_order: int = 4) -> BleuDifference:
    """Paired bootstrap resampling (Koehn, 2004) of two systems on the same test sentences.

    ``runs_a`` and ``runs_b`` are lists of runs (e.g. one per seed), each a list of hypotheses parallel to
    ``references``; a system's BLEU is the mean of its runs' corpus BLEU. Each resample draws the sentences
    with replacement once and scores every run of both systems on them, so the interval of the difference
    reflects which sentences were tested, with the seeds averaged out (their spread is reported apart).
    ``confidence`` in (0, 1), ``seed`` an int; the rest as ``bootstrap_bleu``'s.
    """
    _check_confidence(confidence)
    check_positive_int("num_samples", num_samples)
    seed = check_seed("seed", seed)
    runs_a, runs_b = _runs(runs_a, references, "runs_a"), _runs(runs_b, references, "runs_b")
    stats_a = torch.stack([bleu_statistics(run, references, max_order) for run in runs_a])  # (runs, sentences, k)
    stats_b = torch.stack([bleu_statistics(run, references, max_order) for run in runs_b])
    picks = torch.randint(len(references), (num_samples, len(references)),
                          generator=torch.Generator().manual_seed(seed))

    def mean_bleu(stats, rows=None):  # (runs, sentences, k) -> the mean over runs of BLEU on the rows picked
        sums = stats.sum(dim=1) if rows is None else stats[:, rows].sum(dim=1)  # (runs, k)
        return fmean(bleu_from_statistics(run, max_order) for run in sums)

    differences = torch.tensor([mean_bleu(stats_a, rows) - mean_bleu(stats_b, rows) for rows in picks],
                               dtype=torch.float64)
    tail = (1 - confidence) / 2
    low, high = torch.quantile(differences, torch.tensor([tail, 1 - tail], dtype=torch.float64)).tolist()
    return BleuDifference(mean_bleu(stats_a) - mean_bleu(stats_b), low, high, float((differences > 0).double().mean()))


def paired_bleu_by_length(runs_a, runs_b, references, lengths, buckets, num_samples: int = 1000,
                          seed: int = 0) -> list[dict]:
    """``paired_bootstrap_bleu`` within each length bucket (as ``bleu_by_length`` takes them): one dict per
    non-empty bucket, ``{'bucket', 'pairs', 'difference', 'low', 'high', 'a_wins'}``."""
    lengths = _lengths(lengths)
    _listlike(references, "references", "a list of references (a string, or a list of strings, per hypothesis)")
    if len(lengths) != len(references):
        raise ValueError(f"expected one length per reference ({len(references)}), got {len(lengths)}")
    runs_a, runs_b = _runs(runs_a, references, "runs_a"), _runs(runs_b, references, "runs_b")
    rows = []
    for bucket in check_buckets(buckets):
        keep = [i for i, n in enumerate(lengths) if in_bucket(n, bucket)]
        if keep:
            result = paired_bootstrap_bleu([[run[i] for i in keep] for run in runs_a],
                                           [[run[i] for i in keep] for run in runs_b],
                                           [references[i] for i in keep], num_samples=num_samples, seed=seed)
            rows.append({"bucket": bucket_label(bucket), "pairs": len(keep), **result._asdict()})
    return rows


def _bleu_from_statistics(correct, total, sys_len, ref_len, smooth) -> float:
    brevity = 1.0
    if sys_len < ref_len:
        brevity = math.exp(1 - ref_len / sys_len) if sys_len > 0 else 0.0
    if not any(correct):
        return 0.0
    precisions = [0.0] * len(correct)
    halvings = 1.0
    for n, (c, t) in enumerate(zip(correct, total)):
        if t == 0:
            break  # no n-grams of this order or higher: their precision stays 0, so BLEU is 0
        if c == 0:
            if smooth == "exp":
                halvings *= 2
                precisions[n] = 100.0 / (halvings * t)
        else:
            precisions[n] = 100.0 * c / t
    log_mean = sum(math.log(p) if p > 0 else _LOG_ZERO for p in precisions) / len(precisions)
    return brevity * math.exp(log_mean)


def bleu(pred_seq: str, label_seq: str, k: int) -> float:
    """d2l's sentence BLEU (0–1): exp(min(0, 1 − len_label/len_pred)) · ∏_{n≤k} p_n^(1/2^n).

    ``pred_seq`` and ``label_seq`` are strings; tokens are split on single spaces, as d2l does; p_n is the
    clipped n-gram precision. Orders longer than the prediction are skipped.
    """
    check_positive_int("k", k, hint="(the longest n-gram order)")
    for name, value in (("pred_seq", pred_seq), ("label_seq", label_seq)):
        if not isinstance(value, str):
            raise ValueError(f"{name} must be a string (tokens separated by spaces), got {type(value).__name__}")
    pred_tokens, label_tokens = pred_seq.split(" "), label_seq.split(" ")
    len_pred, len_label = len(pred_tokens), len(label_tokens)
    score = math.exp(min(0.0, 1 - len_label / len_pred))
    for n in range(1, min(k, len_pred) + 1):
        pred_ngrams = collections.Counter(tuple(pred_tokens[i:i + n]) for i in range(len_pred - n + 1))
        label_ngrams = collections.Counter(tuple(label_tokens[i:i + n]) for i in range(len_label - n + 1))
        matches = sum(min(count, label_ngrams[g]) for g, count in pred_ngrams.items())
        score *= math.pow(matches / (len_pred - n + 1), math.pow(0.5, n))
    return score


# ----------------------------------------------------------------------------------------------
# Alignment error rate (Och & Ney 2003)
# ----------------------------------------------------------------------------------------------

def alignment_error_rate(predicted: Iterable, sure: Iterable, possible: Iterable | None = None) -> float:
    """AER = 1 − (|A∩S| + |A∩P|) / (|A| + |S|) for links ``(source_index, target_index)``.

    ``predicted`` is A, ``sure`` is S and ``possible`` P (S is always counted as possible; with no
    ``possible``, P = S and AER = 1 − 2|A∩S|/(|A|+|S|), one minus the F1 of A against S). Each is a
    collection of pairs of ints; with no link at all the AER is undefined (``ValueError``).
    """
    return _aer_from_counts(*_aer_counts(_links(predicted, "predicted"), _links(sure, "sure"),
                                         set() if possible is None else _links(possible, "possible")))


def _links(links, name: str) -> set:
    """``links`` as a set of ``(int, int)`` pairs, else ``ValueError`` naming ``name`` (a string would be a set
    of characters, and a link ``[0, 1]`` is unhashable)."""
    if isinstance(links, (str, bytes)) or not isinstance(links, Iterable):
        raise ValueError(f"{name} must be a collection of (source_index, target_index) links, got "
                         f"{type(links).__name__} {links!r:.60}")
    found = set()
    for link in links:
        try:
            i, j = link
            found.add((_index(i, name), _index(j, name)))
        except (TypeError, ValueError):
            raise ValueError(f"{name} must hold (source_index, target_index) pairs of ints, got {link!r}") from None
    return found


def _aer_counts(a: set, s: set, p: set) -> tuple[int, int, int, int]:
    p = p | s
    return len(a & s), len(a & p), len(a), len(s)


def _aer_from_counts(a_s: int, a_p: int, a: int, s: int) -> float:
    if a + s == 0:
        raise ValueError("AER is undefined with no predicted and no gold links (expected at least one link)")
    return 1.0 - (a_s + a_p) / (a + s)


def attention_alignment(weights, src_len: int | None = None, targets: Iterable[int] | None = None) -> set:
    """Hard alignment from attention weights ``(target_steps, source_steps)``: each target position
    links to the source position it weighs most (the argmax of its row).

    ``targets`` picks the target positions to align (default: every row). A row whose argmax is
    at or past ``src_len`` (``<eos>`` or padding) gets no link: attending to the end of the source
    is treated as aligning to nothing. ``weights``: real and finite, with at least one source step (a tensor,
    an array or nested lists); ``src_len`` an int or None; ``targets`` ints.
    """
    try:
        weights = torch.as_tensor(weights)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"attention weights must be a (target_steps, source_steps) tensor, got "
                         f"{type(weights).__name__} {weights!r:.60}") from None
    if weights.dim() != 2:
        raise ValueError(f"attention weights must be (target_steps, source_steps), got shape {tuple(weights.shape)}")
    if weights.is_complex() or weights.dtype == torch.bool or weights.shape[1] == 0:
        raise ValueError(f"attention weights must be real numbers over at least one source step, got shape "
                         f"{tuple(weights.shape)}, dtype {weights.dtype}")
    if weights.is_floating_point() and not bool(weights.isfinite().all()):  # argmax would pick a NaN
        raise ValueError("attention weights must be finite, got NaN or infinite values")
    rows = range(weights.shape[0]) if targets is None else sorted({_index(j, "targets") for j in targets})
    best = weights.argmax(dim=-1).tolist()  # (target_steps,)
    src_len = weights.shape[1] if src_len is None else _index(src_len, "src_len")
    links = set()
    for j in rows:
        if not 0 <= j < weights.shape[0]:
            raise ValueError(f"target position {j} is outside the attention weights' {weights.shape[0]} rows")
        if best[j] < src_len:
            links.add((best[j], j))
    return links


def attention_aer(attention, sure, possible=None, src_valid_lens=None) -> float:
    """Corpus AER of attention weights against gold links, counts summed over sentences.

    ``attention`` is one ``(target_steps, source_steps)`` matrix with ``sure`` (and ``possible``)
    one set of ``(source_index, target_index)`` links, or a sequence/3-D tensor of matrices with
    one link set per sentence (a list is always read as one matrix per sentence).

    Each target position that has a gold link (sure or possible) is aligned by
    :func:`attention_alignment`: the argmax of its row, no link when that is at or past
    ``src_valid_lens`` (``<eos>``, padding). Target positions with no gold link (``<eos>``, padding,
    words with no counterpart such as the "-" of an ISO date) are not scored, since attention
    must put its weight somewhere. ``possible`` and ``src_valid_lens`` (ints), when given, have one
    entry per matrix too.
    """
    if getattr(attention, "ndim", None) == 2:  # one matrix (a tensor or an array)
        attention, sure = [attention], [sure]
        possible = None if possible is None else [possible]
        src_valid_lens = None if src_valid_lens is None else [src_valid_lens]
    _listlike(attention, "attention", "a (target_steps, source_steps) matrix or a list of them")
    _listlike(sure, "sure", "one collection of (source_index, target_index) links per attention matrix")
    if len(attention) != len(sure):
        raise ValueError(f"expected one set of gold links per attention matrix: got {len(attention)} matrices "
                         f"and {len(sure)} link sets")
    for name, value in (("possible", possible), ("src_valid_lens", src_valid_lens)):
        if value is not None and len(_listlike(value, name, "one entry per attention matrix")) != len(attention):
            raise ValueError(f"expected one entry of {name} per attention matrix: got {len(attention)} matrices "
                             f"and {len(value)} entries")
    totals = [0, 0, 0, 0]
    for k, weights in enumerate(attention):
        s = _links(sure[k], f"sure (sentence {k})")
        p = _links(possible[k], f"possible (sentence {k})") if possible is not None else set()
        targets = {j for _, j in s | p}
        src_len = None if src_valid_lens is None else _index(src_valid_lens[k], "src_valid_lens")
        a = attention_alignment(weights, src_len, targets)
        totals = [t + c for t, c in zip(totals, _aer_counts(a, s, p))]
    return _aer_from_counts(*totals)


# ----------------------------------------------------------------------------------------------
# Classification (chapter 7)
# ----------------------------------------------------------------------------------------------

def _as_labels(values, name: str) -> list[str]:
    if isinstance(values, torch.Tensor):
        if values.dim() > 1:
            raise ValueError(f"{name} must be a 1-D tensor of label indices, got shape {tuple(values.shape)}")
        values = values.detach().cpu().reshape(-1).tolist()
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ValueError(f"{name} must be a list or 1-D tensor of labels, got {type(values).__name__} {values!r:.60}")
    values = list(values)
    out = []
    for v in values:
        if isinstance(v, str):
            if v not in LABELS:
                raise ValueError(f"{name}: expected labels from LABELS, got {v!r}")
            out.append(v)
        else:
            if not is_finite_number(v) or v != int(v):  # 2.7 is no label index (int() would make it 2)
                raise ValueError(f"{name}: expected label indices (integers) or label strings, got {v!r}")
            if not 0 <= int(v) < len(LABELS):
                raise ValueError(f"{name}: expected label indices in [0, {len(LABELS)}), got {v}")
            out.append(LABELS[int(v)])
    return out


def semeval_macro_f1(predictions, targets) -> float:
    """SemEval-2010 Task 8's official score: macro-averaged F1 over the relation types, Other excluded,
    direction taken into account ("(9+1)-way with directionality").

    ``predictions`` and ``targets`` are label indices (into ``LABELS``) or label strings. For each
    relation type T present in ``targets``: ``P = correct / predicted``, ``R = correct / actual``,
    where *correct* counts predictions equal to the target label (type AND direction), *predicted*
    every prediction of type T (in either direction), *actual* every target of type T; F1 = 2PR/(P+R)
    (0 when P + R = 0). The score is the mean F1 over those types, a number in [0, 1]; a prediction
    with the right type but the wrong direction is wrong. ``Other`` targets only count through the
    predictions they draw (a relation predicted for an ``Other`` sentence lowers that relation's P).
    """
    predicted, actual = _as_labels(predictions, "predictions"), _as_labels(targets, "targets")
    if len(predicted) != len(actual):
        raise ValueError(f"expected as many predictions as targets, got {len(predicted)} and {len(actual)}")
    if not actual:
        raise ValueError("targets is empty: the macro-F1 needs at least one example, got 0")
    kinds = sorted({relation_type(t) for t in actual} - {"Other"})
    if not kinds:
        raise ValueError("the macro-F1 excludes Other, but every target is Other: nothing to score")
    scores = []
    for kind in kinds:
        correct = sum(p == t and relation_type(t) == kind for p, t in zip(predicted, actual))
        proposed = sum(relation_type(p) == kind for p in predicted)
        gold = sum(relation_type(t) == kind for t in actual)
        precision = correct / proposed if proposed else 0.0
        recall = correct / gold
        scores.append(0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall))
    return sum(scores) / len(scores)


def evidence_hit_rate(weights: torch.Tensor, evidence: torch.Tensor) -> float:
    """How often the most-weighted position is the position that carries the evidence.

    ``weights`` ``(n, positions)`` (attention over regions, tokens or sentences; padding should
    already carry weight 0), ``evidence`` ``(n,)`` the index of the position that decides the
    label. Ties go to the first maximum, as ``argmax`` does. ``weights`` is a finite floating-point
    tensor, ``evidence`` an integer one.
    """
    if not isinstance(weights, torch.Tensor) or not isinstance(evidence, torch.Tensor) \
            or not weights.is_floating_point() or evidence.is_floating_point() or evidence.is_complex() \
            or evidence.dtype == torch.bool:
        raise ValueError(f"expected floating-point weights (n, positions) and integer evidence (n,), got "
                         f"{getattr(weights, 'dtype', type(weights).__name__)} and "
                         f"{getattr(evidence, 'dtype', type(evidence).__name__)}")
    if weights.dim() != 2 or evidence.shape != weights.shape[:1]:
        raise ValueError(f"expected weights (n, positions) and evidence (n,), got "
                         f"{tuple(weights.shape)} and {tuple(evidence.shape)}")
    if weights.shape[0] == 0:  # the mean of no hits would be NaN
        raise ValueError("weights and evidence are empty: the hit rate needs at least one example, got 0")
    if bool(((evidence < 0) | (evidence >= weights.shape[1])).any()):
        raise ValueError(f"evidence indices must lie in [0, {weights.shape[1]}), got "
                         f"{int(evidence.min())}..{int(evidence.max())}")
    if not bool(weights.isfinite().all()):  # argmax would pick a NaN
        raise ValueError("weights must be finite, got NaN or infinite values")
    return float((weights.argmax(-1).cpu() == evidence.cpu()).float().mean())


def steps_to_reach(history: History, level: float, name: str = "val_accuracy") -> int | None:
    """The first evaluated step at which ``name`` reached ``level`` (``None`` if it never did): ``history`` a
    ``History``, ``level`` a number (not NaN, which nothing reaches)."""
    if not hasattr(history, "curve"):
        raise ValueError(f"history must be the History that fit or a trainer returned, got {type(history).__name__}")
    if isinstance(level, bool) or not isinstance(level, numbers.Real) or math.isnan(level):
        raise ValueError(f"level must be a number (not NaN), got {level!r}")
    steps, values = history.curve(name)
    return next((step for step, value in zip(steps, values) if value >= level), None)


def halfway_step(steps: Sequence[int], values: Sequence[float]) -> int:
    """The first of ``steps`` at which a curve has covered half its way from its first value to its last:
    ``values[i] >= (first + last) / 2`` for a rising curve, ``<=`` for a falling one (when a change
    happened in a short stretch, which a phase change is, this step dates it). ``values`` are finite numbers."""
    values = [_real(v, i) for i, v in enumerate(values)]
    if len(steps) != len(values) or not values:
        raise ValueError(f"need one value per step and at least one, got {len(steps)} steps, {len(values)} values")
    if not all(math.isfinite(v) for v in values):  # a NaN is on neither side of the middle: no step would be found
        raise ValueError(f"values must be finite, got {values}")
    middle, rising = (values[0] + values[-1]) / 2, values[-1] >= values[0]
    return next(step for step, value in zip(steps, values) if (value >= middle if rising else value <= middle))


# ----------------------------------------------------------------------------------------------
# Several seeds
# ----------------------------------------------------------------------------------------------

def _real(value, index: int) -> float:
    """``value`` as a float if it is a real number (a Python or NumPy one, or a tensor or array of one element;
    not a bool, a string or a complex number), else ``ValueError`` naming its index."""
    if isinstance(value, torch.Tensor):
        if value.numel() == 1 and not (value.is_complex() or value.dtype == torch.bool):
            return float(value)
    elif hasattr(value, "dtype") and hasattr(value, "size"):  # a NumPy array or scalar
        if value.size == 1 and value.dtype.kind in "iuf":
            return float(value)
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    raise ValueError(f"values must be real numbers, got {type(value).__name__} {value!r:.40} at index {index}")


class Spread(NamedTuple):
    """The mean, smallest and largest of a few numbers (one per seed). ``f"{s:.3f}"`` writes
    ``0.873 (0.861–0.889)``: the mean, then the range."""

    mean: float
    min: float
    max: float

    def __format__(self, spec: str) -> str:
        return f"{format(self.mean, spec)} ({format(self.min, spec)}–{format(self.max, spec)})"


def spread(values: Sequence[float]) -> Spread:
    """``Spread(mean, min, max)`` of ``values`` (e.g. one test accuracy per seed): a list (or 1-D tensor or
    array) of real numbers, finite, at least one; not bools or strings."""
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
        raise ValueError(f"values must be a list of numbers (one per seed), got {type(values).__name__} {values!r:.60}")
    values = [_real(v, i) for i, v in enumerate(values)]
    if not values:
        raise ValueError("spread needs at least one value, got none")
    bad = next((i for i, v in enumerate(values) if not math.isfinite(v)), None)
    if bad is not None:  # a NaN would make the mean and the range NaN (or the range silently skip it)
        raise ValueError(f"spread needs finite values, got {values[bad]} at index {bad} of {values}: "
                         f"did that run diverge?")
    return Spread(fmean(values), min(values), max(values))
