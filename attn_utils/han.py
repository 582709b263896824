"""Hierarchical attention networks (Yang et al. 2016), and generated reviews in which one sentence decides.

A document is a list of sentences, a sentence a list of words. The network reads it at two levels:
a bidirectional GRU over the words of each sentence, attention pooling of its states into one
vector per sentence, a bidirectional GRU over those sentence vectors, attention pooling into one
document vector, and a linear layer to class scores. Both poolings are
:class:`attn_utils.pooling.AttentivePooling` with a projection (Yang et al.'s
``u = tanh(W h + b)``, ``alpha = softmax(u^T u_ctx)``).

The corpus is made to test what the attention finds. Every review has 4 to 8 sentences; exactly
one of them, the *verdict*, opens with a cue ("overall", "in the end", ...) and decides the label:
positive when its opinion word is positive and not negated, or negative and negated ("overall the
film was not dull"). The other sentences are filler, and about half of them carry opinion words
and negations too, in sentences that decide nothing ("my sister said the film was not good").
Neither the opinion word alone nor a count of words tells the label; the model has to find the
verdict sentence, and inside it read the opinion word together with its negation.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from torch import nn

from .data.vocab import PAD, Vocab
from .masking import masked_softmax
from .packed import run_packed
from .pooling import AttentivePooling

# ---------------------------------------------------------------------------------------------
# The corpus: reviews with one deciding sentence
# ---------------------------------------------------------------------------------------------

REVIEW_CLASSES = ("negative", "positive")
VERDICT_CUES = (("overall",), ("in", "the", "end"), ("all", "in", "all"), ("to", "sum", "up"), ("on", "balance"))
POSITIVE_WORDS = ("good", "great", "superb", "charming", "gripping", "wonderful")
NEGATIVE_WORDS = ("bad", "dull", "awful", "boring", "clumsy", "tedious")
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


def _fill(template: str, rng: random.Random, positive: bool | None = None, negated: bool | None = None):
    """Words of ``template`` with its placeholders drawn from ``rng``; the opinion word's index (or None)."""
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
            words.append(rng.choice(POSITIVE_WORDS if positive else NEGATIVE_WORDS))
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
                 distractor_rate: float = 0.5) -> list[Review]:
    """``num`` reviews, the same for the same ``seed``: balanced labels, the verdict anywhere in the review.

    Each review has ``min_sentences`` to ``max_sentences`` sentences of 4 to 12 words; each filler
    sentence is a distractor (an opinion that decides nothing) with probability ``distractor_rate``.
    The label is ``positive XOR negated`` for the verdict's opinion word.
    """
    if num < 0 or not 1 <= min_sentences <= max_sentences or not 0.0 <= distractor_rate <= 1.0:
        raise ValueError(f"expected num >= 0, 1 <= min_sentences <= max_sentences and 0 <= distractor_rate <= 1, "
                         f"got num={num}, min_sentences={min_sentences}, max_sentences={max_sentences}, "
                         f"distractor_rate={distractor_rate}")
    rng = random.Random(seed)
    reviews = []
    for _ in range(num):
        label = rng.randrange(len(REVIEW_CLASSES))
        negated = rng.random() < 0.5
        positive_word = bool(label) != negated  # label = positive word XOR negation
        verdict, polar_at = _fill(rng.choice(_VERDICTS), rng, positive_word, negated)
        count = rng.randint(min_sentences, max_sentences)
        evidence = rng.randrange(count)
        sentences = []
        for i in range(count):
            if i == evidence:
                sentences.append(verdict)
            else:
                pool = _DISTRACTORS if rng.random() < distractor_rate else _NEUTRAL
                sentences.append(_fill(rng.choice(pool), rng)[0])
        for s in sentences:  # the word lists guarantee this; a change to them must not break it silently
            assert MIN_WORDS <= len(s) <= MAX_WORDS, s
        reviews.append(Review(sentences, label, evidence, polar_at))
    return reviews


def review_label(sentences: list[list[str]]) -> int:
    """The label a reader gets by the corpus's rule: find the one sentence that opens with a verdict
    cue, take its opinion word, and flip it if ``not`` comes before it in that sentence.

    Raises ``ValueError`` when no sentence, or more than one, opens with a cue.
    """
    verdicts = [s for s in sentences if any(tuple(s[:len(cue)]) == cue for cue in VERDICT_CUES)]
    if len(verdicts) != 1:
        raise ValueError(f"expected exactly one sentence that opens with a verdict cue, found {len(verdicts)}")
    verdict = verdicts[0]
    polar = [i for i, w in enumerate(verdict) if w in POSITIVE_WORDS or w in NEGATIVE_WORDS]
    if len(polar) != 1:
        raise ValueError(f"expected one opinion word in the verdict {' '.join(verdict)!r}, found {len(polar)}")
    negated = NEGATION in verdict[:polar[0]]
    return int((verdict[polar[0]] in POSITIVE_WORDS) != negated)


def review_vocab(reviews: list[Review]) -> Vocab:
    """A vocabulary of every word in ``reviews``, with ``<pad>`` at index 0 (and ``<unk>`` at 1)."""
    return Vocab([w for r in reviews for s in r.sentences for w in s], reserved_tokens=[PAD])


def documents_to_tensors(documents, vocab: Vocab, max_sentences: int | None = None, max_words: int | None = None):
    """Padded token ids ``(n, max_sentences, max_words)``, sentence lengths ``(n, max_sentences)`` and
    document lengths ``(n,)``.

    ``documents`` are lists of sentences (lists of words) or :class:`Review`\\ s. Padded words and
    padded sentences hold ``<pad>`` and length 0. The sizes default to the largest in the data; a
    document that does not fit raises ``ValueError`` rather than being cut.
    """
    docs = [d.sentences if isinstance(d, Review) else d for d in documents]
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


# ---------------------------------------------------------------------------------------------
# The models
# ---------------------------------------------------------------------------------------------

POOLINGS = ("attention", "mean")


def check_documents(ids: torch.Tensor, sentence_lens: torch.Tensor | None = None, doc_lens: torch.Tensor | None = None,
                    vocab_size: int | None = None, pad: int = 0):
    """Validate a batch of documents and return ``(sentence_lens, doc_lens)`` with sentences past a
    document's end set to length 0.

    ``ids`` ``(batch, sentences, words)``; without ``sentence_lens`` a sentence's length is its number
    of non-``pad`` ids, and without ``doc_lens`` a document's length is its number of non-empty
    sentences (both assume padding on the right).
    """
    if not isinstance(ids, torch.Tensor) or ids.dim() != 3 or ids.is_floating_point() or ids.dtype == torch.bool:
        raise ValueError(f"expected integer token ids of shape (batch, sentences, words), got "
                         f"{type(ids).__name__} {tuple(getattr(ids, 'shape', ()))} {getattr(ids, 'dtype', '')}")
    batch, sentences, words = ids.shape
    if vocab_size is not None and ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        raise ValueError(f"token ids must lie in [0, {vocab_size}), got {int(ids.min())}..{int(ids.max())}")
    if sentence_lens is None:
        sentence_lens = (ids != pad).sum(-1)
    if doc_lens is None:
        doc_lens = (sentence_lens > 0).sum(-1)
    for name, lens, shape, top in (("sentence_lens", sentence_lens, (batch, sentences), words),
                                   ("doc_lens", doc_lens, (batch,), sentences)):
        if not isinstance(lens, torch.Tensor) or tuple(lens.shape) != shape or lens.is_floating_point():
            raise ValueError(f"expected {name} as integers of shape {shape} for ids of shape {tuple(ids.shape)}, "
                             f"got {type(lens).__name__} {tuple(getattr(lens, 'shape', ()))}")
        if lens.numel() and (int(lens.min()) < 0 or int(lens.max()) > top):
            raise ValueError(f"{name} must lie in [0, {top}], got {int(lens.min())}..{int(lens.max())}")
    sentence_lens, doc_lens = sentence_lens.to(ids.device).long(), doc_lens.to(ids.device).long()
    in_document = torch.arange(sentences, device=ids.device) < doc_lens[:, None]  # (batch, sentences)
    return sentence_lens * in_document, doc_lens


def pool(attention: AttentivePooling | None, H: torch.Tensor, lengths: torch.Tensor):
    """``(pooled (N, size), weights (N, steps))`` of ``H`` ``(N, steps, size)`` over its first ``lengths``
    steps: attention pooling, or (``attention=None``) the mean, i.e. the same weights with equal scores."""
    if attention is None:
        weights = masked_softmax(H.new_zeros(H.shape[:2]), lengths)  # 1/length on real steps, 0 elsewhere
        return (weights.unsqueeze(-1) * H).sum(1), weights
    return attention(H, lengths), attention.attention_weights


def pool_words(attention: AttentivePooling | None, H: torch.Tensor, sentence_lens: torch.Tensor):
    """Sentence vectors ``(batch, sentences, size)`` and word weights ``(batch, sentences, words)`` from
    word states ``H`` ``(batch, sentences, words, size)``: every sentence is pooled on its own.
    An empty (padding) sentence gets the zero vector and zero weights."""
    batch, sentences, words, size = H.shape
    s, weights = pool(attention, H.reshape(batch * sentences, words, size), sentence_lens.reshape(-1))
    return s.reshape(batch, sentences, size), weights.reshape(batch, sentences, words)


def _check_pooling(pooling: str) -> None:
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")


class HierarchicalAttentionNetwork(nn.Module):
    """Yang et al.'s HAN: word encoder and attention inside each sentence, then sentence encoder and
    attention over the document, then a linear classifier.

    ``forward(ids, sentence_lens=None, doc_lens=None)`` takes ``ids`` ``(batch, sentences, words)``
    and returns logits ``(batch, num_classes)``, ``W_c v + b_c`` (the paper's softmax is left to the
    loss). It keeps ``attention_weights`` (sentence weights ``(batch, sentences)``) and
    ``word_attention_weights`` ``(batch, sentences, words)`` of its last call; padded words and
    sentences get weight exactly 0. ``pooling="mean"`` replaces both attentions by plain means
    (the paper's HN-AVE baseline).
    """

    def __init__(self, vocab_size: int, embed_size: int, word_hidden: int, sentence_hidden: int,
                 attention_size: int, num_classes: int, pooling: str = "attention", padding_idx: int = 0):
        super().__init__()
        _check_pooling(pooling)
        self.pooling, self.padding_idx = pooling, padding_idx
        self.embedding = nn.Embedding(vocab_size, embed_size, padding_idx=padding_idx)
        self.word_encoder = nn.GRU(embed_size, word_hidden, batch_first=True, bidirectional=True)
        self.word_attention = AttentivePooling(2 * word_hidden, attention_size) if pooling == "attention" else None
        self.sentence_encoder = nn.GRU(2 * word_hidden, sentence_hidden, batch_first=True, bidirectional=True)
        self.sentence_attention = (AttentivePooling(2 * sentence_hidden, attention_size)
                                   if pooling == "attention" else None)
        self.classifier = nn.Linear(2 * sentence_hidden, num_classes)
        self.attention_weights: torch.Tensor | None = None
        self.word_attention_weights: torch.Tensor | None = None

    def lengths(self, ids, sentence_lens=None, doc_lens=None):
        """``(sentence_lens, doc_lens)`` checked (see :func:`check_documents`)."""
        return check_documents(ids, sentence_lens, doc_lens, self.embedding.num_embeddings, self.padding_idx)

    def encode_words(self, ids: torch.Tensor, sentence_lens: torch.Tensor) -> torch.Tensor:
        """Word annotations ``h_it = [fwd h_it; bwd h_it]``: ``(batch, sentences, words, 2 * word_hidden)``,
        each sentence read on its own, zeros at padding."""
        batch, sentences, words = ids.shape
        X = self.embedding(ids).reshape(batch * sentences, words, -1)  # sentences side by side: (B*S, W, E)
        H = run_packed(self.word_encoder, X, sentence_lens.reshape(-1))  # (B*S, W, 2h)
        return H.reshape(batch, sentences, words, -1)

    def encode_sentences(self, s: torch.Tensor, doc_lens: torch.Tensor) -> torch.Tensor:
        """Sentence annotations ``h_i = [fwd h_i; bwd h_i]`` from the sentence vectors ``s`` ``(batch, sentences,
        2 * word_hidden)``: ``(batch, sentences, 2 * sentence_hidden)``, zeros past each document's end."""
        return run_packed(self.sentence_encoder, s, doc_lens)

    def forward(self, ids: torch.Tensor, sentence_lens: torch.Tensor | None = None,
                doc_lens: torch.Tensor | None = None) -> torch.Tensor:
        sentence_lens, doc_lens = self.lengths(ids, sentence_lens, doc_lens)
        H = self.encode_words(ids, sentence_lens)  # (B, S, W, 2hw)
        s, word_weights = pool_words(self.word_attention, H, sentence_lens)  # (B, S, 2hw), (B, S, W)
        H_sentences = self.encode_sentences(s, doc_lens)  # (B, S, 2hs)
        v, sentence_weights = pool(self.sentence_attention, H_sentences, doc_lens)  # (B, 2hs), (B, S)
        self.word_attention_weights, self.attention_weights = word_weights, sentence_weights
        return self.classifier(v)  # (B, classes)


class FlatDocumentClassifier(nn.Module):
    """The comparison without hierarchy: the document's words as one sequence (sentence boundaries
    dropped), one bidirectional GRU over it, then mean pooling (``pooling="mean"``) or attention
    pooling over all the words, and a linear classifier.

    Takes the same inputs as :class:`HierarchicalAttentionNetwork`; ``attention_weights``
    ``(batch, sentences * words)`` holds the weights of the document's words in reading order,
    padding (at the end) weighted 0.
    """

    def __init__(self, vocab_size: int, embed_size: int, hidden: int, attention_size: int, num_classes: int,
                 pooling: str = "mean", padding_idx: int = 0):
        super().__init__()
        _check_pooling(pooling)
        self.pooling, self.padding_idx = pooling, padding_idx
        self.embedding = nn.Embedding(vocab_size, embed_size, padding_idx=padding_idx)
        self.encoder = nn.GRU(embed_size, hidden, batch_first=True, bidirectional=True)
        self.attention = AttentivePooling(2 * hidden, attention_size) if pooling == "attention" else None
        self.classifier = nn.Linear(2 * hidden, num_classes)
        self.attention_weights: torch.Tensor | None = None

    def forward(self, ids: torch.Tensor, sentence_lens: torch.Tensor | None = None,
                doc_lens: torch.Tensor | None = None) -> torch.Tensor:
        sentence_lens, _ = check_documents(ids, sentence_lens, doc_lens, self.embedding.num_embeddings,
                                           self.padding_idx)
        batch, sentences, words = ids.shape
        real = torch.arange(words, device=ids.device) < sentence_lens.unsqueeze(-1)  # (B, S, W)
        real = real.reshape(batch, sentences * words)
        order = torch.sort((~real).to(torch.uint8), dim=1, stable=True).indices  # real words first, in order
        flat = ids.reshape(batch, sentences * words).gather(1, order)  # (B, S*W)
        lengths = real.sum(1)  # (B,)
        H = run_packed(self.encoder, self.embedding(flat), lengths)  # (B, S*W, 2h)
        v, self.attention_weights = pool(self.attention, H, lengths)
        return self.classifier(v)


def display_weights(sentence_weights: torch.Tensor, word_weights: torch.Tensor) -> torch.Tensor:
    """Word weights scaled for display as in Yang et al.'s figures: ``sqrt(p_sentence) * p_word``.

    ``sentence_weights`` ``(..., sentences)``, ``word_weights`` ``(..., sentences, words)``; the square
    root keeps the words of a lightly weighted sentence visible while the words of the important
    sentences stand out.
    """
    if word_weights.shape[:-1] != sentence_weights.shape:
        raise ValueError(f"expected word weights (..., sentences, words) matching sentence weights (..., sentences), "
                         f"got {tuple(word_weights.shape)} and {tuple(sentence_weights.shape)}")
    return sentence_weights.sqrt().unsqueeze(-1) * word_weights
