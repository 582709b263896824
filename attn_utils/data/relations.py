"""Relation classification data in the format of SemEval-2010 Task 8 (Hendrickx et al., 2010), generated.

A sentence has two marked nominals, ``the <e1> burst </e1> was caused by the <e2> pressure </e2> .``;
its label names the relation between them and its direction, one of 9 relation types times 2
directions plus ``Other`` (the 19 ``LABELS``). This module holds:

- ``RelationExample``, ``LABELS`` and ``relation_type``: the examples and labels of the task;
- ``make_relation_corpus``: a generated corpus in that format whose relation is carried by one
  known cue word between the entities (its index is the example's ``evidence``), with entity nouns
  that say nothing about the relation and, in half of the sentences, a distracting clause (before
  the entities, as an aside between them, or after them) that states a relation of another type
  between unmarked nouns; so "does attention find the cue?" can be measured;
- ``relation_vocab`` and ``relation_tensors``: token ids, padding and lengths.

The reader of the task's own files is ``attn_utils.data.semeval``; the model of Zhou et al. (2016)
is in ``attn_utils.relation``, the official score in ``attn_utils.metrics``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch

from ..checks import check_non_negative_int, check_seed, is_finite_number
from .vocab import PAD, Vocab

RELATION_TYPES = (
    "Cause-Effect", "Component-Whole", "Content-Container", "Entity-Destination", "Entity-Origin",
    "Instrument-Agency", "Member-Collection", "Message-Topic", "Product-Producer",
)
# The 19 labels: label 2k is type k with e1 first in the relation, 2k + 1 the reverse, 18 is Other.
LABELS = tuple(f"{kind}({order})" for kind in RELATION_TYPES for order in ("e1,e2", "e2,e1")) + ("Other",)
ENTITY_MARKERS = ("<e1>", "</e1>", "<e2>", "</e2>")


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
    ``make_relation_corpus``. ``rng`` is a ``random.Random``, ``filler`` an int >= 0, ``rare_prob`` in [0, 1]."""
    if not isinstance(rng, random.Random):
        raise ValueError(f"rng must be a random.Random, got {type(rng).__name__}")
    check_non_negative_int("filler", filler)
    _check_share("rare_prob", rare_prob)
    if isinstance(slots, str):
        raise ValueError(f"slots must be a list of places from {SLOTS}, got the string {slots!r}")
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


def _check_share(name: str, value) -> None:
    if not is_finite_number(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {value!r}")


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
    The same ``seed`` (an int) always gives the same corpus. Sizes and ``filler`` are ints >= 0, the
    probabilities numbers in [0, 1].
    """
    for name, value in (("num_train", num_train), ("num_val", num_val), ("num_test", num_test), ("filler", filler)):
        check_non_negative_int(name, value)
    if min(num_train, num_val, num_test) < 0 or num_train + num_val + num_test == 0:
        raise ValueError(f"split sizes must be non-negative and not all 0, got {num_train}, {num_val}, {num_test}")
    _check_share("distractor_prob", distractor_prob)
    _check_share("rare_prob", rare_prob)
    seed = check_seed("seed", seed)
    if not isinstance(distractors, int) or isinstance(distractors, bool) or distractors not in (1, 2, 3):
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
# Tensors
# ---------------------------------------------------------------------------------------------

def _check_examples(examples) -> None:
    if isinstance(examples, (str, bytes)) or not isinstance(examples, Sequence) or not all(
            isinstance(e, RelationExample) for e in examples):
        raise ValueError(f"examples must be a list of RelationExample, got {type(examples).__name__} "
                         f"{examples!r:.60}")


class RelationTensors(NamedTuple):
    """``tokens`` (n, steps) padded with ``<pad>``, ``lengths`` (n,), ``labels`` (n,) indices into
    ``LABELS``, ``evidence`` (n,) cue positions (-1 when unknown)."""

    tokens: torch.Tensor
    lengths: torch.Tensor
    labels: torch.Tensor
    evidence: torch.Tensor


def relation_vocab(examples: Sequence[RelationExample], min_freq: int = 1) -> Vocab:
    """The vocabulary of the examples' tokens (a list of ``RelationExample``), ``<pad>`` = 0 and ``<unk>`` = 1."""
    _check_examples(examples)
    return Vocab([list(e.tokens) for e in examples], min_freq=min_freq, reserved_tokens=[PAD])


def relation_tensors(examples: Sequence[RelationExample], vocab: Vocab) -> RelationTensors:
    """Token ids padded on the right to the longest example, with lengths, label indices and evidence:
    ``examples`` a non-empty list of ``RelationExample``, ``vocab`` a ``Vocab`` holding ``<pad>``."""
    if not examples:
        raise ValueError("relation_tensors needs at least one example, got none")
    _check_examples(examples)
    if not isinstance(vocab, Vocab) or PAD not in vocab:
        raise ValueError(f"vocab must be a Vocab with {PAD!r} (relation_vocab makes one), got {vocab!r:.60}")
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
