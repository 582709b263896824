"""Language models from the Transformer's blocks: decoder-only (GPT) and encoder-only (BERT).

* ``CausalLanguageModel``: token embeddings and positions, ``num_blks`` ``TransformerDecoderBlock``s
  built without cross-attention, pre-norm with a final layer norm, and an output layer tied to the
  embedding (Radford et al., 2018, 2019). It predicts token t + 1 from tokens 0..t and keeps a
  key-value cache with the convention of ``TransformerDecoder``.
* ``MaskedLanguageModel``: a pre-norm ``TransformerEncoder`` and a prediction head for the tokens
  hidden by BERT's masking scheme (Devlin et al., 2019), ``bert_mask`` / ``mask_tokens``.
* Both use GPT's and BERT's GELU in the feed-forward network by default (``activation="relu"`` gives
  the original Transformer's ReLU).
* ``train_language_model``: one small training loop for both (Adam, warm-up, linear decay, clipping).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

from .checks import check_tokens
from .training_loop import History, fit
from .transformer import TransformerDecoderBlock, TransformerEncoder, build_stack, embed_tokens

IGNORE_INDEX = -100  # label of the positions that do not count in the loss (torch's cross-entropy default)


def _init_weights(model: nn.Module, embedding: nn.Embedding, num_hiddens: int) -> None:
    """As ``make_transformer``: Xavier-uniform linear layers, token embeddings N(0, 1/d) (times sqrt(d) on
    the way in, so they enter with unit-size entries); the tied output layer keeps the embedding's values."""
    for module in model.modules():
        if isinstance(module, nn.Linear) and module.weight is not embedding.weight:
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
    nn.init.normal_(embedding.weight, std=num_hiddens ** -0.5)


class KVCache(NamedTuple):
    """A ``CausalLanguageModel``'s key-value cache: ``keys`` and ``values``, each ``(num_blks, batch,
    num_kv_heads, P, d / heads)``, and ``length``, how many tokens came before (the position of the next
    one). ``length == P`` unless a sliding window keeps only the last ``window`` positions."""

    keys: torch.Tensor
    values: torch.Tensor
    length: int

    @property
    def nbytes(self) -> int:
        """The memory the keys and values take."""
        return self.keys.nbytes + self.values.nbytes


class CausalLanguageModel(nn.Module):
    """A decoder-only (GPT-style) language model: ``logits, cache = model(X, cache=None)``.

    ``X`` ``(batch, T)`` holds the tokens at positions ``L .. L + T - 1``, where L is the cache's
    ``length`` (0 without one); the logits ``(batch, T, vocab)`` at position t are the model's
    scores for the token at t + 1, computed from tokens 0..t only. ``cache`` is a ``KVCache`` (or a
    plain ``(keys, values)`` pair, whose length is then its number of positions), each
    ``(num_blks, batch, num_kv_heads, P, d / heads)`` (the layout of ``TransformerDecoder``'s
    ``self_k``/``self_v``); the returned cache has ``P + T`` positions, or the last ``window``.

    Options of today's models:

    * ``positions``: ``"learned"`` (GPT-2), ``"sinusoidal"`` (the 2017 Transformer), ``"rotary"``
      (RoFormer, LLaMA) or ``"alibi"`` (BLOOM); with the last two, ``max_len`` is no limit.
    * ``num_kv_heads``: grouped-query attention (1: multi-query attention).
    * ``window``: sliding-window attention with a rolling cache of ``window`` positions.
    """

    def __init__(self, vocab_size: int, num_hiddens: int = 128, ffn_num_hiddens: int = 512, num_heads: int = 4,
                 num_blks: int = 2, dropout: float = 0.0, use_bias: bool = False, *, max_len: int = 256,
                 positions: str = "learned", activation: str = "gelu", num_kv_heads: int | None = None,
                 window: int | None = None):
        super().__init__()
        self.num_heads, self.max_len, self.num_hiddens = num_heads, max_len, num_hiddens
        self.num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        self.positions, self.window = positions, window
        self.embedding, self.pos_encoding, self.blks, self.final_norm = build_stack(
            TransformerDecoderBlock, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout, use_bias,
            True, max_len, positions, cross_attention=False, activation=activation, positions=positions,
            window=window, num_kv_heads=num_kv_heads)
        self.dense = nn.Linear(num_hiddens, vocab_size, bias=False)
        self.dense.weight = self.embedding.weight  # tied: one matrix reads and writes tokens
        _init_weights(self, self.embedding, num_hiddens)

    @property
    def attention_weights(self):
        """Each block's ``(batch, heads, T, P + T)`` self-attention weights of the last forward pass."""
        return [blk.attention1.attention_weights for blk in self.blks]

    def empty_cache(self, batch: int, device=None, dtype=None) -> KVCache:
        """A cache of length 0: keys and values, each ``(num_blks, batch, num_kv_heads, 0, d / heads)``."""
        weight = self.embedding.weight
        empty = torch.zeros(len(self.blks), batch, self.num_kv_heads, 0, self.num_hiddens // self.num_heads,
                            device=weight.device if device is None else device,
                            dtype=weight.dtype if dtype is None else dtype)
        return KVCache(empty, empty, 0)

    def _check_cache(self, cache, batch: int) -> KVCache:
        if not isinstance(cache, tuple) or len(cache) not in (2, 3):
            raise ValueError(f"cache must be a KVCache (keys, values, length) or a (keys, values) pair, got "
                             f"{type(cache).__name__}")
        past_k, past_v = cache[:2]
        expected = (len(self.blks), batch, self.num_kv_heads)
        if not isinstance(past_k, torch.Tensor) or not isinstance(past_v, torch.Tensor) or past_k.dim() != 5 \
                or past_k.shape != past_v.shape or past_k.shape[:3] != expected:
            shapes = [tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__ for t in (past_k, past_v)]
            raise ValueError(f"cache must be (keys, values), each (num_blks={expected[0]}, batch={batch}, "
                             f"kv_heads={expected[2]}, P, d / heads); got {shapes[0]} and {shapes[1]}")
        length = cache[2] if len(cache) == 3 else past_k.shape[3]
        if isinstance(length, bool) or not isinstance(length, int) or length < past_k.shape[3]:
            raise ValueError(f"the cache's length (tokens seen) must be an int of at least its {past_k.shape[3]} "
                             f"positions, got {length!r}")
        return KVCache(past_k, past_v, length)

    def forward(self, X, cache=None):
        check_tokens(X, "the language model's input X")
        past_k, past_v, length = self.empty_cache(X.shape[0]) if cache is None else self._check_cache(cache, X.shape[0])
        X = embed_tokens(self, X, length)  # (batch, T, d), positions L .. L + T - 1
        new_k, new_v = [], []
        for i, blk in enumerate(self.blks):
            X, k, v = blk(X, past_k[i], past_v[i], offset=length)
            new_k.append(k)
            new_v.append(v)
        logits = self.dense(self.final_norm(X))  # (batch, T, vocab)
        # keys and values: (num_blks, batch, kv_heads, P + T or window, dh) each
        return logits, KVCache(torch.stack(new_k), torch.stack(new_v), length + X.shape[1])


def causal_lm_loss(model: CausalLanguageModel, tokens: torch.Tensor, pad: int) -> torch.Tensor:
    """Mean cross-entropy of predicting ``tokens[:, 1:]`` from ``tokens[:, :-1]`` (``<pad>`` targets do
    not count). ``tokens`` ``(batch, steps)`` start with ``<bos>``; padding sits at the end of each row, so
    with the causal mask no real position ever sees it."""
    check_tokens(tokens, "tokens")
    if tokens.shape[1] < 2:
        raise ValueError(f"tokens must have at least 2 steps (an input and a target), got shape {tuple(tokens.shape)}")
    logits, _ = model(tokens[:, :-1])  # (batch, steps - 1, vocab)
    targets = tokens[:, 1:].masked_fill(tokens[:, 1:] == pad, IGNORE_INDEX)
    if not bool((targets != IGNORE_INDEX).any()):
        raise ValueError("the batch has no target token to learn from (every target is padding)")
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1),
                           ignore_index=IGNORE_INDEX)


class MaskedLanguageModel(nn.Module):
    """An encoder-only (BERT-style) masked language model: ``logits = model(X, valid_lens=None)``.

    A pre-norm ``TransformerEncoder`` (every position sees every other one, padding excluded through
    ``valid_lens``), then BERT's prediction head: a dense layer with GELU and a layer norm, and an
    output layer tied to the token embedding, with a bias of its own. Returns ``(batch, steps, vocab)``;
    with ``positions``, a boolean ``(batch, steps)`` mask (e.g. ``labels != IGNORE_INDEX``), only the
    logits of those positions, ``(count, vocab)`` in row-major order: training needs no others.
    """

    def __init__(self, vocab_size: int, num_hiddens: int = 128, ffn_num_hiddens: int = 512, num_heads: int = 4,
                 num_blks: int = 2, dropout: float = 0.0, use_bias: bool = False, *, max_len: int = 256,
                 learned_positions: bool = True, activation: str = "gelu"):
        super().__init__()
        self.encoder = TransformerEncoder(vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout,
                                          use_bias, norm_first=True, max_len=max_len,
                                          learned_positions=learned_positions, activation=activation)
        self.head = nn.Sequential(nn.Linear(num_hiddens, num_hiddens), nn.GELU(), nn.LayerNorm(num_hiddens))
        self.dense = nn.Linear(num_hiddens, vocab_size)
        self.dense.weight = self.encoder.embedding.weight
        _init_weights(self, self.encoder.embedding, num_hiddens)

    @property
    def attention_weights(self):
        return self.encoder.attention_weights

    def forward(self, X, valid_lens=None, positions=None):
        hidden = self.encoder(X, valid_lens)  # (batch, steps, d)
        if positions is not None:
            if positions.shape != X.shape or positions.dtype != torch.bool:
                raise ValueError(f"positions must be a boolean mask of shape {tuple(X.shape)}, got "
                                 f"{tuple(positions.shape)} of dtype {positions.dtype}")
            hidden = hidden[positions]  # (count, d)
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
    if not 0.0 <= mask_prob <= 1.0:
        raise ValueError(f"mask_prob must lie in [0, 1], got {mask_prob!r}")
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
    if not 0 <= random_low < vocab_size:
        raise ValueError(f"random_low must lie in 0..vocab_size - 1 = {vocab_size - 1}, got {random_low}")
    gen_device = generator.device if generator is not None else torch.device("cpu")
    shape = tuple(tokens.shape)
    choose = torch.rand(shape, generator=generator, device=gen_device).to(tokens.device)
    action = torch.rand(shape, generator=generator, device=gen_device).to(tokens.device)
    random_tokens = torch.randint(random_low, vocab_size, shape, generator=generator, device=gen_device)
    return bert_mask(tokens, maskable, choose, action, random_tokens.to(tokens.device), mask_id, mask_prob)


def masked_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the chosen positions only (``labels != IGNORE_INDEX``).

    ``logits`` ``(batch, steps, vocab)`` with ``labels`` ``(batch, steps)``, or the logits of the chosen
    positions only, ``(count, vocab)`` (``model(X, valid_lens, positions=labels != IGNORE_INDEX)``).
    """
    if logits.dim() == 2 and logits.shape[0] == int((labels != IGNORE_INDEX).sum()):
        labels = labels[labels != IGNORE_INDEX]  # (count,), the same row-major order
        logits = logits.unsqueeze(0)
        labels = labels.unsqueeze(0)
    if logits.dim() != 3 or labels.shape != logits.shape[:2]:
        raise ValueError(f"expected logits (batch, steps, vocab) and labels (batch, steps), got "
                         f"{tuple(logits.shape)} and {tuple(labels.shape)}")
    if not bool((labels != IGNORE_INDEX).any()):
        raise ValueError("no position was chosen for prediction (every label is IGNORE_INDEX): the loss is undefined")
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1),
                           ignore_index=IGNORE_INDEX)


def train_language_model(model: nn.Module, batch_loss: Callable[[nn.Module, int], torch.Tensor], *,
                         max_steps: int | None = None, time_budget: float | None = None, lr: float = 1e-3,
                         warmup: int = 100, clip: float = 1.0, betas=(0.9, 0.98), progress: bool = True,
                         desc: str = "training", **fit_options) -> History:
    """Train ``model`` with ``fit`` on ``batch_loss(model, step)``; return the ``History``.

    Adam with linear warm-up over ``warmup`` steps, then linear decay to 0 at the end of the budget,
    and gradient clipping at norm ``clip``, as ``train_seq2seq``. The model is left in eval mode.
    ``fit_options`` go to ``fit`` (e.g. ``optimizer="adamw", weight_decay=0.1``, ``evaluate``,
    ``eval_every``).
    """
    return fit(model, batch_loss, max_steps=max_steps, time_budget=time_budget, lr=lr, warmup=warmup, clip=clip,
               betas=betas, progress=progress, desc=desc, **fit_options)
