"""Bahdanau et al. (2015): a bidirectional GRU encoder and a GRU decoder with additive attention.

The equations, with ``i`` the target step and ``j`` the source position (the paper's appendix A):

* annotations ``h_j = [→h_j; ←h_j]`` from a bidirectional GRU over the source;
* initial state ``s_0 = tanh(W_s ←h_1)``, from the backward state at the first source token;
* scores ``e_ij = v_a^T tanh(W_a s_{i-1} + U_a h_j)``, weights ``α_ij = softmax_j(e_ij)`` over the
  real (unpadded) source positions, context ``c_i = Σ_j α_ij h_j``;
* state ``s_i = GRU(s_{i-1}, [E y_{i-1}; c_i])``: the context enters the recurrent input;
* output ``t_i = maxout(U_o s_i + V_o E y_{i-1} + C_o c_i)`` (the maximum of each pair of units),
  ``p(y_i | ...) = softmax(W_o t_i)``: the context enters the output layer too.

The query is the *previous* state ``s_{i-1}``, so the decoder runs one target step at a time.
The scoring is chapter 3's :class:`attn_utils.AdditiveAttention`, which the decoder holds as
``attention`` (``W_a``, ``U_a``, ``v_a`` are its ``W_q``, ``W_k``, ``w_v``), and the weights and the
context come from :func:`attn_utils.attention.attend`, as in every attention layer. ``U_a h_j`` does not
depend on ``i``: it is computed once per sentence, in ``init_state``.
"""

from __future__ import annotations

import torch
from torch import nn

from .attention import AdditiveAttention, attend
from .checks import check_bool, check_positive_int
from .masking import lengths_to_mask
from .seq2seq import (
    Decoder,
    EncoderDecoder,
    Seq2SeqEncoder,
    check_sizes,
    check_source,
    check_state_rows,
    init_seq2seq,
    source_lengths,
)


class BahdanauDecoder(Decoder):
    """The decoder of Bahdanau et al. (2015), for a ``Seq2SeqEncoder(bidirectional=True)``.

    Parameters keep the paper's names: ``W_s`` (initial state), ``attention`` (the additive scoring,
    an ``AdditiveAttention`` whose ``W_q``, ``W_k``, ``w_v`` are the paper's ``W_a``, ``U_a``, ``v_a``),
    ``rnn`` (a ``GRUCell`` reading ``[E y_{i-1}; c_i]``), ``U_o``, ``V_o``, ``C_o`` (deep output,
    ``2 * num_hiddens`` units maxed in pairs) and ``W_o`` (vocabulary). The encoder has ``num_hiddens``
    units per direction, so annotations have ``2 * num_hiddens``.

    State: ``(annotations (batch, src, 2h), U_a annotations (batch, src, a), src_valid_lens
    (batch,), s (batch, h))``. ``forward(X, state)`` takes target token ids ``(batch, steps >= 1)`` in
    ``[0, vocab_size)``; afterwards ``attention_weights`` is ``(batch, steps, src)``. Sizes are positive
    ints (``attention_hiddens`` ``None``: ``num_hiddens``), ``maxout`` is ``True`` or ``False``.
    """

    has_attention = True
    state_batch_dims = (0, 0, 0, 0)

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int, attention_hiddens: int | None = None,
                 maxout: bool = True):
        super().__init__()
        check_sizes(vocab_size=vocab_size, embed_size=embed_size, num_hiddens=num_hiddens)
        if attention_hiddens is not None:  # 0 used to fall back silently to num_hiddens
            check_positive_int("attention_hiddens", attention_hiddens, hint="or None (num_hiddens)")
        check_bool("maxout", maxout)
        h, a = num_hiddens, num_hiddens if attention_hiddens is None else attention_hiddens
        self.num_hiddens, self.maxout = h, maxout
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.W_s = nn.Linear(h, h)
        self.attention = AdditiveAttention(a, 0.0, query_size=h, key_size=2 * h)  # W_a, U_a, v_a
        self.rnn = nn.GRUCell(embed_size + 2 * h, h)
        out = 2 * h if maxout else h
        self.U_o = nn.Linear(h, out)
        self.V_o = nn.Linear(embed_size, out, bias=False)
        self.C_o = nn.Linear(2 * h, out, bias=False)
        self.W_o = nn.Linear(h, vocab_size)
        self.apply(init_seq2seq)

    def init_state(self, enc_all_outputs, src_valid_lens=None, *args):
        outputs, state = enc_all_outputs  # (src, batch, 2h), (2 * layers, batch, h)
        if outputs.shape[-1] != 2 * self.num_hiddens:
            raise ValueError(f"BahdanauDecoder(num_hiddens={self.num_hiddens}) expects annotations of size "
                             f"{2 * self.num_hiddens} from a bidirectional encoder, got {tuple(outputs.shape)}")
        annotations = outputs.transpose(0, 1)  # (batch, src, 2h)
        lens = source_lengths(src_valid_lens, annotations.shape[0], annotations.shape[1], annotations.device)
        s0 = torch.tanh(self.W_s(state[-1]))  # the last layer's backward state, ←h_1: (batch, h)
        return annotations, self.attention.project_keys(annotations), lens, s0  # U_a h_j: (batch, src, a)

    def attend(self, queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, lens: torch.Tensor):
        """Context and weights ``((batch, 2h), (batch, src))`` for the queries ``s_{i-1}`` (batch, h).

        ``keys`` are the annotations as ``U_a`` maps them (``attention.project_keys``, (batch, src, a), as
        ``init_state`` keeps them), ``values`` the annotations (batch, src, 2h), ``lens`` (batch,) the source
        lengths: the same as ``attention(queries[:, None], annotations, annotations, lens)``.
        """
        scores = self.attention.score_projected(queries.unsqueeze(1), keys)  # (batch, 1, src)
        context, weights = attend(scores, values, lengths_to_mask(lens, keys.shape[1]).unsqueeze(1))
        return context.squeeze(1), weights.squeeze(1)  # (batch, 2h), (batch, src)

    def forward(self, X, state):
        ids = check_source(X, self.embedding, "the decoder's input X")
        annotations, keys, lens, s = state
        check_state_rows(X, annotations.shape[0])
        embs = self.embedding(ids)  # (batch, steps, embed)
        contexts, states, weights = [], [], []
        for i in range(embs.shape[1]):
            context, alpha = self.attend(s, keys, annotations, lens)  # query s_{i-1}
            s = self.rnn(torch.cat([embs[:, i], context], dim=-1), s)  # s_i: (batch, h)
            contexts.append(context), states.append(s), weights.append(alpha)
        S, C = torch.stack(states, dim=1), torch.stack(contexts, dim=1)  # (batch, steps, h), (batch, steps, 2h)
        t = self.U_o(S) + self.V_o(embs) + self.C_o(C)  # (batch, steps, 2h) with maxout, else (batch, steps, h)
        if self.maxout:
            t = t.unflatten(-1, (self.num_hiddens, 2)).amax(dim=-1)  # (batch, steps, h, 2) -> (batch, steps, h)
        self.attention_weights = torch.stack(weights, dim=1)  # (batch, steps, src)
        return self.W_o(t), (annotations, keys, lens, s)


def make_bahdanau(src_vocab_size: int, tgt_vocab_size: int, embed_size: int = 256, num_hiddens: int = 256,
                  attention_hiddens: int | None = None, maxout: bool = True, uniform: bool = False) -> EncoderDecoder:
    """Bahdanau et al.'s translator: ``Seq2SeqEncoder(bidirectional=True)`` (one layer, ``num_hiddens``
    per direction) and ``BahdanauDecoder``, with its config recorded for checkpoints.

    ``uniform=True`` is the control for what the soft search brings: ``v_a`` is zero and frozen, so every
    score is 0 and every target word gets the mean of the annotations as its context, a fixed summary of the
    sentence, with the rest of the model (bidirectional encoder, deep output, sizes) unchanged. (``W_a`` and
    ``U_a`` then receive no gradient either: each reaches the loss only through ``v_a``.) Sizes are positive
    ints, ``maxout`` and ``uniform`` ``True`` or ``False``."""
    check_sizes(src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size)
    check_bool("uniform", uniform)
    config = dict(kind="bahdanau", src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size,
                  embed_size=embed_size, num_hiddens=num_hiddens, attention_hiddens=attention_hiddens, maxout=maxout,
                  uniform=uniform)
    encoder = Seq2SeqEncoder(src_vocab_size, embed_size, num_hiddens, 1, bidirectional=True)
    decoder = BahdanauDecoder(tgt_vocab_size, embed_size, num_hiddens, attention_hiddens, maxout)
    if uniform:
        with torch.no_grad():
            decoder.attention.w_v.weight.zero_()  # v_a = 0: every score 0, uniform weights over the real tokens
        decoder.attention.w_v.weight.requires_grad_(False)
    return EncoderDecoder(encoder, decoder, config)
