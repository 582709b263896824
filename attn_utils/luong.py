"""Luong et al. (2015): global and local attention on the current decoder state, with input feeding.

At target step ``t`` (counted from 0) the stacked GRU decoder produces its top state ``h_t``; then

* scores ``score(h_t, h̄_s)`` against every encoder state ``h̄_s``: ``dot`` ``h_tᵀ h̄_s``,
  ``general`` ``h_tᵀ W_a h̄_s`` or ``concat`` ``v_aᵀ tanh(W_a [h_t; h̄_s])``; ``uniform`` (0 for
  every position: equal weights) is the ablation that keeps everything of the model but the choice
  of where to look;
* weights ``a_t = softmax(scores)`` (global attention), or local attention: only the positions
  ``s`` of the window ``|s − p_t| ≤ D`` count (the softmax runs over the window; the rest get
  exactly 0), with the centre

  - ``local="monotonic"`` (local-m): ``p_t = t``, kept inside the sentence (``min(t, S − 1)``),
    and the window's weights used as they are;
  - ``local="predictive"`` (local-p): ``p_t = S · sigmoid(v_pᵀ tanh(W_p h_t)) ∈ [0, S]``, and the
    window's weights multiplied by a Gaussian ``exp(−(s − p_t)² / (2σ²))`` with ``σ = D / 2``;

  (``S`` is each sentence's own length; near the sentence's edges the window simply holds fewer
  positions);
* context ``c_t = Σ_s a_t(s) h̄_s``, attentional state ``h̃_t = tanh(W_c [c_t; h_t])`` and output
  ``softmax(W_s h̃_t)``;
* input feeding: the next step's GRU input is ``[E y_t; h̃_t]``, so the decoder knows where it
  looked before. Without it, all target steps are computed at once.

The scores are chapter 3's layers, which the decoder holds as ``attention`` (``DotProductAttention``,
``GeneralAttention``, ``ConcatAttention`` or ``UniformAttention``, picked by name from
``attention.SCORES``), and the global and local-m weights and contexts come from
:func:`attn_utils.attention.attend`, as in every attention layer.

``scaled=True`` divides the dot and general scores by ``sqrt(h)``, as Vaswani et al. (2017) do. The
paper does not; chapter 6 measures why this course's GRU translators need it: on states whose entries
are near ±1 the unscaled scores start so large that the softmax is already one-hot, and its gradient
too small for attention to learn where to look.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .attention import attend, score_layer
from .checks import check_bool, check_non_negative_int, check_positive_int, check_probability, checks_read_values
from .masking import check_length_values, lengths_to_mask, masked_softmax
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

#: the scores the decoder offers, by their names in ``attention.SCORES``
SCORES = ("dot", "general", "concat", "uniform")
LOCAL_MODES = (None, "monotonic", "predictive")


def luong_score_layer(score: str, num_hiddens: int, scaled: bool = False):
    """The layer of ``attention.SCORES`` that ``LuongDecoder(score=...)`` holds, for states of size ``num_hiddens``:
    dot and general divided by ``sqrt(h)`` when ``scaled`` (concat is bounded by tanh: never scaled), general's
    ``W_a`` Xavier-initialised, as ``init_seq2seq`` does the decoder's other weights."""
    h, scale = num_hiddens, (1.0 / math.sqrt(num_hiddens) if scaled else 1.0)
    options = {"dot": {"scale": scale},
               "general": {"query_size": h, "key_size": h, "scale": scale, "init": nn.init.xavier_uniform_},
               "concat": {"num_hiddens": h, "query_size": h, "key_size": h},
               "uniform": {}}
    return score_layer(score, SCORES, **options.get(score, {}))


def local_window(centres: torch.Tensor, src_valid_lens: torch.Tensor, num_positions: int, half_width: int):
    """The window ``|s − p_t| ≤ D`` within each sentence: ``(mask, distances)``, both (batch, Q, src).

    ``centres`` ``p_t`` are floating-point (batch, Q), ``src_valid_lens`` integers (batch,); positions past a
    sentence's length are outside its window. ``num_positions`` is an int >= 0, ``half_width`` (D) a positive int.
    """
    if not isinstance(centres, torch.Tensor) or centres.dim() != 2 or not centres.is_floating_point():
        raise ValueError(f"centres must be a floating-point tensor (batch, Q), got "
                         f"{tuple(getattr(centres, 'shape', ()))} {getattr(centres, 'dtype', type(centres).__name__)}")
    if not isinstance(src_valid_lens, torch.Tensor) or src_valid_lens.shape != centres.shape[:1] \
            or src_valid_lens.is_floating_point() or src_valid_lens.dtype == torch.bool:
        raise ValueError(f"src_valid_lens must be integer lengths of shape ({centres.shape[0]},), one per row of "
                         f"centres, got {tuple(getattr(src_valid_lens, 'shape', ()))} "
                         f"{getattr(src_valid_lens, 'dtype', type(src_valid_lens).__name__)}")
    check_non_negative_int("num_positions", num_positions)
    check_positive_int("half_width (D)", half_width)
    positions = torch.arange(num_positions, device=centres.device, dtype=centres.dtype)  # (src,)
    distances = positions - centres.unsqueeze(-1)  # (batch, Q, 1) -> (batch, Q, src)
    real = lengths_to_mask(src_valid_lens, num_positions).unsqueeze(1)  # (batch, 1, src)
    return (distances.abs() <= half_width) & real, distances


def local_attention_weights(scores: torch.Tensor, src_valid_lens: torch.Tensor, centres: torch.Tensor, half_width: int,
                            gaussian: bool) -> torch.Tensor:
    """Luong's local weights for ``scores`` (batch, Q, src): the softmax over the window ``|s − p_t| ≤ D``
    (exactly 0 outside), times ``exp(−(s − p_t)² / (2σ²))``, ``σ = D/2``, when ``gaussian``.

    ``scores`` are floating-point (batch, Q, src), ``centres`` (batch, Q) and ``src_valid_lens`` (batch,)
    integers in ``0 .. src`` as ``local_window`` takes them, ``half_width`` (D) a positive int, ``gaussian`` a bool.
    """
    if not isinstance(scores, torch.Tensor) or scores.dim() != 3 or not scores.is_floating_point():
        raise ValueError(f"scores must be a floating-point tensor (batch, Q, src), got "
                         f"{tuple(getattr(scores, 'shape', ()))} {getattr(scores, 'dtype', type(scores).__name__)}")
    if not isinstance(centres, torch.Tensor) or centres.shape != scores.shape[:2]:
        raise ValueError(f"centres must have shape (batch, Q) = {tuple(scores.shape[:2])} for scores "
                         f"{tuple(scores.shape)}, got {tuple(getattr(centres, 'shape', ()))}")
    check_bool("gaussian", gaussian)
    if isinstance(src_valid_lens, torch.Tensor) and checks_read_values(src_valid_lens):
        check_length_values(src_valid_lens, scores.shape[-1], name="src_valid_lens")
    return _local_weights(scores, src_valid_lens, centres, half_width, gaussian)


def _local_weights(scores, src_valid_lens, centres, half_width, gaussian):
    """``local_attention_weights`` without its checks of the scores and lengths (the decoder's own)."""
    inside, distances = local_window(centres, src_valid_lens, scores.shape[-1], half_width)
    weights = masked_softmax(scores, inside)  # (batch, Q, src)
    if gaussian:
        sigma = half_width / 2
        weights = weights * torch.exp(-distances.square() / (2 * sigma ** 2))
    return weights


class LuongDecoder(Decoder):
    """The decoder of Luong et al. (2015), parameterised by ``score``, ``local`` and ``half_width`` (D).

    A stack of ``num_layers`` GRUs (the paper uses LSTMs; GRUs keep the comparison with the other
    chapters about attention alone). It expects a unidirectional encoder with ``num_hiddens``
    units and as many layers, whose final states start the decoder.

    State: ``(encoder states (batch, src, h), src_valid_lens (batch,), hidden (layers, batch, h),
    h̃_{t-1} (batch, h), t)`` with ``t`` the number of steps decoded so far. ``forward(X, state)`` takes
    target token ids ``(batch, steps >= 1)`` in ``[0, vocab_size)``; afterwards ``attention_weights`` is
    ``(batch, steps, src)`` and ``centres`` (``p_t``) ``(batch, steps)``. Sizes and ``half_width`` (with
    ``local``) are positive ints, ``score`` one of ``SCORES``, ``local`` one of ``LOCAL_MODES``,
    ``dropout`` in ``[0, 1)``, ``input_feeding`` and ``scaled`` ``True`` or ``False``.
    """

    has_attention = True
    state_batch_dims = (0, 0, 1, 0, None)

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int, num_layers: int = 1,
                 score: str = "general", local: str | None = None, half_width: int = 5, input_feeding: bool = True,
                 dropout: float = 0.0, scaled: bool = False):
        super().__init__()
        if score not in SCORES:
            raise ValueError(f"score must be one of {SCORES}, got {score!r}")  # before any layer draws weights
        if local not in LOCAL_MODES:
            raise ValueError(f"local must be one of {LOCAL_MODES}, got {local!r}")
        if local is not None:
            check_positive_int("half_width (D)", half_width, hint="for local attention")
        check_probability("dropout", dropout)
        check_sizes(vocab_size=vocab_size, embed_size=embed_size, num_hiddens=num_hiddens, num_layers=num_layers)
        check_bool("input_feeding", input_feeding)
        check_bool("scaled", scaled)
        h = num_hiddens
        self.num_hiddens, self.score_name, self.local, self.half_width = h, score, local, half_width
        self.input_feeding, self.scaled = input_feeding, scaled
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size + (h if input_feeding else 0), h, num_layers,
                          dropout=dropout if num_layers > 1 else 0)
        self.attention = luong_score_layer(score, h, scaled)  # chapter 3's layer: score(h_t, h̄_s)
        if local == "predictive":
            self.W_p = nn.Linear(h, h, bias=False)
            self.v_p = nn.Linear(h, 1, bias=False)
        self.W_c = nn.Linear(2 * h, h, bias=False)
        self.W_s = nn.Linear(h, vocab_size)
        self.centres = None
        self.apply(init_seq2seq)

    def init_state(self, enc_all_outputs, src_valid_lens=None, *args):
        outputs, hidden = enc_all_outputs  # (src, batch, h), (layers, batch, h)
        if outputs.shape[-1] != self.num_hiddens or hidden.shape[0] != self.rnn.num_layers:
            raise ValueError(f"LuongDecoder(num_hiddens={self.num_hiddens}, num_layers={self.rnn.num_layers}) "
                             f"expects a unidirectional encoder of the same size, got outputs "
                             f"{tuple(outputs.shape)} and state {tuple(hidden.shape)}")
        enc = outputs.transpose(0, 1)  # (batch, src, h)
        lens = source_lengths(src_valid_lens, enc.shape[0], enc.shape[1], enc.device)
        return enc, lens, hidden, torch.zeros_like(hidden[-1]), 0

    def centre(self, h_t: torch.Tensor, lens: torch.Tensor, first_step: int) -> torch.Tensor | None:
        """``p_t`` for queries (batch, Q, h) at steps ``first_step, ...``: (batch, Q), or None (global)."""
        if self.local == "monotonic":
            steps = torch.arange(first_step, first_step + h_t.shape[1], device=h_t.device)  # (Q,)
            return torch.minimum(steps.unsqueeze(0), (lens - 1).unsqueeze(1)).to(h_t.dtype)  # (batch, Q)
        if self.local == "predictive":
            fraction = torch.sigmoid(self.v_p(torch.tanh(self.W_p(h_t)))).squeeze(-1)  # (batch, Q)
            return lens.unsqueeze(1).to(h_t.dtype) * fraction
        return None

    def attend(self, h_t: torch.Tensor, enc: torch.Tensor, lens: torch.Tensor, first_step: int):
        """Attentional states, weights and centres for queries ``h_t`` (batch, Q, h) at steps ``first_step...``;
        the encoder states ``enc`` (batch, src, h) are the keys and the values."""
        scores = self.attention.score(h_t, enc)  # (batch, Q, src)
        centres = self.centre(h_t, lens, first_step)
        if self.local == "predictive":  # the window's softmax times a Gaussian: weights that no longer sum to 1
            weights = _local_weights(scores, lens, centres, self.half_width, gaussian=True)
            context = weights @ enc  # (batch, Q, src) @ (batch, src, h) -> (batch, Q, h)
        else:  # global: every real position; local-m: the window around p_t
            visible = (lengths_to_mask(lens, enc.shape[1]).unsqueeze(1) if centres is None
                       else local_window(centres, lens, enc.shape[1], self.half_width)[0])  # (batch, 1 or Q, src)
            context, weights = attend(scores, enc, visible)  # (batch, Q, h), (batch, Q, src)
        attentional = torch.tanh(self.W_c(torch.cat([context, h_t], dim=-1)))  # h̃_t: (batch, Q, h)
        return attentional, weights, centres

    def forward(self, X, state):
        ids = check_source(X, self.embedding, "the decoder's input X")
        enc, lens, hidden, feed, t = state
        check_state_rows(X, enc.shape[0])
        embs = self.embedding(ids.t())  # (steps, batch, embed)
        if self.input_feeding:
            outs, weights, centres = [], [], []
            for emb in embs:  # one step at a time: h̃_{t-1} is part of step t's input
                top, hidden = self.rnn(torch.cat([emb, feed], dim=-1).unsqueeze(0), hidden)  # (1, batch, h)
                attentional, w, c = self.attend(top.transpose(0, 1), enc, lens, t)  # (batch, 1, h)
                feed, t = attentional.squeeze(1), t + 1
                outs.append(attentional), weights.append(w), centres.append(c)
            attentional, weights = torch.cat(outs, dim=1), torch.cat(weights, dim=1)  # (batch, steps, ...)
            centres = None if centres[0] is None else torch.cat(centres, dim=1)
        else:
            tops, hidden = self.rnn(embs, hidden)  # (steps, batch, h)
            attentional, weights, centres = self.attend(tops.transpose(0, 1), enc, lens, t)
            feed, t = attentional[:, -1], t + embs.shape[0]
        self.attention_weights, self.centres = weights, centres
        return self.W_s(attentional), (enc, lens, hidden, feed, t)  # logits (batch, steps, vocab)


def make_luong(src_vocab_size: int, tgt_vocab_size: int, embed_size: int = 256, num_hiddens: int = 256,
               num_layers: int = 1, score: str = "general", local: str | None = None, half_width: int = 5,
               input_feeding: bool = True, dropout: float = 0.0, scaled: bool = False) -> EncoderDecoder:
    """Luong et al.'s translator: chapter 4's ``Seq2SeqEncoder`` and a ``LuongDecoder``, config recorded (the
    arguments as ``LuongDecoder`` takes them; vocabulary sizes positive ints)."""
    check_sizes(src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size)
    config = dict(kind="luong", src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size,
                  embed_size=embed_size, num_hiddens=num_hiddens, num_layers=num_layers, score=score, local=local,
                  half_width=half_width, input_feeding=input_feeding, dropout=dropout, scaled=scaled)
    encoder = Seq2SeqEncoder(src_vocab_size, embed_size, num_hiddens, num_layers, dropout)
    decoder = LuongDecoder(tgt_vocab_size, embed_size, num_hiddens, num_layers, score, local, half_width,
                           input_feeding, dropout, scaled)
    return EncoderDecoder(encoder, decoder, config)
