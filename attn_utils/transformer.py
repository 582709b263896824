"""The Transformer (Vaswani et al., 2017) with d2l's class names, as an ``EncoderDecoder``.

Blocks: ``PositionWiseFFN``, ``AddNorm`` (residual + layer norm), ``TransformerEncoderBlock`` and
``TransformerDecoderBlock``; stacks: ``TransformerEncoder`` and ``TransformerDecoder``;
``make_transformer`` builds a translator that trains and decodes with the same tools as the
recurrent models (``train_seq2seq``, ``greedy_decode``, ``beam_search``).

*Post-norm* (the paper): ``LN(X + sublayer(X))``. *Pre-norm* (``norm_first=True``, as in most
models since): ``X + sublayer(LN(X))``, plus one final layer norm after the stack; the residual
path then carries the input untouched through every block.

Incremental decoding: the decoder's state holds every block's projected self-attention keys and
values for the tokens decoded so far (a key-value cache) and the cross-attention keys and values
of the source, projected once in ``init_state``. Feeding one token then costs one query per block
instead of re-running the whole prefix.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import nn

from .causal_attention import causal_self_attention, check_position_scheme
from .checks import check_tokens
from .multihead import MultiHeadAttention
from .positional import LearnedPositionalEncoding, NoPositionalEncoding, PositionalEncoding
from .seq2seq import Decoder, Encoder, EncoderDecoder, source_lengths

ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU}  # the Transformer's ReLU; GPT's and BERT's GELU


class PositionWiseFFN(nn.Module):
    """d2l's ``PositionWiseFFN``: ``dense2(relu(dense1(X)))``, the same two-layer MLP at every position.

    ``activation="gelu"`` puts the GELU of GPT and BERT in place of the ReLU (the module keeps d2l's
    attribute name ``relu`` either way, so state dicts stay interchangeable).
    """

    def __init__(self, ffn_num_hiddens: int, ffn_num_outputs: int, ffn_num_inputs: int | None = None, *,
                 activation: str = "relu"):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.dense1 = nn.Linear(ffn_num_inputs or ffn_num_outputs, ffn_num_hiddens)
        self.relu = ACTIVATIONS[activation]()
        self.dense2 = nn.Linear(ffn_num_hiddens, ffn_num_outputs)

    def forward(self, X):
        return self.dense2(self.relu(self.dense1(X)))


class AddNorm(nn.Module):
    """d2l's ``AddNorm``: ``forward(X, Y) = LN(X + dropout(Y))`` (post-norm).

    ``residual(X, sublayer, norm_first)`` applies a sublayer with this residual connection, either
    post-norm (the same as ``forward(X, sublayer(X))``) or pre-norm ``X + dropout(sublayer(LN(X)))``.
    """

    def __init__(self, norm_shape, dropout: float):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.ln = nn.LayerNorm(norm_shape)

    def forward(self, X, Y):
        return self.ln(self.dropout(Y) + X)

    def residual(self, X, sublayer, norm_first: bool = False):
        if norm_first:
            return X + self.dropout(sublayer(self.ln(X)))
        return self(X, sublayer(X))


class TransformerEncoderBlock(nn.Module):
    """Self-attention then the FFN, each with its residual connection and layer norm (d2l's names)."""

    def __init__(self, num_hiddens: int, ffn_num_hiddens: int, num_heads: int, dropout: float,
                 use_bias: bool = False, *, norm_first: bool = False, activation: str = "relu"):
        super().__init__()
        self.norm_first = norm_first
        self.attention = MultiHeadAttention(num_hiddens, num_heads, dropout, use_bias)
        self.addnorm1 = AddNorm(num_hiddens, dropout)
        self.ffn = PositionWiseFFN(ffn_num_hiddens, num_hiddens, activation=activation)
        self.addnorm2 = AddNorm(num_hiddens, dropout)

    def forward(self, X, valid_lens=None):
        Y = self.addnorm1.residual(X, lambda Z: self.attention(Z, Z, Z, valid_lens), self.norm_first)
        return self.addnorm2.residual(Y, self.ffn, self.norm_first)


class TransformerDecoderBlock(nn.Module):
    """Masked self-attention, attention to the encoder's outputs, then the FFN (d2l's names).

    ``forward(X, past_k, past_v, cross_k, cross_v, enc_valid_lens)`` reads ``X`` ``(batch, T,
    num_hiddens)``, the tokens at positions ``P .. P + T - 1`` where P is the number of cached
    positions in ``past_k``/``past_v`` ``(batch, heads, P, dh)``; each position attends to the
    cached ones and to itself and those before it, never to later ones. Returns the block's output
    and the cache extended by this call's keys and values.

    ``cross_attention=False`` builds the block of a decoder-only model (GPT): masked self-attention
    and the FFN only, with no ``attention2``/``addnorm2``; its ``forward`` then takes
    ``cross_k=cross_v=None``. ``positions`` (``"rotary"`` or ``"alibi"`` act inside the
    self-attention), ``window`` and ``num_kv_heads`` are the options of ``causal_self_attention``
    and of ``MultiHeadAttention``; ``forward``'s ``offset`` is the position of X's first token
    (default P, which a rolling cache no longer equals).
    """

    def __init__(self, num_hiddens: int, ffn_num_hiddens: int, num_heads: int, dropout: float,
                 use_bias: bool = False, *, norm_first: bool = False, cross_attention: bool = True,
                 activation: str = "relu", positions: str = "sinusoidal", window: int | None = None,
                 num_kv_heads: int | None = None):
        super().__init__()
        check_position_scheme(positions, window)
        self.norm_first = norm_first
        self.cross_attention = cross_attention
        self.positions, self.window = positions, window
        self.attention1 = MultiHeadAttention(num_hiddens, num_heads, dropout, use_bias, num_kv_heads=num_kv_heads)
        self.addnorm1 = AddNorm(num_hiddens, dropout)
        if cross_attention:
            self.attention2 = MultiHeadAttention(num_hiddens, num_heads, dropout, use_bias)
            self.addnorm2 = AddNorm(num_hiddens, dropout)
        self.ffn = PositionWiseFFN(ffn_num_hiddens, num_hiddens, activation=activation)
        self.addnorm3 = AddNorm(num_hiddens, dropout)

    def forward(self, X, past_k, past_v, cross_k=None, cross_v=None, enc_valid_lens=None, *, offset=None):
        if self.cross_attention != (cross_k is not None and cross_v is not None):
            expected = "tensors" if self.cross_attention else "None"
            got = "None" if cross_k is None or cross_v is None else "tensors"
            raise ValueError(f"this block was built with cross_attention={self.cross_attention}, so cross_k and "
                             f"cross_v must be {expected}; got {got}")
        cache = {}
        offset = past_k.shape[2] if offset is None else offset

        def self_attention(Z):
            output, cache["k"], cache["v"] = causal_self_attention(self.attention1, Z, past_k, past_v, offset,
                                                                   self.positions, self.window)
            return output

        X = self.addnorm1.residual(X, self_attention, self.norm_first)
        if self.cross_attention:
            X = self.addnorm2.residual(X, lambda Z: self.attention2.attend(Z, cross_k, cross_v, enc_valid_lens),
                                       self.norm_first)
        return self.addnorm3.residual(X, self.ffn, self.norm_first), cache["k"], cache["v"]


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
    (``position_scheme``, one of ``ADDED_POSITIONS``' keys), ``num_blks`` blocks (``blks.block0``, ...
    as d2l names them; ``block_kwargs`` go to each block) and, for pre-norm, the final layer norm
    (``nn.Identity`` for post-norm)."""
    if position_scheme not in ADDED_POSITIONS:
        raise ValueError(f"positions must be one of {tuple(ADDED_POSITIONS)}, got {position_scheme!r}")
    embedding = nn.Embedding(vocab_size, num_hiddens)
    pos_encoding = ADDED_POSITIONS[position_scheme](num_hiddens, dropout, max_len)
    blks = nn.Sequential()
    for i in range(num_blks):
        blks.add_module(f"block{i}", block(num_hiddens, ffn_num_hiddens, num_heads, dropout, use_bias,
                                           norm_first=norm_first, **block_kwargs))
    final_norm = nn.LayerNorm(num_hiddens) if norm_first else nn.Identity()
    return StackParts(embedding, pos_encoding, blks, final_norm)


def embed_tokens(stack: nn.Module, X: torch.Tensor, offset: int = 0) -> torch.Tensor:
    """Token embeddings times sqrt(d) (the positions' scale), plus positions from ``offset``: (batch, steps, d).

    ``stack`` is a module holding the ``embedding`` and ``pos_encoding`` of ``build_stack`` and its ``num_hiddens``.
    """
    return stack.pos_encoding(stack.embedding(X) * math.sqrt(stack.num_hiddens), offset)


class TransformerEncoder(Encoder):
    """d2l's ``TransformerEncoder``: embeddings scaled by sqrt(d), positions added, ``num_blks`` blocks.

    ``forward(X, valid_lens=None)`` returns ``(batch, steps, num_hiddens)``; afterwards
    ``attention_weights`` lists each block's ``(batch, heads, steps, steps)`` self-attention weights.
    """

    def __init__(self, vocab_size: int, num_hiddens: int, ffn_num_hiddens: int, num_heads: int, num_blks: int,
                 dropout: float, use_bias: bool = False, *, norm_first: bool = False, max_len: int = 1000,
                 learned_positions: bool = False, activation: str = "relu"):
        super().__init__()
        self.num_hiddens = num_hiddens
        self.embedding, self.pos_encoding, self.blks, self.final_norm = build_stack(
            TransformerEncoderBlock, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout, use_bias,
            norm_first, max_len, "learned" if learned_positions else "sinusoidal", activation=activation)

    @property
    def attention_weights(self):
        return [blk.attention.attention_weights for blk in self.blks]

    def forward(self, X, valid_lens=None, *args):
        check_tokens(X, "the encoder's input X")
        if valid_lens is not None:
            source_lengths(valid_lens, X.shape[0], X.shape[1], X.device)  # checks the shape
        X = embed_tokens(self, X)  # (batch, steps, d)
        for blk in self.blks:
            X = blk(X, valid_lens)
        return self.final_norm(X)


class TransformerDecoder(Decoder):
    """The Transformer decoder with a key-value cache (see the module docstring).

    State: ``(enc_valid_lens, self_k, self_v, cross_k, cross_v)`` with ``self_k``/``self_v``
    ``(num_blks, batch, heads, P, dh)`` for the P tokens decoded so far and ``cross_k``/``cross_v``
    ``(num_blks, batch, heads, S, dh)``. ``forward(X, state)`` reads the next ``T`` target tokens
    (all of them in training, one at a time when generating).

    After a forward pass: ``self_attention_weights`` and ``cross_attention_weights`` list each
    block's ``(batch, heads, T, keys)`` weights; ``attention_weights`` (the course's decoder
    convention, used by ``greedy_decode`` and the heatmaps) is the last block's cross-attention
    averaged over heads, ``(batch, T, S)``.
    """

    state_batch_dims = (0, 1, 1, 1, 1)
    has_attention = True

    def __init__(self, vocab_size: int, num_hiddens: int, ffn_num_hiddens: int, num_heads: int, num_blks: int,
                 dropout: float, use_bias: bool = False, *, norm_first: bool = False, max_len: int = 1000,
                 learned_positions: bool = False, tie_embeddings: bool = False):
        super().__init__()
        self.num_heads, self.num_hiddens = num_heads, num_hiddens
        self.embedding, self.pos_encoding, self.blks, self.final_norm = build_stack(
            TransformerDecoderBlock, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout, use_bias,
            norm_first, max_len, "learned" if learned_positions else "sinusoidal")
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

    def init_state(self, enc_outputs, enc_valid_lens=None, *args):
        if not isinstance(enc_outputs, torch.Tensor) or enc_outputs.dim() != 3 \
                or enc_outputs.shape[-1] != self.num_hiddens:
            got = tuple(enc_outputs.shape) if isinstance(enc_outputs, torch.Tensor) else type(enc_outputs).__name__
            raise ValueError(f"enc_outputs must have shape (batch, steps, {self.num_hiddens}), got {got}")
        batch = enc_outputs.shape[0]
        if enc_valid_lens is not None:
            enc_valid_lens = source_lengths(enc_valid_lens, batch, enc_outputs.shape[1], enc_outputs.device)
        cross = [blk.attention2.project_kv(enc_outputs, enc_outputs) for blk in self.blks]
        cross_k = torch.stack([k for k, _ in cross])  # (num_blks, batch, heads, S, dh)
        cross_v = torch.stack([v for _, v in cross])
        dh = self.num_hiddens // self.num_heads
        empty = enc_outputs.new_zeros(len(self.blks), batch, self.num_heads, 0, dh)  # nothing decoded yet
        return enc_valid_lens, empty, empty, cross_k, cross_v

    def forward(self, X, state):
        check_tokens(X, "the decoder's input X")
        enc_valid_lens, self_k, self_v, cross_k, cross_v = state
        if X.shape[0] != cross_k.shape[1]:
            raise ValueError(f"X has {X.shape[0]} rows but the state was made for a batch of {cross_k.shape[1]}")
        offset = self_k.shape[3]  # tokens already decoded
        X = embed_tokens(self, X, offset)  # (batch, T, d)
        new_k, new_v = [], []
        for i, blk in enumerate(self.blks):
            X, k, v = blk(X, self_k[i], self_v[i], cross_k[i], cross_v[i], enc_valid_lens)
            new_k.append(k)
            new_v.append(v)
        logits = self.dense(self.final_norm(X))  # (batch, T, vocab)
        return logits, (enc_valid_lens, torch.stack(new_k), torch.stack(new_v), cross_k, cross_v)


def make_transformer(src_vocab_size: int, tgt_vocab_size: int, num_hiddens: int = 256, ffn_num_hiddens: int = 1024,
                     num_heads: int = 4, num_blks: int = 2, dropout: float = 0.0, norm_first: bool = True,
                     tie_embeddings: bool = True, learned_positions: bool = False, max_len: int = 256,
                     use_bias: bool = False) -> EncoderDecoder:
    """A Transformer translator, with its config recorded for checkpoints.

    Embeddings start at N(0, 1/d) so that, multiplied by sqrt(d), the tokens enter with unit-size
    entries like the positional encodings; with ``tie_embeddings`` the output layer reuses the
    target embedding (Press and Wolf, 2017). Linear layers use Xavier-uniform initialisation.
    """
    config = dict(kind="transformer", src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size,
                  num_hiddens=num_hiddens, ffn_num_hiddens=ffn_num_hiddens, num_heads=num_heads, num_blks=num_blks,
                  dropout=dropout, norm_first=norm_first, tie_embeddings=tie_embeddings,
                  learned_positions=learned_positions, max_len=max_len, use_bias=use_bias)
    shared = dict(norm_first=norm_first, max_len=max_len, learned_positions=learned_positions)
    encoder = TransformerEncoder(src_vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout,
                                 use_bias, **shared)
    decoder = TransformerDecoder(tgt_vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout,
                                 use_bias, tie_embeddings=tie_embeddings, **shared)
    model = EncoderDecoder(encoder, decoder, config)
    token_embeddings = (encoder.embedding, decoder.embedding)  # not the learned positions, if any
    for module in model.modules():
        if isinstance(module, nn.Linear) and not (tie_embeddings and module is decoder.dense):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif any(module is embedding for embedding in token_embeddings):
            nn.init.normal_(module.weight, std=num_hiddens ** -0.5)
    return model


@torch.no_grad()
def greedy_decode_uncached(model, src, src_valid_len, bos: int, eos: int, max_len: int) -> list[list[int]]:
    """Greedy decoding that re-runs the decoder on the whole prefix at every step (no key-value
    cache), for comparison with ``greedy_decode``, which feeds one token at a time."""
    model.eval()
    args = () if src_valid_len is None else (src_valid_len,)
    state = model.decoder.init_state(model.encoder(src, *args), *args)
    prefix = torch.full((src.shape[0], 1), bos, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        logits, _ = model.decoder(prefix, state)  # the fresh state every time: (batch, steps, vocab)
        token = logits[:, -1].argmax(dim=-1)
        prefix = torch.cat([prefix, token.unsqueeze(1)], dim=1)
        done = done | (token == eos)
        if bool(done.all()):
            break
    out = []
    for row in prefix[:, 1:].tolist():
        out.append(row[:row.index(eos)] if eos in row else row)
    return out


@torch.no_grad()
def transformer_attention(model, src, src_valid_len, tgt_input) -> dict:
    """Every attention map of one teacher-forced pass, keyed ``"encoder self"``, ``"decoder self"``
    and ``"cross"``: tensors ``(num_blks, batch, heads, queries, keys)`` (the source's padded keys
    get weight 0; causal weights above the diagonal are 0)."""
    model.eval()
    model(src, tgt_input, src_valid_len)
    return {"encoder self": torch.stack(model.encoder.attention_weights),
            "decoder self": torch.stack(model.decoder.self_attention_weights),
            "cross": torch.stack(model.decoder.cross_attention_weights)}
