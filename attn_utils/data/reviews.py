"""Generated film reviews in which one sentence decides, for hierarchical attention (Yang et al., 2016).

A document is a list of sentences, a sentence a list of words. Every review has 4 to 8 sentences;
exactly one of them, the *verdict*, opens with a cue ("overall", "in the end", ...) and decides the
label: positive when its opinion word is positive and not negated, or negative and negated
("overall the film was not dull"). The other sentences are filler, and about half of them carry
opinion words and negations too, in sentences that decide nothing ("my sister said the film was not
good"). Neither the opinion word alone nor a count of words tells the label; a model has to find the
verdict sentence, and inside it read the opinion word together with its negation.
``rare_prob`` > 0 draws opinion words from two longer lists of rarer words, so that in a small
training set each of them occurs only a few times, as most words of real reviews do.

``make_reviews`` writes the reviews, ``review_label`` applies the corpus's rule, ``review_vocab`` and
``documents_to_tensors`` turn documents into padded ids and lengths, and ``make_review_data`` makes
the three splits. The network that reads them is in ``attn_utils.han``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from ..checks import check_non_negative_int, check_seed, is_finite_number
from .vocab import PAD, Vocab

REVIEW_CLASSES = ("negative", "positive")
VERDICT_CUES = (("overall",), ("in", "the", "end"), ("all", "in", "all"), ("to", "sum", "up"), ("on", "balance"))
POSITIVE_WORDS = ("good", "great", "superb", "charming", "gripping", "wonderful")
NEGATIVE_WORDS = ("bad", "dull", "awful", "boring", "clumsy", "tedious")
# Rarer opinion words, drawn instead of the common ones with probability ``rare_prob``: spread over many
# words, each occurs only a few times in a small training set, as most words do in real reviews.
RARE_POSITIVE_WORDS = (
    "splendid", "delightful", "stunning", "witty", "moving", "lovely", "brilliant", "engaging", "elegant",
    "heartfelt", "dazzling", "touching", "riveting", "inventive", "graceful", "playful", "tender", "vivid",
    "haunting", "masterful", "captivating", "absorbing", "luminous", "sparkling", "thrilling", "poignant",
    "rousing", "uplifting", "exquisite", "sublime",
)
RARE_NEGATIVE_WORDS = (
    "dreary", "tiresome", "shoddy", "clunky", "lifeless", "bland", "dire", "plodding", "muddled", "stale",
    "sluggish", "hollow", "trite", "shallow", "cheap", "sloppy", "limp", "forgettable", "grating", "dismal",
    "joyless", "bloated", "lazy", "flat", "messy", "pointless", "hackneyed", "overlong", "insipid", "wooden",
)
OPINION_WORDS = POSITIVE_WORDS + NEGATIVE_WORDS + RARE_POSITIVE_WORDS + RARE_NEGATIVE_WORDS
NEGATION = "not"
MIN_WORDS, MAX_WORDS = 4, 12  # every generated sentence has 4 to 12 words

_FILMS = ("film", "movie", "story", "picture")
_INTENSIFIERS = ("really", "very", "truly", "quite")
_RELATIVES = ("sister", "brother", "friend", "father", "aunt", "cousin", "neighbour")
_PEOPLE = ("teacher", "farmer", "pilot", "chef", "student", "detective", "painter")
_PLACES = (("paris",), ("a", "small", "town"), ("the", "mountains"), ("lisbon",), ("an", "old", "harbour"),
           ("the", "desert"), ("berlin",))
_VENUES = (("cinema",), ("festival",), ("local", "theatre"), ("museum",), ("open", "air", "screen"))
_DAYS = (("monday",), ("friday",), ("a", "rainy", "sunday"), ("saturday", "night"), ("a", "holiday"))

# Filler without opinion words. Placeholders: FILM, PERSON, PLACE, VENUE, DAY, RELATIVE.
_NEUTRAL = (
    "the plot follows a PERSON who moves to PLACE",
    "we saw it at the VENUE on DAY",
    "it runs for about two hours",
    "the tickets cost twelve dollars each",
    "the FILM is set in PLACE during the winter",
    "i went with my RELATIVE after dinner",
    "the lead is played by a newcomer from PLACE",
    "the FILM was shot in PLACE over six weeks",
    "there were forty people at the VENUE",
    "the music was written by a PERSON from PLACE",
)
# Filler with an opinion (OPINION = optional NEGATION, optional intensifier, opinion word) that is
# not the reviewer's verdict: somebody else's view, or a view of something else.
_DISTRACTORS = (
    "my RELATIVE said the FILM was OPINION",
    "the book it is based on was OPINION",
    "the trailer was OPINION",
    "a critic on the radio said it was OPINION",
    "i heard that the sequel is OPINION",
    "the last FILM by this director was OPINION",
    "my RELATIVE thought the ending was OPINION",
    "my RELATIVE said that CUE it was OPINION",
    "critics agree that CUE the FILM is OPINION",
)
# The verdict: CUE, then the reviewer's own opinion of the film.
_VERDICTS = (
    "CUE the FILM was OPINION",
    "CUE i thought it was OPINION",
    "CUE this is NOT a POLAR FILM",
    "CUE the whole FILM felt OPINION",
    "CUE i found the FILM OPINION",
)


@dataclass
class Review:
    """One generated document: ``sentences`` (lists of words), its ``label`` (index into
    ``REVIEW_CLASSES``), ``evidence`` (the index of the deciding sentence) and ``evidence_word``
    (the index, inside that sentence, of its opinion word)."""

    sentences: list[list[str]]
    label: int
    evidence: int
    evidence_word: int


def _fill(template: str, rng: random.Random, positive: bool | None = None, negated: bool | None = None,
          rare_prob: float = 0.0):
    """Words of ``template`` with its placeholders drawn from ``rng``; the opinion word's index (or None).
    The opinion word comes from the rare lists with probability ``rare_prob``."""
    positive = rng.random() < 0.5 if positive is None else positive
    negated = rng.random() < 0.5 if negated is None else negated
    words, polar_at = [], None
    for slot in template.split():
        if slot == "OPINION":
            if negated:
                words.append(NEGATION)
            if rng.random() < 0.3:
                words.append(rng.choice(_INTENSIFIERS))
            slot = "POLAR"
        if slot == "POLAR":
            polar_at = len(words)
            rare = rare_prob > 0 and rng.random() < rare_prob  # (no draw at 0: the default corpus stays the same)
            choices = (RARE_POSITIVE_WORDS if positive else RARE_NEGATIVE_WORDS) if rare else \
                (POSITIVE_WORDS if positive else NEGATIVE_WORDS)
            words.append(rng.choice(choices))
            if polar_at and words[-2] == "a" and words[-1][0] in "aeiou":
                words[-2] = "an"
        elif slot == "NOT":
            words += [NEGATION] if negated else []
        elif slot == "CUE":
            words += rng.choice(VERDICT_CUES)
        elif slot == "FILM":
            words.append(rng.choice(_FILMS))
        elif slot == "PERSON":
            words.append(rng.choice(_PEOPLE))
        elif slot == "RELATIVE":
            words.append(rng.choice(_RELATIVES))
        elif slot == "PLACE":
            words += rng.choice(_PLACES)
        elif slot == "VENUE":
            words += rng.choice(_VENUES)
        elif slot == "DAY":
            words += rng.choice(_DAYS)
        else:
            words.append(slot)
    return words, polar_at


def make_reviews(num: int, seed: int = 0, min_sentences: int = 4, max_sentences: int = 8,
                 distractor_rate: float = 0.5, rare_prob: float = 0.0) -> list[Review]:
    """``num`` reviews, the same for the same ``seed``: balanced labels, the verdict anywhere in the review.

    Each review has ``min_sentences`` to ``max_sentences`` sentences of 4 to 12 words; each filler
    sentence is a distractor (an opinion that decides nothing) with probability ``distractor_rate``.
    Every opinion word, in the verdict and in the distractors, comes from ``RARE_POSITIVE_WORDS`` or
    ``RARE_NEGATIVE_WORDS`` with probability ``rare_prob``, else from ``POSITIVE_WORDS`` or
    ``NEGATIVE_WORDS``. The label is ``positive XOR negated`` for the verdict's opinion word. Counts are
    ints, the rates numbers in [0, 1], ``seed`` an int.
    """
    for name, value in (("num", num), ("min_sentences", min_sentences), ("max_sentences", max_sentences)):
        check_non_negative_int(name, value)
    seed = check_seed("seed", seed)
    for name, value in (("distractor_rate", distractor_rate), ("rare_prob", rare_prob)):
        if not is_finite_number(value):
            raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    if num < 0 or not 1 <= min_sentences <= max_sentences or not 0.0 <= distractor_rate <= 1.0 \
            or not 0.0 <= rare_prob <= 1.0:
        raise ValueError(f"expected num >= 0, 1 <= min_sentences <= max_sentences, 0 <= distractor_rate <= 1 "
                         f"and 0 <= rare_prob <= 1, got num={num}, min_sentences={min_sentences}, "
                         f"max_sentences={max_sentences}, distractor_rate={distractor_rate}, rare_prob={rare_prob}")
    rng = random.Random(seed)
    reviews = []
    for _ in range(num):
        label = rng.randrange(len(REVIEW_CLASSES))
        negated = rng.random() < 0.5
        positive_word = bool(label) != negated  # label = positive word XOR negation
        verdict, polar_at = _fill(rng.choice(_VERDICTS), rng, positive_word, negated, rare_prob)
        count = rng.randint(min_sentences, max_sentences)
        evidence = rng.randrange(count)
        sentences = []
        for i in range(count):
            if i == evidence:
                sentences.append(verdict)
            else:
                pool = _DISTRACTORS if rng.random() < distractor_rate else _NEUTRAL
                sentences.append(_fill(rng.choice(pool), rng, rare_prob=rare_prob)[0])
        for s in sentences:  # the word lists guarantee this; a change to them must not break it silently
            assert MIN_WORDS <= len(s) <= MAX_WORDS, s
        reviews.append(Review(sentences, label, evidence, polar_at))
    return reviews


def review_label(sentences: list[list[str]]) -> int:
    """The label a reader gets by the corpus's rule: find the one sentence that opens with a verdict
    cue, take its opinion word, and flip it if ``not`` comes before it in that sentence.

    ``sentences`` is a list of sentences, each a list of words. Raises ``ValueError`` when no sentence, or
    more than one, opens with a cue.
    """
    _check_document(sentences, "sentences")
    verdicts = [s for s in sentences if any(tuple(s[:len(cue)]) == cue for cue in VERDICT_CUES)]
    if len(verdicts) != 1:
        raise ValueError(f"expected exactly one sentence that opens with a verdict cue, found {len(verdicts)}")
    verdict = verdicts[0]
    polar = [i for i, w in enumerate(verdict) if w in OPINION_WORDS]
    if len(polar) != 1:
        raise ValueError(f"expected one opinion word in the verdict {' '.join(verdict)!r}, found {len(polar)}")
    negated = NEGATION in verdict[:polar[0]]
    return int((verdict[polar[0]] in POSITIVE_WORDS + RARE_POSITIVE_WORDS) != negated)


def review_vocab(reviews: list[Review]) -> Vocab:
    """A vocabulary of every word in ``reviews`` (a list of ``Review``), with ``<pad>`` at index 0 (and ``<unk>`` at
    1)."""
    if isinstance(reviews, (str, bytes)) or not isinstance(reviews, (list, tuple)) or not all(
            isinstance(r, Review) for r in reviews):
        raise ValueError(f"reviews must be a list of Review, got {type(reviews).__name__} {reviews!r:.60}")
    return Vocab([w for r in reviews for s in r.sentences for w in s], reserved_tokens=[PAD])


def _check_document(document, name: str) -> None:
    """Raise unless ``document`` is a list of sentences, each a list (or tuple) of words: a sentence given as a
    string would be read letter by letter."""
    if not isinstance(document, (list, tuple)) or not all(
            isinstance(s, (list, tuple)) and all(isinstance(w, str) for w in s) for s in document):
        raise ValueError(f"{name} must be a list of sentences, each a list of words (strings), got "
                         f"{type(document).__name__} {document!r:.60}")


def documents_to_tensors(documents, vocab: Vocab, max_sentences: int | None = None, max_words: int | None = None):
    """Padded token ids ``(n, max_sentences, max_words)``, sentence lengths ``(n, max_sentences)`` and
    document lengths ``(n,)``.

    ``documents`` are lists of sentences (lists of words) or :class:`Review`\\ s. Padded words and
    padded sentences hold ``<pad>`` and length 0. The sizes default to the largest in the data (else ints
    >= 0); a document that does not fit raises ``ValueError`` rather than being cut. ``vocab`` holds ``<pad>``.
    """
    if isinstance(documents, (str, bytes)) or not isinstance(documents, (list, tuple)):
        raise ValueError(f"documents must be a list of documents (or Reviews), got {type(documents).__name__}")
    if not isinstance(vocab, Vocab) or PAD not in vocab:
        raise ValueError(f"vocab must be a Vocab with {PAD!r} (review_vocab makes one), got {vocab!r:.60}")
    for name, value in (("max_sentences", max_sentences), ("max_words", max_words)):
        if value is not None:
            check_non_negative_int(name, value)
    docs = [d.sentences if isinstance(d, Review) else d for d in documents]
    for k, doc in enumerate(docs):
        _check_document(doc, f"documents[{k}]")
    longest_doc = max((len(d) for d in docs), default=0)
    longest_sentence = max((len(s) for d in docs for s in d), default=0)
    max_sentences = longest_doc if max_sentences is None else max_sentences
    max_words = longest_sentence if max_words is None else max_words
    if longest_doc > max_sentences or longest_sentence > max_words:
        raise ValueError(f"documents need room for {longest_doc} sentences of {longest_sentence} words, "
                         f"got max_sentences={max_sentences}, max_words={max_words}")
    ids = torch.full((len(docs), max_sentences, max_words), vocab.pad, dtype=torch.long)
    sentence_lens = torch.zeros(len(docs), max_sentences, dtype=torch.long)
    doc_lens = torch.tensor([len(d) for d in docs], dtype=torch.long)
    for n, doc in enumerate(docs):
        for i, sentence in enumerate(doc):
            ids[n, i, :len(sentence)] = torch.tensor(vocab[list(sentence)], dtype=torch.long)
            sentence_lens[n, i] = len(sentence)
    return ids, sentence_lens, doc_lens


@dataclass
class ReviewSplit:
    """One split: the reviews, the model's ``inputs`` ``(ids, sentence_lens, doc_lens)``, and
    ``labels``, ``evidence`` and ``evidence_word`` as ``(n,)`` tensors."""

    reviews: list[Review]
    inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    labels: torch.Tensor
    evidence: torch.Tensor
    evidence_word: torch.Tensor

    def __len__(self) -> int:
        return len(self.reviews)


@dataclass
class ReviewData:
    """Train, validation and test splits of generated reviews sharing one vocabulary."""

    vocab: Vocab
    train: ReviewSplit
    val: ReviewSplit
    test: ReviewSplit


def make_review_data(num_train: int = 3000, num_val: int = 500, num_test: int = 1000, seed: int = 0,
                     **generator_options) -> ReviewData:
    """Reviews from :func:`make_reviews` (one stream, cut into three splits), padded to 8 sentences of 12
    words (more if ``max_sentences`` asks), with a vocabulary built from the training split."""
    for name, value in (("num_train", num_train), ("num_val", num_val), ("num_test", num_test)):
        check_non_negative_int(name, value)  # a negative split would cut the others wrongly
    reviews = make_reviews(num_train + num_val + num_test, seed=seed, **generator_options)
    vocab = review_vocab(reviews[:num_train])
    max_sentences = max(8, generator_options.get("max_sentences", 8))

    def split(part: list[Review]) -> ReviewSplit:
        inputs = documents_to_tensors(part, vocab, max_sentences=max_sentences, max_words=MAX_WORDS)
        return ReviewSplit(part, inputs, torch.tensor([r.label for r in part], dtype=torch.long),
                           torch.tensor([r.evidence for r in part], dtype=torch.long),
                           torch.tensor([r.evidence_word for r in part], dtype=torch.long))

    return ReviewData(vocab, split(reviews[:num_train]), split(reviews[num_train:num_train + num_val]),
                      split(reviews[num_train + num_val:]))
