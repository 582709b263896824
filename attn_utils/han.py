"""Hierarchical attention networks (Yang et al. 2016) for documents of sentences of words.

A document is a list of sentences, a sentence a list of words. The network reads it at two levels:
a bidirectional GRU over the words of each sentence, attention pooling of its states into one
vector per sentence, a bidirectional GRU over those sentence vectors, attention pooling into one
document vector, and a linear layer to class scores. Both poolings are
:class:`attn_utils.pooling.LearnedQueryPooling` with a projection (Yang et al.'s
``u = tanh(W h + b)``, ``alpha = softmax(u^T u_ctx)``). ``FlatDocumentClassifier`` is the
comparison without hierarchy, and ``display_weights`` scales word weights as the paper's figures do.

The generated reviews in which one sentence decides, made to test what the attention finds, are in
``attn_utils.data.reviews``.
"""

from __future__ import annotations

import torch
from torch import nn

from .checks import EMBEDDING_INDEX_DTYPES, check_positive_int, checks_read_values
from .packed import run_packed
from .pooling import LearnedQueryPooling, masked_mean

# ---------------------------------------------------------------------------------------------
# The models
# ---------------------------------------------------------------------------------------------

POOLINGS = ("attention", "mean")


def check_documents(ids: torch.Tensor, sentence_lens: torch.Tensor | None = None, doc_lens: torch.Tensor | None = None,
                    vocab_size: int | None = None, pad: int = 0):
    """Validate a batch of documents and return ``(sentence_lens, doc_lens)`` with sentences past a
    document's end set to length 0.

    ``ids`` ``(batch, sentences, words)``, int64 or int32 (what ``nn.Embedding`` reads) in ``[0, vocab_size)``;
    without ``sentence_lens`` a sentence's length is its number of non-``pad`` ids, and without ``doc_lens`` a
    document's length is its number of non-empty sentences (both assume padding on the right). Given, they
    are integer (not bool) tensors ``(batch, sentences)`` in ``[0, words]`` and ``(batch,)`` in ``[0, sentences]``.
    """
    if not isinstance(ids, torch.Tensor) or ids.dim() != 3 or ids.dtype not in EMBEDDING_INDEX_DTYPES:
        raise ValueError(f"expected integer token ids of shape (batch, sentences, words), got {type(ids).__name__} "
                         f"{tuple(getattr(ids, 'shape', ()))} {getattr(ids, 'dtype', '')} (ids are torch.int64 or "
                         f"torch.int32, what nn.Embedding reads)")
    batch, sentences, words = ids.shape
    if vocab_size is not None and ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        raise ValueError(f"token ids must lie in [0, {vocab_size}), got {int(ids.min())}..{int(ids.max())}")
    if sentence_lens is None:
        sentence_lens = (ids != pad).sum(-1)
    if doc_lens is None:
        doc_lens = (sentence_lens > 0).sum(-1)
    for name, lens, shape, top in (("sentence_lens", sentence_lens, (batch, sentences), words),
                                   ("doc_lens", doc_lens, (batch,), sentences)):
        if not isinstance(lens, torch.Tensor) or tuple(lens.shape) != shape or lens.is_floating_point() \
                or lens.dtype == torch.bool:
            raise ValueError(f"expected {name} as integers of shape {shape} for ids of shape {tuple(ids.shape)}, "
                             f"got {type(lens).__name__} {tuple(getattr(lens, 'shape', ()))} "
                             f"{getattr(lens, 'dtype', '')}")
        if lens.numel() and (int(lens.min()) < 0 or int(lens.max()) > top):
            raise ValueError(f"{name} must lie in [0, {top}], got {int(lens.min())}..{int(lens.max())}")
    sentence_lens, doc_lens = sentence_lens.to(ids.device).long(), doc_lens.to(ids.device).long()
    in_document = torch.arange(sentences, device=ids.device) < doc_lens[:, None]  # (batch, sentences)
    return sentence_lens * in_document, doc_lens


def pool(attention: LearnedQueryPooling | None, H: torch.Tensor, lengths: torch.Tensor):
    """``(pooled (N, size), weights (N, steps))`` of ``H`` ``(N, steps, size)`` over its first ``lengths``
    steps: attention pooling, or (``attention=None``) the mean, i.e. the same weights with equal scores."""
    if attention is None:
        return masked_mean(H, lengths)  # weights 1/length on real steps, 0 elsewhere
    return attention(H, lengths), attention.attention_weights


def pool_words(attention: LearnedQueryPooling | None, H: torch.Tensor, sentence_lens: torch.Tensor):
    """Sentence vectors ``(batch, sentences, size)`` and word weights ``(batch, sentences, words)`` from
    word states ``H`` ``(batch, sentences, words, size)``: every sentence is pooled on its own.
    An empty (padding) sentence gets the zero vector and zero weights."""
    batch, sentences, words, size = H.shape
    s, weights = pool(attention, H.reshape(batch * sentences, words, size), sentence_lens.reshape(-1))
    return s.reshape(batch, sentences, size), weights.reshape(batch, sentences, words)


def _check_options(pooling: str, padding_idx, **sizes) -> None:
    """Sizes positive ints, ``pooling`` one of ``POOLINGS``, ``padding_idx`` an id of the vocabulary (the
    one ``check_documents`` counts as padding, so not a negative index)."""
    for name, value in sizes.items():
        check_positive_int(name, value)
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    if isinstance(padding_idx, bool) or not isinstance(padding_idx, int) or not 0 <= padding_idx < sizes["vocab_size"]:
        raise ValueError(f"padding_idx must be a token id in [0, vocab_size={sizes['vocab_size']}), "
                         f"got {padding_idx!r}")


class HierarchicalAttentionNetwork(nn.Module):
    """Yang et al.'s HAN: word encoder and attention inside each sentence, then sentence encoder and
    attention over the document, then a linear classifier.

    ``forward(ids, sentence_lens=None, doc_lens=None)`` takes ``ids`` ``(batch, sentences, words)``
    and returns logits ``(batch, num_classes)``, ``W_c v + b_c`` (the paper's softmax is left to the
    loss). It keeps ``attention_weights`` (sentence weights ``(batch, sentences)``) and
    ``word_attention_weights`` ``(batch, sentences, words)`` of its last call; padded words and
    sentences get weight exactly 0. ``pooling="mean"`` replaces both attentions by plain means
    (the paper's HN-AVE baseline). Sizes are positive ints, ``padding_idx`` an id in ``[0, vocab_size)``;
    the inputs are those of :func:`check_documents` (an empty batch gives ``(0, num_classes)``).
    """

    def __init__(self, vocab_size: int, embed_size: int, word_hidden: int, sentence_hidden: int,
                 attention_size: int, num_classes: int, pooling: str = "attention", padding_idx: int = 0):
        super().__init__()
        _check_options(pooling, padding_idx, vocab_size=vocab_size, embed_size=embed_size, word_hidden=word_hidden,
                       sentence_hidden=sentence_hidden, attention_size=attention_size, num_classes=num_classes)
        self.pooling, self.padding_idx = pooling, padding_idx
        self.embedding = nn.Embedding(vocab_size, embed_size, padding_idx=padding_idx)
        self.word_encoder = nn.GRU(embed_size, word_hidden, batch_first=True, bidirectional=True)
        self.word_attention = LearnedQueryPooling(2 * word_hidden, attention_size) if pooling == "attention" else None
        self.sentence_encoder = nn.GRU(2 * word_hidden, sentence_hidden, batch_first=True, bidirectional=True)
        self.sentence_attention = (LearnedQueryPooling(2 * sentence_hidden, attention_size)
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
        X = self.embedding(ids).reshape(batch * sentences, words, self.embedding.embedding_dim)  # (B*S, W, E)
        H = run_packed(self.word_encoder, X, sentence_lens.reshape(-1))  # (B*S, W, 2h)
        return H.reshape(batch, sentences, words, H.shape[-1])

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
    padding (at the end) weighted 0. Sizes are positive ints, ``padding_idx`` an id in ``[0, vocab_size)``.
    """

    def __init__(self, vocab_size: int, embed_size: int, hidden: int, attention_size: int, num_classes: int,
                 pooling: str = "mean", padding_idx: int = 0):
        super().__init__()
        _check_options(pooling, padding_idx, vocab_size=vocab_size, embed_size=embed_size, hidden=hidden,
                       attention_size=attention_size, num_classes=num_classes)
        self.pooling, self.padding_idx = pooling, padding_idx
        self.embedding = nn.Embedding(vocab_size, embed_size, padding_idx=padding_idx)
        self.encoder = nn.GRU(embed_size, hidden, batch_first=True, bidirectional=True)
        self.attention = LearnedQueryPooling(2 * hidden, attention_size) if pooling == "attention" else None
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

    ``sentence_weights`` ``(..., sentences)``, ``word_weights`` ``(..., sentences, words)``, floating-point
    weights >= 0; the square root keeps the words of a lightly weighted sentence visible while the words of
    the important sentences stand out.
    """
    for name, weights in (("sentence_weights", sentence_weights), ("word_weights", word_weights)):
        if not isinstance(weights, torch.Tensor) or not weights.is_floating_point():
            raise ValueError(f"{name} must be a floating-point tensor of attention weights, got "
                             f"{getattr(weights, 'dtype', type(weights).__name__)}")
    if checks_read_values(sentence_weights) and bool((sentence_weights < 0).any()):
        raise ValueError("sentence_weights must be >= 0 (attention weights; their square root is taken)")
    if word_weights.shape[:-1] != sentence_weights.shape:
        raise ValueError(f"expected word weights (..., sentences, words) matching sentence weights (..., sentences), "
                         f"got {tuple(word_weights.shape)} and {tuple(sentence_weights.shape)}")
    return sentence_weights.sqrt().unsqueeze(-1) * word_weights
