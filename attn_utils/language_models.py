"""Language models from the Transformer's blocks: decoder-only (GPT) and encoder-only (BERT).

* ``CausalLanguageModel``: token embeddings and positions, ``num_blks`` ``TransformerDecoderBlock``s
  built without cross-attention, pre-norm with a final layer norm, and an output layer tied to the
  embedding (Radford et al., 2018, 2019). It predicts token t + 1 from tokens 0..t and keeps a
  ``KVCache``: it is the stack of ``TransformerDecoder`` without the cross-attention
  (``decode_with_cache``).
* ``MaskedLanguageModel``: a pre-norm ``TransformerEncoder`` and a prediction head for the tokens
  hidden by BERT's masking scheme (Devlin et al., 2019), ``bert_mask`` / ``mask_tokens``.
* Both use GPT's and BERT's GELU in the feed-forward network by default (``activation="relu"`` gives
  the original Transformer's ReLU).
* Their losses are ``losses.causal_lm_loss`` and ``losses.masked_lm_loss``, their trainer
  ``trainers.train_language_model``.
"""

from __future__ import annotations

import torch
from torch import nn

from .checks import check_non_negative_int, check_positive_int, check_probability, check_tokens
from .kv_cache import KVCache
from .losses import IGNORE_INDEX
from .transformer import (
    TransformerDecoderBlock,
    TransformerEncoder,
    build_stack,
    decode_with_cache,
    init_transformer_weights,
)


class CausalLanguageModel(nn.Module):
    """A decoder-only (GPT-style) language model: ``logits, cache = model(X, cache=None)``.

    ``X`` ``(batch, T)`` holds the tokens at positions ``L .. L + T - 1``, where L is the cache's
    ``length`` (0 without one); the logits ``(batch, T, vocab)`` at position t are the model's
    scores for the token at t + 1, computed from tokens 0..t only. ``cache`` is a ``KVCache`` (or a
    plain ``(keys, values)`` pair, whose length is then its number of positions), each
    ``(num_blks, batch, num_kv_heads, P, d / heads)``; the returned cache has ``P + T`` positions, or
    the last ``window``.

    Options of today's models:

    * ``position_scheme``: ``"learned"`` (GPT-2), ``"sinusoidal"`` (the 2017 Transformer), ``"rotary"``
      (RoFormer, LLaMA) or ``"alibi"`` (BLOOM); with the last two, ``max_len`` is no limit.
    * ``num_kv_heads``: grouped-query attention (1: multi-query attention).
    * ``window``: sliding-window attention with a rolling cache of ``window`` positions.
    """

    def __init__(self, vocab_size: int, num_hiddens: int = 128, ffn_num_hiddens: int = 512, num_heads: int = 4,
                 num_blks: int = 2, dropout: float = 0.0, use_bias: bool = False, *, max_len: int = 256,
                 position_scheme: str = "learned", activation: str = "gelu", num_kv_heads: int | None = None,
                 window: int | None = None):
        super().__init__()
        self.num_heads, self.max_len, self.num_hiddens = num_heads, max_len, num_hiddens
        self.num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        self.position_scheme, self.window = position_scheme, window
        self.embedding, self.pos_encoding, self.blks, self.final_norm = build_stack(
            TransformerDecoderBlock, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout, use_bias,
            True, max_len, position_scheme, cross_attention=False, activation=activation, window=window,
            num_kv_heads=num_kv_heads)
        self.dense = nn.Linear(num_hiddens, vocab_size, bias=False)
        self.dense.weight = self.embedding.weight  # tied: one matrix reads and writes tokens
        init_transformer_weights(self, [self.embedding], num_hiddens, tied=self.dense)

    @property
    def attention_weights(self):
        """Each block's ``(batch, heads, T, P + T)`` self-attention weights of the last forward pass."""
        return [blk.attention1.attention_weights for blk in self.blks]

    def empty_cache(self, batch: int, device=None, dtype=None) -> KVCache:
        """A cache of length 0: keys and values, each ``(num_blks, batch, num_kv_heads, 0, d / heads)``."""
        weight = self.embedding.weight
        return KVCache.empty(len(self.blks), batch, self.num_kv_heads, self.num_hiddens // self.num_heads,
                             weight.device if device is None else device, weight.dtype if dtype is None else dtype)

    def _check_cache(self, cache) -> KVCache:
        if isinstance(cache, tuple) and len(cache) == 2:
            cache = KVCache(*cache)  # checks the shapes' form
        if not isinstance(cache, KVCache) or cache.cross_keys is not None:
            raise ValueError(f"cache must be a KVCache of this model (or a (keys, values) pair), got "
                             f"{type(cache).__name__}")
        return cache  # its shapes and device: decode_with_cache (check_cache_fits)

    def forward(self, X, cache=None):
        check_tokens(X, "the language model's input X")
        cache = self.empty_cache(X.shape[0]) if cache is None else self._check_cache(cache)
        return decode_with_cache(self, X, cache)


class MaskedLanguageModel(nn.Module):
    """An encoder-only (BERT-style) masked language model: ``logits = model(X, valid_lens=None)``.

    A pre-norm ``TransformerEncoder`` (every position sees every other one, padding excluded through
    ``valid_lens``), then BERT's prediction head: a dense layer with GELU and a layer norm, and an
    output layer tied to the token embedding, with a bias of its own. Returns ``(batch, steps, vocab)``;
    with ``predict_at``, a boolean ``(batch, steps)`` mask (e.g. ``labels != IGNORE_INDEX``), only the
    logits of those positions, ``(count, vocab)`` in row-major order: training needs no others.
    ``position_scheme`` is ``TransformerEncoder``'s (BERT's is ``"learned"``).
    """

    def __init__(self, vocab_size: int, num_hiddens: int = 128, ffn_num_hiddens: int = 512, num_heads: int = 4,
                 num_blks: int = 2, dropout: float = 0.0, use_bias: bool = False, *, max_len: int = 256,
                 position_scheme: str = "learned", activation: str = "gelu"):
        super().__init__()
        self.encoder = TransformerEncoder(vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout,
                                          use_bias, norm_first=True, max_len=max_len,
                                          position_scheme=position_scheme, activation=activation)
        self.head = nn.Sequential(nn.Linear(num_hiddens, num_hiddens), nn.GELU(), nn.LayerNorm(num_hiddens))
        self.dense = nn.Linear(num_hiddens, vocab_size)
        self.dense.weight = self.encoder.embedding.weight
        init_transformer_weights(self, [self.encoder.embedding], num_hiddens, tied=self.dense)

    @property
    def attention_weights(self):
        return self.encoder.attention_weights

    def forward(self, X, valid_lens=None, predict_at=None):
        hidden = self.encoder(X, valid_lens)  # (batch, steps, d)
        if predict_at is not None:
            if not isinstance(predict_at, torch.Tensor) or predict_at.shape != X.shape \
                    or predict_at.dtype != torch.bool:
                got = (f"{tuple(predict_at.shape)} of dtype {predict_at.dtype}" if isinstance(predict_at, torch.Tensor)
                       else type(predict_at).__name__)
                raise ValueError(f"predict_at must be a boolean mask of shape {tuple(X.shape)}, got {got}")
            hidden = hidden[predict_at]  # (count, d)
        return self.dense(self.head(hidden))  # (batch, steps, vocab) or (count, vocab)


def bert_mask(tokens: torch.Tensor, maskable: torch.Tensor, choose: torch.Tensor, action: torch.Tensor,
              random_tokens: torch.Tensor, mask_id: int, mask_prob: float = 0.15):
    """BERT's masking scheme, deterministic given the random draws: returns ``(inputs, labels)``.

    Every position with ``maskable`` True and ``choose < mask_prob`` is *chosen*; of the chosen ones,
    those with ``action < 0.8`` become ``mask_id``, those with ``0.8 <= action < 0.9`` become
    ``random_tokens`` and the rest keep their token (Devlin et al., 2019: 80% / 10% / 10%). ``labels``
    holds the original token at the chosen positions and ``IGNORE_INDEX`` (-100) elsewhere. All
    arguments but the two numbers are ``(batch, steps)``: ``choose``, ``action`` uniform in [0, 1).
    """
    check_tokens(tokens, "tokens")
    for name, t in [("maskable", maskable), ("choose", choose), ("action", action), ("random_tokens", random_tokens)]:
        if not isinstance(t, torch.Tensor) or t.shape != tokens.shape:
            got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{name} must have the shape of tokens {tuple(tokens.shape)}, got {got}")
    if maskable.dtype != torch.bool:
        raise ValueError(f"maskable must be a boolean tensor, got dtype {maskable.dtype}")
    check_tokens(random_tokens, "random_tokens")  # float ones would be truncated silently
    check_non_negative_int("mask_id", mask_id)
    check_probability("mask_prob", mask_prob, one_allowed=True)
    chosen = maskable & (choose < mask_prob)
    to_mask = chosen & (action < 0.8)
    to_random = chosen & (action >= 0.8) & (action < 0.9)
    inputs = torch.where(to_mask, torch.full_like(tokens, mask_id), tokens)
    inputs = torch.where(to_random, random_tokens.to(tokens.dtype), inputs)
    labels = torch.where(chosen, tokens, torch.full_like(tokens, IGNORE_INDEX))
    return inputs, labels


def mask_tokens(tokens: torch.Tensor, maskable: torch.Tensor, mask_id: int, vocab_size: int, *,
                random_low: int = 0, mask_prob: float = 0.15, generator: torch.Generator | None = None):
    """``bert_mask`` with its draws taken from ``generator`` (on the generator's device, then moved to
    the tokens'): each maskable token is chosen independently with probability ``mask_prob`` (so the
    count per sequence varies; BERT's and RoBERTa's code pick a fixed count), and random replacements
    are uniform over ``random_low .. vocab_size - 1`` (pass the first ordinary token's index to never
    insert ``<pad>``, ``<mask>``, ...)."""
    check_tokens(tokens, "tokens")
    check_positive_int("vocab_size", vocab_size)
    check_non_negative_int("random_low", random_low)
    if not 0 <= random_low < vocab_size:
        raise ValueError(f"random_low must lie in 0..vocab_size - 1 = {vocab_size - 1}, got {random_low}")
    gen_device = generator.device if generator is not None else torch.device("cpu")
    shape = tuple(tokens.shape)
    choose = torch.rand(shape, generator=generator, device=gen_device).to(tokens.device)
    action = torch.rand(shape, generator=generator, device=gen_device).to(tokens.device)
    random_tokens = torch.randint(random_low, vocab_size, shape, generator=generator, device=gen_device)
    return bert_mask(tokens, maskable, choose, action, random_tokens.to(tokens.device), mask_id, mask_prob)
