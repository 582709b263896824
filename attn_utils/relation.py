"""Relation classification with an attention-based bidirectional LSTM (Zhou et al., 2016).

The task is SemEval-2010 Task 8's: given a sentence with two marked nominals,
``the <e1> burst </e1> was caused by the <e2> pressure </e2> .``, name the relation between them
and its direction, one of 9 relation types times 2 directions plus ``Other`` (19 labels).

This module holds everything the chapter needs around the model:

- ``make_relation_corpus``: a generated corpus in that format whose relation is carried by one
  known cue word between the entities (its index is the example's ``evidence``), with entity nouns
  that say nothing about the relation and, in half of the sentences, a distracting clause (before
  the entities, as an aside between them, or after them) that states a relation of another type
  between unmarked nouns; so "does attention find the cue?" can be measured;
- ``load_semeval`` / ``load_semeval_splits``: a reader for the real task's files, which returns
  the same examples (without evidence: the real data has no cue annotation);
- ``relation_vocab`` and ``relation_tensors``: token ids, padding and lengths;
- ``AttentionBiLSTM``: embeddings, a BiLSTM whose two directions are summed, Zhou et al.'s
  attention pooling (``attn_utils.pooling.AttentivePooling``), ``tanh``, dropout and a softmax
  classifier; ``pooling="mean"`` or ``"last"`` replaces the attention for comparison;
- ``semeval_macro_f1``: the task's official score.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import torch
from torch import nn

from .data.vocab import PAD, Vocab
from .packed import run_packed
from .pooling import AttentivePooling

RELATION_TYPES = (
    "Cause-Effect", "Component-Whole", "Content-Container", "Entity-Destination", "Entity-Origin",
    "Instrument-Agency", "Member-Collection", "Message-Topic", "Product-Producer",
)
# The 19 labels: label 2k is type k with e1 first in the relation, 2k + 1 the reverse, 18 is Other.
LABELS = tuple(f"{kind}({order})" for kind in RELATION_TYPES for order in ("e1,e2", "e2,e1")) + ("Other",)
ENTITY_MARKERS = ("<e1>", "</e1>", "<e2>", "</e2>")
SEMEVAL_ENV_VAR = "ATTN_UTILS_SEMEVAL"
SEMEVAL_FILES = {"train": "TRAIN_FILE.TXT", "test": "TEST_FILE_FULL.TXT"}


@dataclass(frozen=True)
class RelationExample:
    """One sentence: tokens with the four entity markers as tokens, its label (one of ``LABELS``),
    the index of the token that decides the label (``evidence``, -1 when unknown) and the indices of
    the cue words of distracting clauses, which state other relations between unmarked nouns
    (``distractors``, empty when there are none); ``cue_span`` = (start, stop) is the whole cue
    phrase around the evidence, e.g. "was made by" ((-1, -1) when unknown)."""

    tokens: tuple[str, ...]
    label: str
    evidence: int = -1
    distractors: tuple[int, ...] = ()
    cue_span: tuple[int, int] = (-1, -1)


def relation_type(label: str) -> str:
    """``"Cause-Effect(e2,e1)"`` -> ``"Cause-Effect"``; ``"Other"`` stays ``"Other"``."""
    if label not in LABELS:
        raise ValueError(f"expected one of the 19 SemEval labels, e.g. {LABELS[0]!r} or 'Other', got {label!r}")
    return label.split("(")[0]


# ---------------------------------------------------------------------------------------------
# The generated corpus
# ---------------------------------------------------------------------------------------------

# Cue phrases per label; the word after "*" is the evidence. e1 is always the first entity, as in
# SemEval, so the direction is told by the phrase: "the <e1> letter </e1> described the <e2> bridge
# </e2>" is Message-Topic(e1,e2), "the <e1> bridge </e1> was described in the <e2> letter </e2>"
# Message-Topic(e2,e1). Some cue words serve both directions ("described", "made", "caused", ...):
# for those the words around them (the passive "was ... by/in/from") decide the direction, as in
# real text. The other words of the phrases ("was", "by", "of", ...) occur in many labels' phrases.
CUES: dict[str, tuple[str, ...]] = {
    "Cause-Effect(e1,e2)": ("*caused", "has *triggered", "*sparked", "*provoked"),
    "Cause-Effect(e2,e1)": ("was *caused by", "was *triggered by", "*resulted from", "*stemmed from",
                            "*arose from", "is a *consequence of"),
    "Component-Whole(e1,e2)": ("is *part of", "is a *piece of", "is a *component of", "was *attached to",
                               "was *included in"),
    "Component-Whole(e2,e1)": ("*has", "*features", "*comprises", "*includes"),
    "Content-Container(e1,e2)": ("was *inside", "was *within", "was *stored in", "was *held in",
                                 "was *contained in"),
    "Content-Container(e2,e1)": ("*held", "*contained", "*enclosed", "has *housed"),
    "Entity-Destination(e1,e2)": ("*entered", "was *delivered to", "*migrated to", "was *absorbed into"),
    "Entity-Destination(e2,e1)": ("*received", "*admitted", "*absorbed", "*accepted"),
    "Entity-Origin(e1,e2)": ("*came from", "*emerged from", "was *released from", "was *extracted from"),
    "Entity-Origin(e2,e1)": ("*released", "*emitted", "*exported", "is the *source of"),
    "Instrument-Agency(e1,e2)": ("was *used by", "was *operated by", "was *wielded by", "was *handled by"),
    "Instrument-Agency(e2,e1)": ("*used", "*operated", "*employed", "*grabbed", "*steered", "*swung"),
    "Member-Collection(e1,e2)": ("*joined", "*belonged to", "is a *member of", "was *recruited into"),
    "Member-Collection(e2,e1)": ("*recruited", "*gathered", "*assembled", "*united"),
    "Message-Topic(e1,e2)": ("is *about", "*describes", "*described", "*discussed", "*explains"),
    "Message-Topic(e2,e1)": ("was *described in", "was *discussed in", "was *explained in", "was *mentioned in"),
    "Product-Producer(e1,e2)": ("was *made by", "was *built by", "was *crafted by", "was *manufactured by"),
    "Product-Producer(e2,e1)": ("*made", "*built", "*makes", "*manufactures"),
    "Other": ("was *near", "was *beside", "was *behind", "*and", "*resembled", "was *unlike"),
}

# Rarer cue phrases, one sentence in twenty (``rare_prob``): in a corpus of a few thousand sentences
# some of their cue words occur a handful of times or never, as most words do in real text.
RARE_CUES: dict[str, tuple[str, ...]] = {
    "Cause-Effect(e1,e2)": ("*unleashed", "*induced"),
    "Cause-Effect(e2,e1)": ("*followed from", "was *prompted by"),
    "Component-Whole(e1,e2)": ("is a *segment of", "is a *fragment of"),
    "Component-Whole(e2,e1)": ("*incorporates", "*boasts"),
    "Content-Container(e1,e2)": ("was *sealed in", "was *kept in"),
    "Content-Container(e2,e1)": ("*sheltered", "*concealed"),
    "Entity-Destination(e1,e2)": ("was *dispatched to", "*drifted into"),
    "Entity-Destination(e2,e1)": ("*welcomed", "*swallowed"),
    "Entity-Origin(e1,e2)": ("was *derived from", "*fled from"),
    "Entity-Origin(e2,e1)": ("*exhaled", "*yielded"),
    "Instrument-Agency(e1,e2)": ("was *brandished by", "was *driven by"),
    "Instrument-Agency(e2,e1)": ("*brandished", "*drove"),
    "Member-Collection(e1,e2)": ("*enrolled in", "is a *delegate of"),
    "Member-Collection(e2,e1)": ("*enlisted", "*drafted"),
    "Message-Topic(e1,e2)": ("*summarizes", "*concerns"),
    "Message-Topic(e2,e1)": ("was *summarized in", "was *analysed in"),
    "Product-Producer(e1,e2)": ("was *forged by", "was *printed by"),
    "Product-Producer(e2,e1)": ("*forged", "*printed"),
    "Other": ("was *opposite", "*outlasted"),
}

# One pool of entity nouns for every label, so that an entity says nothing about the relation.
NOUNS = (
    "pump", "valve", "engine", "tablet", "letter", "report", "storm", "flood", "crowd", "committee",
    "farmer", "factory", "bakery", "bottle", "basket", "drawer", "cabinet", "truck", "harbour", "village",
    "river", "orchard", "violin", "hammer", "ladder", "lantern", "journal", "lecture", "poem", "film",
    "painting", "bridge", "tunnel", "garden", "kettle", "battery", "cable", "sensor", "wheel", "blade",
    "robot", "pilot", "surgeon", "teacher", "student", "choir", "orchestra", "library", "museum", "archive",
    "satellite", "comet", "glacier", "volcano", "fever", "virus", "spark", "engineer", "tractor", "parcel",
    "envelope", "signal", "pigment", "council",
)
ADJECTIVES = ("old", "new", "small", "large", "red", "heavy", "broken", "quiet", "famous", "local",
              "wooden", "metal", "tiny", "ancient", "modern", "bright", "damp", "spare", "main", "second")
DETERMINERS = ("the", "this", "that", "one", "each")
ADVERBS = ("reportedly", "apparently", "probably", "clearly", "certainly", "suddenly", "quietly",
           "eventually", "once", "already")
OPENERS = (("yesterday",), ("last", "week"), ("in", "the", "morning"), ("according", "to", "the", "log"),
           ("at", "first", "glance"), ("as", "expected"), ("in", "practice"), ("on", "monday"))
CLOSERS = (("last", "year"), ("at", "night"), ("in", "the", "end"), ("after", "the", "inspection"),
           ("during", "the", "winter"), ("without", "warning"), ("again",), ("for", "years"))
CONJUNCTIONS = ("while", "after", "although", "because", "when")


def _parse_cue(phrase: str) -> tuple[list[str], int]:
    """``"was *made by"`` -> (["was", "made", "by"], 1): the words and the position of the evidence."""
    words = phrase.split()
    starred = [i for i, w in enumerate(words) if w.startswith("*")]
    assert len(starred) == 1, phrase
    words[starred[0]] = words[starred[0]][1:]
    return words, starred[0]


def cue_words(rare: bool = True) -> dict[str, tuple[str, ...]]:
    """Every cue word (evidence) of the generated corpus and the labels whose phrases use it
    (``rare=False``: those of ``CUES`` only, without ``RARE_CUES``)."""
    found: dict[str, list[str]] = {}
    for label in LABELS:
        for phrase in CUES[label] + (RARE_CUES[label] if rare else ()):
            words, k = _parse_cue(phrase)
            found.setdefault(words[k], []).append(label)
    return {word: tuple(dict.fromkeys(labels)) for word, labels in found.items()}


def _noun_phrase(rng: random.Random, noun: str, marker: str | None) -> list[str]:
    words = [rng.choice(DETERMINERS)]
    if rng.random() < 0.4:
        words.append(rng.choice(ADJECTIVES))
    return words + ([f"<{marker}>", noun, f"</{marker}>"] if marker else [noun])


def _distractor_clause(rng: random.Random, true_label: str, relative: bool = False) -> tuple[list[str], int]:
    """A clause stating a relation of ANOTHER type than ``true_label`` between unmarked nouns, and the
    index of its cue word: ``while the letter was made by the crew`` (or ``which was made by the crew``)."""
    kinds = [label for label in LABELS[:-1] if relation_type(label) != relation_type(true_label)]
    words, k = _parse_cue(rng.choice(CUES[rng.choice(kinds)]))
    clause = ["which"] if relative else [rng.choice(CONJUNCTIONS)] + _noun_phrase(rng, rng.choice(NOUNS), None)
    cue_at = len(clause) + k
    return clause + words + _noun_phrase(rng, rng.choice(NOUNS), None), cue_at


SLOTS = ("before", "aside", "after")


def make_relation_example(rng: random.Random, label: str, slots: Sequence[str] = (), filler: int = 0,
                          rare_prob: float = 0.05) -> RelationExample:
    """One generated sentence with the given label and a distracting clause in each of ``slots``
    (``"before"`` the first entity, an ``"aside"`` right after it, ``"after"`` the second entity),
    and ``filler`` extra neutral phrases at each end ("yesterday , ... , at night"); the cue phrase
    comes from ``RARE_CUES[label]`` with probability ``rare_prob``, else from ``CUES[label]``; see
    ``make_relation_corpus``."""
    if label not in LABELS or any(slot not in SLOTS for slot in slots) or filler < 0:
        raise ValueError(f"expected a label from LABELS, slots from {SLOTS} and filler >= 0, got {label!r}, "
                         f"{tuple(slots)} and {filler}")
    first, second = rng.sample(NOUNS, 2)
    tokens: list[str] = []
    for _ in range(filler):
        tokens += list(rng.choice(OPENERS)) + [","]
    distractors = []
    if "before" in slots:
        clause, cue_at = _distractor_clause(rng, label)
        distractors.append(len(tokens) + cue_at)
        tokens += clause + [","]
    elif rng.random() < 0.3:
        tokens += list(rng.choice(OPENERS)) + [","]
    tokens += _noun_phrase(rng, first, "e1")
    if "aside" in slots:  # a relative clause between the entities: ", which was made by the crew ,"
        clause, cue_at = _distractor_clause(rng, label, relative=True)
        distractors.append(len(tokens) + 1 + cue_at)
        tokens += [","] + clause + [","]
    elif rng.random() < 0.2:  # a harmless aside
        looked = rng.random() < 0.5  # (drawn before the adjective: the order of draws fixes the corpus)
        adjective = rng.choice(ADJECTIVES)
        tokens += [",", "which", "looked", adjective, ","] if looked else [",", "now", adjective, ","]
    if rng.random() < 0.3:
        tokens.append(rng.choice(ADVERBS))
    words, k = _parse_cue(rng.choice(RARE_CUES[label] if rng.random() < rare_prob else CUES[label]))
    evidence, cue_span = len(tokens) + k, (len(tokens), len(tokens) + len(words))
    tokens += words + _noun_phrase(rng, second, "e2")
    if "after" in slots:
        clause, cue_at = _distractor_clause(rng, label)
        distractors.append(len(tokens) + 1 + cue_at)
        tokens += [","] + clause
    elif rng.random() < 0.3:
        tokens += list(rng.choice(CLOSERS))
    for _ in range(filler):
        tokens += [","] + list(rng.choice(CLOSERS))
    tokens.append(".")
    return RelationExample(tuple(tokens), label, evidence, tuple(distractors), cue_span)


@dataclass
class RelationCorpus:
    """Train, validation and test examples; no sentence occurs in two splits."""

    train: list[RelationExample]
    val: list[RelationExample]
    test: list[RelationExample]


def make_relation_corpus(num_train: int = 3000, num_val: int = 500, num_test: int = 1000, seed: int = 0,
                         distractor_prob: float = 0.5, distractors: int = 1, filler: int = 0,
                         rare_prob: float = 0.05) -> RelationCorpus:
    """Generate SemEval-style sentences whose label is decided by one known cue word.

    Labels are drawn uniformly from the 19 of ``LABELS``. A sentence is
    ``[clause or opener ,] det [adj] <e1> noun </e1> [, aside ,] [adverb] CUE-PHRASE det [adj]
    <e2> noun </e2> [, clause | closer] .``; the cue phrase comes from ``CUES[label]`` or, with
    probability ``rare_prob``, from the rarer ``RARE_CUES[label]``; both nouns come from one shared
    pool. With probability ``distractor_prob`` a sentence gets ``distractors``
    (1 to 3) clauses, in distinct places (before the first entity, as an aside right after it,
    after the second), each stating a relation of another type between two unmarked nouns
    ("while the letter was made by the crew", "which was made by the crew"): a model that counts
    words sees several cues, and only the one of the main clause between the entities counts.
    ``filler`` > 0 adds that many neutral phrases at each end (longer sentences, same task).
    The same ``seed`` always gives the same corpus.
    """
    if min(num_train, num_val, num_test) < 0 or num_train + num_val + num_test == 0:
        raise ValueError(f"split sizes must be non-negative and not all 0, got {num_train}, {num_val}, {num_test}")
    if not 0.0 <= distractor_prob <= 1.0:
        raise ValueError(f"distractor_prob must lie in [0, 1], got {distractor_prob}")
    if not 0.0 <= rare_prob <= 1.0:
        raise ValueError(f"rare_prob must lie in [0, 1], got {rare_prob}")
    if distractors not in (1, 2, 3):
        raise ValueError(f"distractors must be 1, 2 or 3 (one per place), got {distractors}")
    rng = random.Random(seed)
    total = num_train + num_val + num_test
    seen: set[tuple[str, ...]] = set()
    examples: list[RelationExample] = []
    while len(examples) < total:
        label = rng.choice(LABELS)
        slots = rng.sample(SLOTS, distractors) if rng.random() < distractor_prob else ()
        example = make_relation_example(rng, label, slots, filler, rare_prob)
        if example.tokens not in seen:  # each sentence once, so the test set is new to the model
            seen.add(example.tokens)
            examples.append(example)
    return RelationCorpus(examples[:num_train], examples[num_train:num_train + num_val], examples[num_train + num_val:])


# ---------------------------------------------------------------------------------------------
# The SemEval-2010 Task 8 files
# ---------------------------------------------------------------------------------------------

_SENTENCE_LINE = re.compile(r'^(\d+)\t"(.*)"\s*$')
_TOKEN = re.compile(r"</?e[12]>|[^\W_]+(?:['’.\-][^\W_]+)*|\S")


def tokenize_marked(sentence: str, lowercase: bool = True) -> list[str]:
    """Split a sentence with ``<e1>...</e1>`` and ``<e2>...</e2>`` into tokens, markers as tokens of their own."""
    spaced = re.sub(r"(</?e[12]>)", r" \1 ", sentence)
    tokens = _TOKEN.findall(spaced)
    return [t if t in ENTITY_MARKERS or not lowercase else t.lower() for t in tokens]


def check_markers(tokens: Sequence[str]) -> None:
    """Raise ValueError unless each marker occurs once, in the order ``<e1> ... </e1> ... <e2> ... </e2>``,
    with at least one word inside each entity."""
    counts = {m: list(tokens).count(m) for m in ENTITY_MARKERS}
    if any(c != 1 for c in counts.values()):
        raise ValueError(f"expected each entity marker once, got counts {counts}")
    a, b, c, d = (list(tokens).index(m) for m in ENTITY_MARKERS)
    if not (a + 1 < b < c and c + 1 < d):
        raise ValueError(f"expected '<e1> words </e1> ... <e2> words </e2>', "
                         f"got markers at positions {a}, {b}, {c}, {d}")


def load_semeval(path: str | os.PathLike, lowercase: bool = True) -> list[RelationExample]:
    """Read one SemEval-2010 Task 8 file (``TRAIN_FILE.TXT`` or ``TEST_FILE_FULL.TXT``).

    Each example is a block of lines: ``<id>\\t"<sentence with <e1>..</e1> and <e2>..</e2>>"``, the
    label (``Cause-Effect(e2,e1)``, ..., ``Other``), an optional ``Comment:`` line, and a blank line.
    The examples have ``evidence = -1``: the data does not say which word carries the relation.
    A missing file raises FileNotFoundError, a malformed one ValueError, each naming the path (and line).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no SemEval-2010 Task 8 file at {path} (expected {SEMEVAL_FILES['train']} "
                                f"or {SEMEVAL_FILES['test']} from the task's distribution)")
    lines = path.read_text(encoding="utf-8-sig").splitlines()
    examples: list[RelationExample] = []
    i = 0

    def fail(n: int, expected: str) -> None:
        got = repr(lines[n]) if n < len(lines) else "the end of the file"
        raise ValueError(f"{path}, line {n + 1}: expected {expected}, got {got}")

    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        match = _SENTENCE_LINE.match(lines[i])
        if not match:
            fail(i, 'a sentence line \'<id>\\t"<sentence>"\'')
        tokens = tokenize_marked(match.group(2), lowercase)
        try:
            check_markers(tokens)
        except ValueError as error:
            raise ValueError(f"{path}, line {i + 1}: {error}") from None
        if i + 1 >= len(lines) or lines[i + 1].strip() not in LABELS:
            fail(i + 1, "a label such as 'Cause-Effect(e1,e2)' or 'Other'")
        examples.append(RelationExample(tuple(tokens), lines[i + 1].strip()))
        i += 2
        if i < len(lines) and lines[i].startswith("Comment"):
            i += 1
        if i < len(lines) and lines[i].strip():
            fail(i, "a blank line after the label (and comment)")
    if not examples:
        raise ValueError(f"{path}: no examples found; is this a SemEval-2010 Task 8 file?")
    return examples


def load_semeval_splits(folder: str | os.PathLike | None = None, lowercase: bool = True):
    """``(train, test)`` examples from the folder holding ``TRAIN_FILE.TXT`` and ``TEST_FILE_FULL.TXT``.

    ``folder`` defaults to the environment variable ``ATTN_UTILS_SEMEVAL``. The task's data is not
    bundled with the course (it is distributed separately); without it this raises FileNotFoundError.
    """
    folder = folder if folder is not None else os.environ.get(SEMEVAL_ENV_VAR)
    if not folder:
        raise FileNotFoundError(f"no SemEval-2010 Task 8 folder given: pass folder= or set {SEMEVAL_ENV_VAR}")
    folder = Path(folder)
    return tuple(load_semeval(folder / SEMEVAL_FILES[split], lowercase) for split in ("train", "test"))


# ---------------------------------------------------------------------------------------------
# Tensors
# ---------------------------------------------------------------------------------------------

class RelationTensors(NamedTuple):
    """``tokens`` (n, steps) padded with ``<pad>``, ``lengths`` (n,), ``labels`` (n,) indices into
    ``LABELS``, ``evidence`` (n,) cue positions (-1 when unknown)."""

    tokens: torch.Tensor
    lengths: torch.Tensor
    labels: torch.Tensor
    evidence: torch.Tensor


def relation_vocab(examples: Sequence[RelationExample], min_freq: int = 1) -> Vocab:
    """The vocabulary of the examples' tokens, ``<pad>`` = 0 and ``<unk>`` = 1."""
    return Vocab([list(e.tokens) for e in examples], min_freq=min_freq, reserved_tokens=[PAD])


def relation_tensors(examples: Sequence[RelationExample], vocab: Vocab) -> RelationTensors:
    """Token ids padded on the right to the longest example, with lengths, label indices and evidence."""
    if not examples:
        raise ValueError("relation_tensors needs at least one example, got none")
    index = {label: i for i, label in enumerate(LABELS)}
    bad = [e.label for e in examples if e.label not in index]
    if bad:
        raise ValueError(f"expected labels from LABELS (e.g. {LABELS[0]!r}), got {bad[0]!r}")
    steps = max(len(e.tokens) for e in examples)
    tokens = torch.full((len(examples), steps), vocab.pad, dtype=torch.long)  # (n, steps)
    for i, e in enumerate(examples):
        tokens[i, :len(e.tokens)] = torch.tensor(vocab[list(e.tokens)])
    lengths = torch.tensor([len(e.tokens) for e in examples])
    labels = torch.tensor([index[e.label] for e in examples])
    evidence = torch.tensor([e.evidence for e in examples])
    return RelationTensors(tokens, lengths, labels, evidence)


# ---------------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------------

POOLINGS = ("attention", "mean", "last")


def _check_bidirectional(output: torch.Tensor) -> int:
    if not isinstance(output, torch.Tensor) or output.dim() != 3 or output.shape[-1] % 2:
        raise ValueError(f"expected a bidirectional LSTM output (batch, steps, 2 * hidden), got "
                         f"{type(output).__name__} {tuple(getattr(output, 'shape', ()))}")
    return output.shape[-1] // 2


def sum_directions(output: torch.Tensor) -> torch.Tensor:
    """Zhou et al.'s ``h_i = forward_i + backward_i``: ``(batch, steps, 2h) -> (batch, steps, h)``.

    ``torch.nn.LSTM(..., bidirectional=True, batch_first=True)`` puts the forward direction's output
    in the first ``h`` features of each step and the backward direction's in the last ``h``.
    """
    h = _check_bidirectional(output)
    return output[..., :h] + output[..., h:]


def last_states(output: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """What a BiLSTM without attention reads: the forward state after the LAST real token plus the
    backward state after the FIRST token (the backward LSTM ends there), ``(batch, h)``.

    ``lengths`` ``(batch,)`` are the real lengths: with padding, ``output[:, -1]`` is not the last
    real step of a short sentence.
    """
    h = _check_bidirectional(output)
    if not isinstance(lengths, torch.Tensor) or lengths.shape != output.shape[:1]:
        raise ValueError(f"lengths must have shape ({output.shape[0]},), got {tuple(getattr(lengths, 'shape', ()))}")
    rows = torch.arange(output.shape[0], device=output.device)
    return output[rows, lengths.to(output.device) - 1, :h] + output[:, 0, h:]


class AttentionBiLSTM(nn.Module):
    """Zhou et al.'s Att-BLSTM: ``forward(tokens, lengths=None) -> logits (batch, num_classes)``.

    Embeddings -> bidirectional LSTM -> ``H``, the element-wise SUM of the forward and backward
    outputs ``(batch, steps, hidden_size)`` -> pooling -> ``h* = tanh(r)`` -> dropout -> linear layer
    (the softmax is in the loss). Dropout is applied to the embeddings, to the LSTM's outputs and
    to ``h*``, as in the paper. Pooling:

    - ``"attention"`` (the paper): ``alpha = softmax(w^T tanh(H))``, ``r = H alpha^T``
      (``AttentivePooling(hidden_size)``); padding gets weight exactly 0; the weights of the last
      call are in ``attention_weights`` ``(batch, steps)``;
    - ``"mean"``: ``r`` is the mean of ``H`` over the real tokens (fixed, uniform weights);
    - ``"last"``: ``r`` is ``last_states``, the forward LSTM's state after the last token plus the
      backward LSTM's after the first: what a BiLSTM classifier without attention reads.

    For the last two ``attention_weights`` is ``None``. Sequences are packed, so the padding
    after a sentence changes nothing, in either direction.
    """

    def __init__(self, vocab_size: int, embed_size: int, hidden_size: int, num_classes: int,
                 dropout: float = 0.3, pooling: str = "attention", padding_idx: int | None = 0):
        super().__init__()
        if min(vocab_size, embed_size, hidden_size, num_classes) < 1:
            raise ValueError(f"sizes must be positive, got vocab_size={vocab_size}, embed_size={embed_size}, "
                             f"hidden_size={hidden_size}, num_classes={num_classes}")
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {dropout}")
        self.vocab_size, self.hidden_size, self.pooling = vocab_size, hidden_size, pooling
        self.embedding = nn.Embedding(vocab_size, embed_size, padding_idx=padding_idx)
        self.lstm = nn.LSTM(embed_size, hidden_size, batch_first=True, bidirectional=True)
        self.dropout = nn.Dropout(dropout)
        self.attention = AttentivePooling(hidden_size) if pooling == "attention" else None
        self.classifier = nn.Linear(hidden_size, num_classes)
        self.attention_weights: torch.Tensor | None = None

    def _lengths(self, tokens: torch.Tensor, lengths: torch.Tensor | None) -> torch.Tensor:
        """Check the inputs; the lengths as a CPU tensor (``pack_padded_sequence`` wants them there)."""
        if (not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.is_floating_point()
                or tokens.numel() == 0):
            raise ValueError(f"AttentionBiLSTM expects token ids of shape (batch, steps), non-empty, with an "
                             f"integer dtype, got {type(tokens).__name__} {tuple(getattr(tokens, 'shape', ()))} "
                             f"{getattr(tokens, 'dtype', '')}")
        batch, steps = tokens.shape
        low, high = int(tokens.min()), int(tokens.max())
        if low < 0 or high >= self.vocab_size:
            raise ValueError(f"token ids must lie in [0, {self.vocab_size}), got {low}..{high}")
        if lengths is None:
            return torch.full((batch,), steps, dtype=torch.long)
        if not isinstance(lengths, torch.Tensor) or lengths.shape != (batch,) or lengths.is_floating_point():
            raise ValueError(f"lengths must be an integer tensor of shape ({batch},), got {type(lengths).__name__} "
                             f"{tuple(getattr(lengths, 'shape', ()))} {getattr(lengths, 'dtype', '')}")
        lengths = lengths.detach().cpu().long()
        if bool(((lengths < 1) | (lengths > steps)).any()):
            raise ValueError(f"lengths must lie in [1, {steps}] (the padded length), got "
                             f"{int(lengths.min())}..{int(lengths.max())}")
        return lengths

    def bilstm(self, tokens: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """The BiLSTM's output ``(batch, steps, 2 * hidden_size)`` (forward half first), zero on padding."""
        cpu_lengths = self._lengths(tokens, lengths)
        x = self.dropout(self.embedding(tokens))  # (batch, steps, embed)
        return run_packed(self.lstm, x, cpu_lengths)  # (batch, steps, 2 * hidden)

    def encode(self, tokens: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """``H`` ``(batch, steps, hidden_size)``, the sum of the two directions (before dropout)."""
        return sum_directions(self.bilstm(tokens, lengths))

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        output = self.dropout(self.bilstm(tokens, lengths))  # (batch, steps, 2 * hidden)
        batch, steps = tokens.shape
        lengths = torch.full((batch,), steps, device=tokens.device) if lengths is None else lengths.to(tokens.device)
        H = sum_directions(output)  # (batch, steps, hidden), zero on padding
        if self.pooling == "attention":
            r = self.attention(H, lengths)  # (batch, hidden); its weights (batch, steps) are 0 on padding
            self.attention_weights = self.attention.attention_weights
        elif self.pooling == "mean":
            r = H.sum(dim=1) / lengths.unsqueeze(-1).to(H.dtype)
            self.attention_weights = None
        else:
            r = last_states(output, lengths)
            self.attention_weights = None
        h_star = torch.tanh(r)  # (batch, hidden)
        return self.classifier(self.dropout(h_star))  # (batch, num_classes)


# ---------------------------------------------------------------------------------------------
# The official score
# ---------------------------------------------------------------------------------------------

def _as_labels(values, name: str) -> list[str]:
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().reshape(-1).tolist()
    values = list(values)
    out = []
    for v in values:
        if isinstance(v, str):
            if v not in LABELS:
                raise ValueError(f"{name}: expected labels from LABELS, got {v!r}")
            out.append(v)
        else:
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
