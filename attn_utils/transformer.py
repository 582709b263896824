"""The Transformer (Vaswani et al., 2017) with d2l's class names, as an ``EncoderDecoder``.

Blocks: ``PositionWiseFFN``, ``AddNorm`` (residual + layer norm), ``TransformerEncoderBlock`` and
``TransformerDecoderBlock``; stacks: ``TransformerEncoder`` and ``TransformerDecoder``;
``make_transformer`` builds a translator that trains and decodes with the same tools as the
recurrent models (``train_seq2seq``, ``greedy_decode``, ``beam_search``).

*Post-norm* (the paper): ``LN(X + sublayer(X))``. *Pre-norm* (``norm_first=True``, as in most
models since): ``X + sublayer(LN(X))``, plus one final layer norm after the stack; the residual
path then carries the input untouched through every block. The defaults follow one rule: the
classes with d2l's names keep d2l's default, post-norm (``norm_first=False``), so they compute what
d2l's do; the models the course builds (``make_transformer`` and the language models) are pre-norm.

Incremental decoding: the decoder's state is a ``KVCache`` (``attn_utils.kv_cache``), every block's
projected self-attention keys and values for the tokens decoded so far and the cross-attention
keys and values of the source, projected once in ``init_state``. Feeding one token then costs one
query per block instead of re-running the whole prefix.

``decode_with_cache`` runs a stack of decoder blocks (embeddings, blocks, final norm, output layer)
on new tokens after a cache: the translator's decoder and the decoder-only language models
(``attn_utils.language_models``) are the same stack, and ``init_transformer_weights`` their one
initialisation.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import nn

from .causal_attention import causal_self_attention, check_position_scheme, self_attention_context
from .checks import (
    autocast_on,
    check_bool,
    check_positive_int,
    check_probability,
    check_token_ids,
    check_tokens,
    check_weights_dtype,
)
from .device import model_device
from .kv_cache import KVCache
from .multihead import MultiHeadAttention
from .positional import LearnedPositionalEncoding, NoPositionalEncoding, PositionalEncoding
from .rotary import rotate
from .seq2seq import Decoder, Encoder, EncoderDecoder, source_lengths

ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU}  # the Transformer's ReLU; GPT's and BERT's GELU


class PositionWiseFFN(nn.Module):
    """d2l's ``PositionWiseFFN``: ``dense2(relu(dense1(X)))``, the same two-layer MLP at every position.

    ``activation="gelu"`` puts the GELU of GPT and BERT in place of the ReLU (the module keeps d2l's
    attribute name ``relu`` either way, so state dicts stay interchangeable). Sizes are positive ints;
    ``forward(X)`` takes ``(..., ffn_num_inputs)`` in the dtype of the weights and returns ``(..., ffn_num_outputs)``.
    """

    def __init__(self, ffn_num_hiddens: int, ffn_num_outputs: int, ffn_num_inputs: int | None = None, *,
                 activation: str = "relu"):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        check_positive_int("ffn_num_hiddens", ffn_num_hiddens)
        check_positive_int("ffn_num_outputs", ffn_num_outputs)
        if ffn_num_inputs is not None:
            check_positive_int("ffn_num_inputs", ffn_num_inputs)  # 0 used to fall back silently to the outputs
        self.dense1 = nn.Linear(ffn_num_inputs or ffn_num_outputs, ffn_num_hiddens)
        self.relu = ACTIVATIONS[activation]()
        self.dense2 = nn.Linear(ffn_num_hiddens, ffn_num_outputs)

    def forward(self, X):
        if not isinstance(X, torch.Tensor) or X.dim() < 1 or X.shape[-1] != self.dense1.in_features:
            got = tuple(X.shape) if isinstance(X, torch.Tensor) else type(X).__name__
            raise ValueError(f"PositionWiseFFN expects inputs (..., {self.dense1.in_features}), got {got}")
        check_weights_dtype(self, X, "PositionWiseFFN")
        return self.dense2(self.relu(self.dense1(X)))


class AddNorm(nn.Module):
    """d2l's ``AddNorm``: ``forward(X, Y) = LN(X + dropout(Y))`` (post-norm).

    ``residual(X, sublayer, norm_first)`` applies a sublayer with this residual connection, either
    post-norm (the same as ``forward(X, sublayer(X))``) or pre-norm ``X + dropout(sublayer(LN(X)))``.
    ``norm_shape`` is a positive int (or a tuple of them), the trailing shape of ``X``; ``X`` and ``Y`` (and a
    sublayer's output) have one shape and the dtype of the layer norm; ``dropout`` is in ``[0, 1)``.
    """

    def __init__(self, norm_shape, dropout: float):
        super().__init__()
        for size in (norm_shape if isinstance(norm_shape, (tuple, list, torch.Size)) else (norm_shape,)):
            check_positive_int("norm_shape", size, hint="(or a tuple of them)")
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        self.ln = nn.LayerNorm(norm_shape)

    def _check(self, X, Y, what: str) -> None:
        """``X`` and ``Y`` must be tensors of one shape ending in ``norm_shape`` (a sublayer that changed the
        shape would otherwise broadcast, or fail inside the layer norm)."""
        norm = tuple(self.ln.normalized_shape)
        for name, T in (("X", X), (what, Y)):
            if not isinstance(T, torch.Tensor) or tuple(T.shape[len(T.shape) - len(norm):]) != norm:
                got = tuple(T.shape) if isinstance(T, torch.Tensor) else type(T).__name__
                raise ValueError(f"AddNorm expects {name} of shape (..., {', '.join(map(str, norm))}), got {got}")
        if X.shape != Y.shape:
            raise ValueError(f"AddNorm adds X and {what}, which must have one shape; got {tuple(X.shape)} and "
                             f"{tuple(Y.shape)}")
        if not autocast_on(X.device.type):  # (autocast runs the layer norm in float32 whatever comes)
            check_weights_dtype(self, X, "AddNorm")
            if Y.dtype != X.dtype:
                raise ValueError(f"AddNorm adds X ({X.dtype}) and {what} ({Y.dtype}), which must have one dtype")

    def forward(self, X, Y):
        self._check(X, Y, "Y")
        return self.ln(self.dropout(Y) + X)

    def residual(self, X, sublayer, norm_first: bool = False):
        if norm_first:
            self._check(X, X, "X")
            Y = sublayer(self.ln(X))
            self._check(X, Y, "the sublayer's output")
            return X + self.dropout(Y)
        return self(X, sublayer(X))


def encoder_context(X: torch.Tensor, position_scheme: str, num_heads: int):
    """The non-causal ``self_attention_context`` of an encoder's input ``X`` (batch, n, d): no mask, ALiBi's
    symmetric bias or rotary's angles for positions 0 .. n - 1."""
    return self_attention_context(X.shape[1], 0, 0, position_scheme=position_scheme, causal=False,
                                  num_heads=num_heads, head_dim=X.shape[-1] // num_heads, device=X.device,
                                  dtype=X.dtype)


class TransformerEncoderBlock(nn.Module):
    """Self-attention then the FFN, each with its residual connection and layer norm (d2l's names).

    ``forward(X, valid_lens=None, context=None)``: ``context`` is the encoder's non-causal
    ``self_attention_context`` for ``position_scheme`` ``"rotary"`` or ``"alibi"`` (computed here when
    not given); the added schemes need none."""

    def __init__(self, num_hiddens: int, ffn_num_hiddens: int, num_heads: int, dropout: float,
                 use_bias: bool = False, *, norm_first: bool = False, activation: str = "relu",
                 position_scheme: str = "sinusoidal"):
        super().__init__()
        check_position_scheme(position_scheme)
        self.norm_first, self.position_scheme = check_bool("norm_first", norm_first), position_scheme
        self.attention = MultiHeadAttention(num_hiddens, num_heads, dropout, use_bias)
        self.addnorm1 = AddNorm(num_hiddens, dropout)
        self.ffn = PositionWiseFFN(ffn_num_hiddens, num_hiddens, activation=activation)
        self.addnorm2 = AddNorm(num_hiddens, dropout)

    def _self_attention(self, X, valid_lens, context):
        if self.position_scheme not in ("rotary", "alibi"):
            return self.attention(X, X, X, valid_lens)
        if context is None:
            context = encoder_context(X, self.position_scheme, self.attention.num_heads)
        queries, (keys, values) = self.attention.project_q(X), self.attention.project_kv(X, X)
        if context.rotary is not None:
            queries, keys = rotate(queries, *context.rotary), rotate(keys, *context.rotary)
        return self.attention.attend_heads(queries, keys, values, valid_lens, context.attn_bias)

    def forward(self, X, valid_lens=None, context=None):
        Y = self.addnorm1.residual(X, lambda Z: self._self_attention(Z, valid_lens, context), self.norm_first)
        return self.addnorm2.residual(Y, self.ffn, self.norm_first)


class TransformerDecoderBlock(nn.Module):
    """Masked self-attention, attention to the encoder's outputs, then the FFN (d2l's names).

    ``forward(X, cache=None, block=0, *, context=None, cross=None, src_valid_lens=None)`` reads ``X``
    ``(batch, T, num_hiddens)`` and returns the block's output, the same shape. Each position attends
    to itself and those before it, never to later ones: within X alone without a ``cache``; with one
    (a ``KVCache`` extended for these T tokens), also to the block's cached positions, and the block
    writes its keys and values into slot ``block`` (``causal_self_attention``). ``context`` is the
    forward pass's ``self_attention_context`` (computed here when not given). ``cross`` is
    ``(keys, values)``, the encoder's outputs projected by ``attention2.project_kv``, each ``(batch,
    heads, S, dh)``, with ``src_valid_lens`` ``(batch,)`` their valid lengths.

    ``cross_attention=False`` builds the block of a decoder-only model (GPT): masked self-attention
    and the FFN only, with no ``attention2``/``addnorm2``; its ``forward`` then takes no ``cross``.
    ``position_scheme`` (``"rotary"`` or ``"alibi"`` act inside the self-attention), ``window`` and
    ``num_kv_heads`` are the options of ``causal_self_attention`` and of ``MultiHeadAttention``.
    """

    def __init__(self, num_hiddens: int, ffn_num_hiddens: int, num_heads: int, dropout: float,
                 use_bias: bool = False, *, norm_first: bool = False, cross_attention: bool = True,
                 activation: str = "relu", position_scheme: str = "sinusoidal", window: int | None = None,
                 num_kv_heads: int | None = None):
        super().__init__()
        check_position_scheme(position_scheme, window)
        self.norm_first = check_bool("norm_first", norm_first)
        self.cross_attention = check_bool("cross_attention", cross_attention)
        self.position_scheme, self.window = position_scheme, window
        self.attention1 = MultiHeadAttention(num_hiddens, num_heads, dropout, use_bias, num_kv_heads=num_kv_heads)
        self.addnorm1 = AddNorm(num_hiddens, dropout)
        if cross_attention:
            self.attention2 = MultiHeadAttention(num_hiddens, num_heads, dropout, use_bias)
            self.addnorm2 = AddNorm(num_hiddens, dropout)
        self.ffn = PositionWiseFFN(ffn_num_hiddens, num_hiddens, activation=activation)
        self.addnorm3 = AddNorm(num_hiddens, dropout)

    def forward(self, X, cache: KVCache | None = None, block: int = 0, *, context=None, cross=None,
                src_valid_lens=None):
        if self.cross_attention != (cross is not None):
            raise ValueError(f"this block was built with cross_attention={self.cross_attention}, so cross must be "
                             f"{'(keys, values)' if self.cross_attention else 'None'}; got "
                             f"{'None' if cross is None else type(cross).__name__}")

        def self_attention(Z):
            return causal_self_attention(self.attention1, Z, cache, block, context,
                                         position_scheme=self.position_scheme, window=self.window)

        X = self.addnorm1.residual(X, self_attention, self.norm_first)
        if self.cross_attention:
            X = self.addnorm2.residual(X, lambda Z: self.attention2.attend(Z, *cross, src_valid_lens), self.norm_first)
        return self.addnorm3.residual(X, self.ffn, self.norm_first)


class StackParts(NamedTuple):
    """The layers a stack of Transformer blocks is made of (``build_stack``), in the order they are built."""

    embedding: nn.Embedding
    pos_encoding: nn.Module
    blks: nn.Sequential
    final_norm: nn.Module


ADDED_POSITIONS = {"sinusoidal": PositionalEncoding, "learned": LearnedPositionalEncoding,
                   "rotary": NoPositionalEncoding, "alibi": NoPositionalEncoding}  # rotary, ALiBi: inside attention


def build_stack(block: type, vocab_size: int, num_hiddens: int, ffn_num_hiddens: int, num_heads: int,
                num_blks: int, dropout: float, use_bias: bool, norm_first: bool, max_len: int,
                position_scheme: str, **block_kwargs) -> StackParts:
    """What the encoder, the decoder and the language models share: token embeddings, positions
    (``position_scheme``, one of ``ADDED_POSITIONS``' keys, also handed to each block), ``num_blks``
    blocks (``blks.block0``, ... as d2l names them; ``block_kwargs`` go to each block) and, for
    pre-norm, the final layer norm (``nn.Identity`` for post-norm). Every size must be a positive int,
    ``use_bias`` and ``norm_first`` ``True`` or ``False``, ``dropout`` in ``[0, 1)``."""
    check_bool("use_bias", use_bias)
    check_bool("norm_first", norm_first)
    for name, size in (("vocab_size", vocab_size), ("num_hiddens", num_hiddens), ("ffn_num_hiddens", ffn_num_hiddens),
                       ("num_heads", num_heads), ("num_blks", num_blks), ("max_len", max_len)):
        check_positive_int(name, size)
    check_position_scheme(position_scheme)
    if position_scheme == "rotary" and num_hiddens % num_heads == 0 and num_hiddens // num_heads % 2:
        raise ValueError(f"rotary positions rotate pairs of features, so d / heads must be even; got num_hiddens="
                         f"{num_hiddens} / num_heads={num_heads} = {num_hiddens // num_heads}")
    embedding = nn.Embedding(vocab_size, num_hiddens)
    pos_encoding = ADDED_POSITIONS[position_scheme](num_hiddens, dropout, max_len)
    blks = nn.Sequential()
    for i in range(num_blks):
        blks.add_module(f"block{i}", block(num_hiddens, ffn_num_hiddens, num_heads, dropout, use_bias,
                                           norm_first=norm_first, position_scheme=position_scheme, **block_kwargs))
    final_norm = nn.LayerNorm(num_hiddens) if norm_first else nn.Identity()
    return StackParts(embedding, pos_encoding, blks, final_norm)


def embed_tokens(stack: nn.Module, X: torch.Tensor, offset: int = 0) -> torch.Tensor:
    """Token embeddings times sqrt(d) (the positions' scale), plus positions from ``offset``: (batch, steps, d).

    ``stack`` is a module holding the ``embedding`` and ``pos_encoding`` of ``build_stack`` and its ``num_hiddens``.
    ``X`` must hold token ids in ``[0, vocab_size)`` (``checks.check_token_ids``: the dtype always, the values
    where they can be read without waiting for a device); a stand-in for the ``nn.Embedding`` checks its own.
    """
    if isinstance(stack.embedding, nn.Embedding):
        check_token_ids(X, stack.embedding.num_embeddings)
        if X.device != stack.embedding.weight.device:
            raise ValueError(f"the token ids are on {X.device} but the model on {stack.embedding.weight.device}; "
                             f"move them with X.to(model_device(model))")
    return stack.pos_encoding(stack.embedding(X) * math.sqrt(stack.num_hiddens), offset)


def init_transformer_weights(model: nn.Module, token_embeddings, num_hiddens: int, tied=None) -> None:
    """The one initialisation of the course's Transformers: Xavier-uniform linear layers with zero biases,
    and token embeddings N(0, 1/d), so that multiplied by sqrt(d) on the way in their entries have unit
    size, like the positional encodings. ``tied`` is an output layer that shares an embedding's matrix
    (it keeps the embedding's values). Layers are initialised in the order of ``model.modules()``."""
    for module in model.modules():
        if isinstance(module, nn.Linear) and module is not tied:
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif any(module is embedding for embedding in token_embeddings):
            nn.init.normal_(module.weight, std=num_hiddens ** -0.5)


def check_cache_fits(stack: nn.Module, cache: KVCache, batch: int) -> None:
    """Raise ``ValueError`` unless ``cache`` is a ``KVCache`` that the decoder stack ``stack`` (see
    ``decode_with_cache``) can extend for ``batch`` rows: keys and values ``(num_blks, batch, kv_heads, P, d /
    heads)`` of this stack, cross-attention keys and values (a translator's) ``(num_blks, batch, heads, S, d /
    heads)``, on the device of its weights and (outside autocast) in their dtype. Reads shapes only
    (``KVCache.shape`` stacks nothing)."""
    if not isinstance(cache, KVCache):
        raise ValueError(f"cache must be a KVCache, got {type(cache).__name__}")
    heads = stack.num_heads
    head_dim, kv_heads, num_blks = stack.num_hiddens // heads, getattr(stack, "num_kv_heads", heads), len(stack.blks)
    shape = cache.shape
    if shape[:3] != (num_blks, batch, kv_heads) or shape[4] != head_dim:
        raise ValueError(f"cache must hold keys and values (num_blks={num_blks}, batch={batch}, kv_heads={kv_heads}, "
                         f"P, d / heads); got {shape}, while this model's d / heads is {head_dim}: a cache of "
                         f"another model or batch?")
    for name in ("cross_keys", "cross_values"):
        cross = getattr(cache, name)
        if cross is not None and (cross.dim() != 5 or cross.shape[:3] != (num_blks, batch, heads)
                                  or cross.shape[4] != head_dim):
            raise ValueError(f"the cache's {name} must be (num_blks={num_blks}, batch={batch}, heads={heads}, S, "
                             f"d / heads={head_dim}), got {tuple(cross.shape)}: a state of another model?")
    device = model_device(stack, cache.device)
    if cache.device != device:
        raise ValueError(f"the cache is on {cache.device} but the model on {device}; move the model or make the "
                         f"cache there (model.empty_cache(batch))")
    dtype = next((p.dtype for p in stack.parameters() if p.is_floating_point()), cache.dtype)
    if cache.dtype != dtype and not autocast_on(device.type):  # under autocast the keys come in its dtype
        raise ValueError(f"the cache holds {cache.dtype} keys and values but the model computes in {dtype}; make the "
                         f"cache with model.empty_cache(batch) (or convert the model)")


def decode_with_cache(stack: nn.Module, X: torch.Tensor, cache: KVCache):
    """Run a decoder stack on ``X`` ``(batch, T)``, the tokens after those of ``cache``: returns ``(logits
    (batch, T, vocab), the cache extended by X)`` (cut to the last ``window`` positions with a window).

    ``stack`` holds ``build_stack``'s parts (decoder blocks), an output layer ``dense`` and the options
    ``position_scheme``, ``window``, ``num_heads`` and ``num_hiddens``; a cache with ``cross_keys`` (a
    translator's) feeds them to each block's cross-attention. What all blocks share (mask, ALiBi
    bias, rotary angles) is computed once, here. A cache of another model (other blocks, heads or head size),
    batch or device is refused by ``check_cache_fits``."""
    T, heads = X.shape[1], stack.num_heads
    if T < 1:
        raise ValueError(f"X must hold at least one new token (batch, steps >= 1), got shape {tuple(X.shape)}")
    check_cache_fits(stack, cache, X.shape[0])
    H = embed_tokens(stack, X, cache.length)  # (batch, T, d), positions L .. L + T - 1
    context = self_attention_context(T, cache.positions, cache.length, position_scheme=stack.position_scheme,
                                     window=stack.window, num_heads=heads, head_dim=stack.num_hiddens // heads,
                                     device=H.device, dtype=H.dtype)
    new = cache.extended(T)
    for i, blk in enumerate(stack.blks):
        cross = None if new.cross_keys is None else (new.cross_keys[i], new.cross_values[i])
        H = blk(H, new, i, context=context, cross=cross, src_valid_lens=new.src_valid_lens)
    return stack.dense(stack.final_norm(H)), new.kept(stack.window)


class TransformerEncoder(Encoder):
    """d2l's ``TransformerEncoder``: embeddings scaled by sqrt(d), positions added, ``num_blks`` blocks.

    ``forward(X, valid_lens=None)`` takes token ids ``(batch, steps)`` in ``[0, vocab_size)`` (int64 or
    int32) and lengths ``(batch,)`` in ``0 .. steps``, and returns ``(batch, steps, num_hiddens)``; afterwards
    ``attention_weights`` lists each block's ``(batch, heads, steps, steps)`` self-attention weights.
    ``position_scheme``: ``"sinusoidal"`` (the paper's), ``"learned"``, ``"rotary"`` or ``"alibi"``
    (symmetric, as an encoder looks both ways).
    """

    def __init__(self, vocab_size: int, num_hiddens: int, ffn_num_hiddens: int, num_heads: int, num_blks: int,
                 dropout: float, use_bias: bool = False, *, norm_first: bool = False, max_len: int = 1000,
                 position_scheme: str = "sinusoidal", activation: str = "relu"):
        super().__init__()
        self.num_hiddens, self.num_heads, self.position_scheme = num_hiddens, num_heads, position_scheme
        self.embedding, self.pos_encoding, self.blks, self.final_norm = build_stack(
            TransformerEncoderBlock, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout, use_bias,
            norm_first, max_len, position_scheme, activation=activation)

    @property
    def attention_weights(self):
        return [blk.attention.attention_weights for blk in self.blks]

    def forward(self, X, valid_lens=None, *args):
        check_tokens(X, "the encoder's input X")
        if valid_lens is not None:
            source_lengths(valid_lens, X.shape[0], X.shape[1], X.device, read_values=False)  # the attention reads them
        X = embed_tokens(self, X)  # (batch, steps, d)
        context = None
        if self.position_scheme in ("rotary", "alibi"):  # once for every block
            context = encoder_context(X, self.position_scheme, self.num_heads)
        for blk in self.blks:
            X = blk(X, valid_lens, context)
        return self.final_norm(X)


class TransformerDecoder(Decoder):
    """The Transformer decoder with a key-value cache (see the module docstring).

    State: a ``KVCache`` whose ``keys``/``values`` ``(num_blks, batch, kv_heads, P, dh)`` hold the P
    tokens decoded so far and whose ``cross_keys``/``cross_values`` ``(num_blks, batch, heads, S, dh)``
    and ``src_valid_lens`` the source's. ``forward(X, state)`` reads the next ``T`` target tokens (all of
    them in training, one at a time when generating) and returns ``(logits, the extended state)``.
    ``position_scheme``, ``window`` and ``num_kv_heads`` are the options of the decoder-only language
    model (``CausalLanguageModel``).

    After a forward pass: ``self_attention_weights`` and ``cross_attention_weights`` list each
    block's ``(batch, heads, T, keys)`` weights; ``attention_weights`` (the course's decoder
    convention, used by ``greedy_decode`` and the heatmaps) is the last block's cross-attention
    averaged over heads, ``(batch, T, S)``.
    """

    has_attention = True

    def __init__(self, vocab_size: int, num_hiddens: int, ffn_num_hiddens: int, num_heads: int, num_blks: int,
                 dropout: float, use_bias: bool = False, *, norm_first: bool = False, max_len: int = 1000,
                 position_scheme: str = "sinusoidal", tie_embeddings: bool = False, window: int | None = None,
                 num_kv_heads: int | None = None):
        super().__init__()
        check_bool("tie_embeddings", tie_embeddings)
        self.num_heads, self.num_hiddens = num_heads, num_hiddens
        self.num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        self.position_scheme, self.window = position_scheme, window
        self.embedding, self.pos_encoding, self.blks, self.final_norm = build_stack(
            TransformerDecoderBlock, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout, use_bias,
            norm_first, max_len, position_scheme, window=window, num_kv_heads=num_kv_heads)
        self.dense = nn.Linear(num_hiddens, vocab_size)
        if tie_embeddings:
            self.dense.weight = self.embedding.weight  # one matrix for reading and writing tokens

    @property
    def self_attention_weights(self):
        return [blk.attention1.attention_weights for blk in self.blks]

    @property
    def cross_attention_weights(self):
        return [blk.attention2.attention_weights for blk in self.blks]

    @property
    def attention_weights(self):
        if not len(self.blks) or self.blks[-1].attention2.attention.attention_weights is None:
            return None
        return self.cross_attention_weights[-1].mean(dim=1)  # (batch, heads, T, S) -> (batch, T, S)

    @attention_weights.setter
    def attention_weights(self, value):
        if value is not None:
            raise AttributeError("TransformerDecoder.attention_weights is computed from its blocks")

    def init_state(self, enc_outputs, src_valid_lens=None, *args) -> KVCache:
        if not isinstance(enc_outputs, torch.Tensor) or enc_outputs.dim() != 3 \
                or enc_outputs.shape[-1] != self.num_hiddens:
            got = tuple(enc_outputs.shape) if isinstance(enc_outputs, torch.Tensor) else type(enc_outputs).__name__
            raise ValueError(f"enc_outputs must have shape (batch, steps, {self.num_hiddens}), got {got}")
        batch = enc_outputs.shape[0]
        if src_valid_lens is not None:
            src_valid_lens = source_lengths(src_valid_lens, batch, enc_outputs.shape[1], enc_outputs.device,
                                            read_values=False)  # integer lengths: read by the cross-attention
        cross = [blk.attention2.project_kv(enc_outputs, enc_outputs) for blk in self.blks]
        cross_k = torch.stack([k for k, _ in cross])  # (num_blks, batch, heads, S, dh)
        cross_v = torch.stack([v for _, v in cross])
        return KVCache.empty(len(self.blks), batch, self.num_kv_heads, self.num_hiddens // self.num_heads,
                             enc_outputs.device, enc_outputs.dtype, cross_keys=cross_k, cross_values=cross_v,
                             src_valid_lens=src_valid_lens)  # nothing decoded yet

    def reorder_state(self, state: KVCache, index: torch.Tensor) -> KVCache:
        return state.reorder(index)

    def forward(self, X, state: KVCache):
        check_tokens(X, "the decoder's input X")
        if not isinstance(state, KVCache) or state.cross_keys is None:
            raise ValueError(f"state must be the KVCache of init_state, got {type(state).__name__}")
        if X.shape[0] != state.cross_keys.shape[1]:
            raise ValueError(f"X has {X.shape[0]} rows but the state was made for a batch of "
                             f"{state.cross_keys.shape[1]}")
        return decode_with_cache(self, X, state)


def make_transformer(src_vocab_size: int, tgt_vocab_size: int, num_hiddens: int = 256, ffn_num_hiddens: int = 1024,
                     num_heads: int = 4, num_blks: int = 2, dropout: float = 0.0, norm_first: bool = True,
                     tie_embeddings: bool = True, position_scheme: str = "sinusoidal", max_len: int = 256,
                     use_bias: bool = False, window: int | None = None,
                     num_kv_heads: int | None = None) -> EncoderDecoder:
    """A Transformer translator, with its config recorded for checkpoints.

    ``init_transformer_weights`` initialises it; with ``tie_embeddings`` the output layer reuses the
    target embedding (Press and Wolf, 2017). ``position_scheme`` applies to both sides (rotary and
    ALiBi inside each self-attention); ``window`` (sliding-window attention) and ``num_kv_heads``
    (grouped-query attention) to the decoder's self-attention. Sizes are positive ints (``num_hiddens`` a
    multiple of ``num_heads``), ``dropout`` is in ``[0, 1)``, the flags are ``True`` or ``False``.
    """
    check_positive_int("src_vocab_size", src_vocab_size)
    check_positive_int("tgt_vocab_size", tgt_vocab_size)
    config = dict(kind="transformer", src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size,
                  num_hiddens=num_hiddens, ffn_num_hiddens=ffn_num_hiddens, num_heads=num_heads, num_blks=num_blks,
                  dropout=dropout, norm_first=norm_first, tie_embeddings=tie_embeddings,
                  position_scheme=position_scheme, max_len=max_len, use_bias=use_bias, window=window,
                  num_kv_heads=num_kv_heads)
    shared = dict(norm_first=norm_first, max_len=max_len, position_scheme=position_scheme)
    encoder = TransformerEncoder(src_vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout,
                                 use_bias, **shared)
    decoder = TransformerDecoder(tgt_vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout,
                                 use_bias, tie_embeddings=tie_embeddings, window=window, num_kv_heads=num_kv_heads,
                                 **shared)
    model = EncoderDecoder(encoder, decoder, config)
    init_transformer_weights(model, (encoder.embedding, decoder.embedding), num_hiddens,
                             tied=decoder.dense if tie_embeddings else None)
    return model


@torch.no_grad()
def transformer_attention(model, src, src_valid_lens, tgt_input) -> dict:
    """Every attention map of one teacher-forced pass, keyed ``"encoder self"``, ``"decoder self"``
    and ``"cross"``: tensors ``(num_blks, batch, heads, queries, keys)`` (the source's padded keys
    get weight 0; causal weights above the diagonal are 0). ``model`` is a Transformer translator
    (``make_transformer``), the other arguments as its forward pass takes them."""
    model.eval()
    model(src, tgt_input, src_valid_lens)
    return {"encoder self": torch.stack(model.encoder.attention_weights),
            "decoder self": torch.stack(model.decoder.self_attention_weights),
            "cross": torch.stack(model.decoder.cross_attention_weights)}
