"""The encoder–decoder interfaces (d2l's names) and a GRU encoder–decoder without attention.

``Encoder(X, *args)`` returns whatever its decoder needs; ``Decoder.init_state(enc_all_outputs,
*args)`` turns that into the decoder's state and ``Decoder(X, state)`` returns ``(logits, state)``
with logits ``(batch, steps, vocab)``. Everything the training loop and the decoders in
``decoding`` need is in these three calls, plus two conventions for attention decoders:

* ``attention_weights``: ``None``, or after a forward pass ``(batch, steps, source_steps)``,
  the weights each decoder step put on the source positions;
* ``state_batch_dims``: for each entry of the state tuple, its batch axis (``None`` for entries
  that have none); ``reorder_state`` uses it to pick and repeat rows during beam search.

Inputs: token ids ``(batch, steps)`` of an integer dtype (not bool) in ``[0, vocab_size)``, at least one
step (``check_source``); source lengths ``(batch,)`` of whole numbers up to ``steps``. Sizes are positive
ints, flags ``True`` or ``False``, ``dropout`` in ``[0, 1)``; anything else is a ``ValueError`` naming
the argument.
"""

from __future__ import annotations

import torch
from torch import nn

from .checks import (
    check_bool,
    check_positive_int,
    check_probability,
    check_token_ids,
    check_tokens,
    checks_read_values,
)
from .masking import check_length_values


def init_seq2seq(module: nn.Module) -> None:
    """d2l's ``init_seq2seq``: Xavier-uniform weights for linear layers and GRUs."""
    if type(module) is nn.Linear:
        nn.init.xavier_uniform_(module.weight)
    if type(module) is nn.GRU:
        for name in module._flat_weights_names:
            if "weight" in name:
                nn.init.xavier_uniform_(module._parameters[name])


def _as_lengths(valid_lens, name: str) -> torch.Tensor:
    """``valid_lens`` as a tensor of numbers (not bool), else ``ValueError`` naming ``name``."""
    if not isinstance(valid_lens, torch.Tensor):
        try:
            valid_lens = torch.as_tensor(valid_lens)
        except (TypeError, ValueError, RuntimeError):
            raise ValueError(f"{name} must be a tensor of lengths, got {type(valid_lens).__name__} "
                             f"{valid_lens!r:.60}") from None
    if valid_lens.dtype == torch.bool or valid_lens.is_complex():
        raise ValueError(f"{name} must hold lengths (whole numbers), not a {valid_lens.dtype} tensor of shape "
                         f"{tuple(valid_lens.shape)}")
    return valid_lens


def source_lengths(valid_lens, batch: int, steps: int, device, *, read_values: bool = True) -> torch.Tensor:
    """``valid_lens`` as a ``(batch,)`` long tensor on ``device`` (all ``steps`` when it is ``None``).

    ``valid_lens`` must be ``(batch,)`` whole numbers in ``0 .. steps``: a boolean mask, a fraction or a
    length past ``steps`` is a ``ValueError`` (the values are read where ``checks_read_values`` says).
    ``read_values=False`` is for callers whose attention layers read integer lengths anyway: then only
    floating-point lengths, which ``.long()`` would truncate, are read here."""
    if valid_lens is None:
        return torch.full((batch,), steps, dtype=torch.long, device=device)
    valid_lens = _as_lengths(valid_lens, "src_valid_lens")
    if valid_lens.shape != (batch,):
        raise ValueError(f"src_valid_lens must have shape ({batch},), got {tuple(valid_lens.shape)}")
    if checks_read_values(valid_lens) and (read_values or valid_lens.is_floating_point()):
        check_length_values(valid_lens, steps, name="src_valid_lens")
    return valid_lens.to(device).long()


def check_source(X, embedding: nn.Embedding, what: str = "the encoder's input X") -> torch.Tensor:
    """``X`` as int64 token ids for ``embedding``, after checking it: an integer tensor ``(batch, steps >= 1)``
    on the embedding's device with ids in ``[0, vocab_size)`` (``checks.check_token_ids``: the values are read
    where ``checks_read_values`` says). Raises ``ValueError`` naming ``what``."""
    check_tokens(X, what)
    if X.shape[1] < 1:
        raise ValueError(f"{what} must hold at least one step (batch, steps >= 1), got shape {tuple(X.shape)}")
    if X.device != embedding.weight.device:
        raise ValueError(f"{what} is on {X.device} but the model on {embedding.weight.device}; move the token ids "
                         f"with X.to(model_device(model))")
    ids = X.long()
    check_token_ids(ids, embedding.num_embeddings)
    return ids


def check_state_rows(X: torch.Tensor, batch: int) -> None:
    """A decoder's input ``X`` must have the ``batch`` rows its state was made for."""
    if X.shape[0] != batch:
        raise ValueError(f"the decoder's input X has {X.shape[0]} rows but the state was made for a batch of {batch}")


def check_sizes(**sizes) -> None:
    """``checks.check_positive_int`` for each keyword argument (a layer's sizes), in the order given."""
    for name, value in sizes.items():
        check_positive_int(name, value)


class Encoder(nn.Module):
    """The base encoder interface: ``forward(X, *args)``."""

    def forward(self, X, *args):
        raise NotImplementedError


class Decoder(nn.Module):
    """The base decoder interface: ``init_state(enc_all_outputs, *args)`` and ``forward(X, state)``."""

    #: batch axis of each entry of the state tuple (``None``: not batched); used by ``reorder_state``
    state_batch_dims: tuple = ()
    #: does forward set ``attention_weights``?
    has_attention: bool = False

    def __init__(self):
        super().__init__()
        self.attention_weights = None  # decoders with attention set it in forward

    def init_state(self, enc_all_outputs, *args):
        raise NotImplementedError

    def forward(self, X, state):
        raise NotImplementedError

    def reorder_state(self, state, index: torch.Tensor):
        """The state with its batch rows replaced by rows ``index`` (beam search picks and repeats rows)."""
        if len(state) != len(self.state_batch_dims):
            raise ValueError(f"{type(self).__name__}.state_batch_dims has {len(self.state_batch_dims)} entries "
                             f"but the state has {len(state)}")
        return tuple(s if dim is None or s is None else s.index_select(dim, index.to(s.device))
                     for s, dim in zip(state, self.state_batch_dims))


class EncoderDecoder(nn.Module):
    """d2l's ``EncoderDecoder``: ``forward(enc_X, dec_X, *args)`` returns the decoder's logits only.

    ``args`` (typically ``src_valid_lens``) go to the encoder and to ``decoder.init_state``. ``enc_X``
    ``(batch, S)`` and ``dec_X`` ``(batch, T)`` are token ids of one batch (see the module docstring); the
    logits are ``(batch, T, vocab)``. ``encoder`` and ``decoder`` are modules; ``config`` (a JSON-able dict,
    when the model was built by a helper such as ``make_seq2seq``) is what a checkpoint stores to rebuild it.
    """

    def __init__(self, encoder: Encoder, decoder: Decoder, config: dict | None = None):
        super().__init__()
        for name, part in (("encoder", encoder), ("decoder", decoder)):
            if not isinstance(part, nn.Module):
                raise ValueError(f"{name} must be an nn.Module, got {type(part).__name__}")
        if config is not None and not isinstance(config, dict):
            raise ValueError(f"config must be a dict or None, got {type(config).__name__}")
        self.encoder, self.decoder = encoder, decoder
        self.config = dict(config or {})

    def forward(self, enc_X, dec_X, *args):
        enc_all_outputs = self.encoder(enc_X, *args)
        dec_state = self.decoder.init_state(enc_all_outputs, *args)
        return self.decoder(dec_X, dec_state)[0]

    @torch.no_grad()
    def predict_step(self, batch, device, num_steps: int, save_attention_weights: bool = False):
        """d2l's ``predict_step``: ``num_steps`` greedy steps from ``batch = (src, tgt, src_valid_lens, _)``
        (``tgt[:, 0]`` is ``<bos>``), without stopping at ``<eos>``. Returns ``(tokens (batch,
        num_steps), attention weights per step)``; ``decoding.greedy_decode`` is the stopping version."""
        from .decoding import greedy_decode  # the one greedy loop (decoding builds on this module)

        check_positive_int("num_steps", num_steps)
        check_bool("save_attention_weights", save_attention_weights)
        src, tgt, src_valid_lens = (t.to(device) for t in batch[:3])
        bos = int(tgt[0, 0])
        if not bool((tgt[:, 0] == bos).all()):
            raise ValueError("predict_step needs the same first token (<bos>) in every row of tgt")
        decoded = greedy_decode(self, src, src_valid_lens, bos, None, num_steps)
        tokens = torch.tensor(decoded.tokens, dtype=torch.long, device=src.device)  # (batch, num_steps)
        if not save_attention_weights or decoded.attention is None:
            return tokens, []
        weights = torch.stack(decoded.attention)  # (batch, num_steps, source_steps)
        return tokens, [weights[:, t:t + 1] for t in range(num_steps)]  # per step (batch, 1, source_steps)


class Seq2SeqEncoder(Encoder):
    """d2l's RNN encoder: embedding, then a multilayer GRU (bidirectional on request).

    ``forward(X, valid_lens=None)`` returns ``(outputs, state)``: ``outputs`` ``(steps, batch,
    num_hiddens)`` (the last layer at every step) and ``state`` ``(num_layers, batch,
    num_hiddens)``. Without ``valid_lens`` every position is read, as in d2l. With them (``(batch,)``
    whole numbers in ``1 .. steps``), padding is skipped (packed sequences): ``state`` is each
    sequence's state after its last real token, and the outputs at padded positions are 0. ``X`` holds
    token ids ``(batch, steps >= 1)`` in ``[0, vocab_size)``.

    With ``bidirectional=True`` (Bahdanau et al.'s encoder) a second GRU reads each sentence
    backwards: ``outputs`` are ``(steps, batch, 2 * num_hiddens)``, the forward state at each
    position followed by the backward one (the *annotations*), and ``state`` is ``(2 *
    num_layers, batch, num_hiddens)``, forward and backward final states per layer (the backward
    one is the state after reading back to the first token).
    """

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int, num_layers: int, dropout: float = 0,
                 bidirectional: bool = False):
        super().__init__()
        check_sizes(vocab_size=vocab_size, embed_size=embed_size, num_hiddens=num_hiddens, num_layers=num_layers)
        check_bool("bidirectional", bidirectional)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        check_probability("dropout", dropout)
        self.rnn = nn.GRU(embed_size, num_hiddens, num_layers, dropout=dropout if num_layers > 1 else 0,
                          bidirectional=bidirectional)
        self.apply(init_seq2seq)

    def forward(self, X, valid_lens=None, *args):
        ids = check_source(X, self.embedding)
        embs = self.embedding(ids.t())  # (steps, batch, embed_size)
        if valid_lens is None:
            return self.rnn(embs)
        valid_lens = _as_lengths(valid_lens, "valid_lens")
        if valid_lens.shape != (X.shape[0],):
            raise ValueError(f"valid_lens must have shape ({X.shape[0]},) for X of shape {tuple(X.shape)}, "
                             f"got {tuple(valid_lens.shape)}")
        if X.shape[0] == 0:  # an empty batch: nothing to pack
            return self.rnn(embs)
        if valid_lens.is_floating_point():  # whole numbers (packing would truncate 1.5 to 1)
            check_length_values(valid_lens)
        if bool((valid_lens < 1).any()) or bool((valid_lens > X.shape[1]).any()):
            raise ValueError(f"valid_lens must lie in 1..{X.shape[1]} (the steps of X), got {valid_lens.tolist()}")
        packed = nn.utils.rnn.pack_padded_sequence(embs, valid_lens.cpu(), enforce_sorted=False)
        outputs, state = self.rnn(packed)
        outputs, _ = nn.utils.rnn.pad_packed_sequence(outputs, total_length=X.shape[1])  # (steps, batch, h)
        return outputs, state


class Seq2SeqDecoder(Decoder):
    """d2l's RNN decoder: at every step the GRU reads the target embedding concatenated with the
    context, the encoder's last-layer final state (the same vector at every step).

    The state is ``(context, hidden)``: ``context`` ``(batch, num_hiddens)``, ``hidden``
    ``(num_layers, batch, num_hiddens)``, initialised to the encoder's final state. ``forward(X, state)``
    takes target token ids ``(batch, steps >= 1)`` in ``[0, vocab_size)``, one row per row of the state.
    """

    state_batch_dims = (0, 1)

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int, num_layers: int, dropout: float = 0):
        super().__init__()
        check_sizes(vocab_size=vocab_size, embed_size=embed_size, num_hiddens=num_hiddens, num_layers=num_layers)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        check_probability("dropout", dropout)
        self.rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers, dropout=dropout if num_layers > 1 else 0)
        self.dense = nn.Linear(num_hiddens, vocab_size)
        self.apply(init_seq2seq)

    def init_state(self, enc_all_outputs, *args):
        _, hidden = enc_all_outputs  # (num_layers, batch, num_hiddens)
        return hidden[-1], hidden  # the last layer's final state is the context

    def forward(self, X, state):
        ids = check_source(X, self.embedding, "the decoder's input X")
        context, hidden = state
        check_state_rows(X, context.shape[0])
        embs = self.embedding(ids.t())  # (steps, batch, embed_size)
        context = context.unsqueeze(0).expand(embs.shape[0], -1, -1)  # (steps, batch, num_hiddens)
        outputs, hidden = self.rnn(torch.cat((embs, context), dim=-1), hidden)
        logits = self.dense(outputs).transpose(0, 1)  # (batch, steps, vocab)
        return logits, (state[0], hidden)


def make_seq2seq(src_vocab_size: int, tgt_vocab_size: int, embed_size: int = 256, num_hiddens: int = 256,
                 num_layers: int = 1, dropout: float = 0.0) -> EncoderDecoder:
    """A GRU encoder–decoder without attention, with its config recorded for checkpoints. ``num_layers``
    defaults to 1, as in every builder of the package and every book recipe (d2l's examples use 2).

    Sizes are positive ints; ``dropout`` in ``[0, 1)`` acts between GRU layers (so only with ``num_layers > 1``)."""
    check_sizes(src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size)
    config = dict(kind="seq2seq", src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size,
                  embed_size=embed_size, num_hiddens=num_hiddens, num_layers=num_layers, dropout=dropout)
    encoder = Seq2SeqEncoder(src_vocab_size, embed_size, num_hiddens, num_layers, dropout)
    decoder = Seq2SeqDecoder(tgt_vocab_size, embed_size, num_hiddens, num_layers, dropout)
    return EncoderDecoder(encoder, decoder, config)
