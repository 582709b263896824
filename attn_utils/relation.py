"""Relation classification with an attention-based bidirectional LSTM (Zhou et al., 2016).

The task is SemEval-2010 Task 8's: given a sentence with two marked nominals,
``the <e1> burst </e1> was caused by the <e2> pressure </e2> .``, name the relation between them
and its direction, one of 9 relation types times 2 directions plus ``Other`` (19 labels). The data
is in ``attn_utils.data``: the generated corpus, labels and tensors in ``relations``, the reader of
the task's own files in ``semeval``; the task's official score is ``attn_utils.metrics.semeval_macro_f1``.
This module holds the model, ``AttentionBiLSTM``: embeddings, a BiLSTM whose two directions are
summed, Zhou et al.'s attention pooling (``attn_utils.pooling.LearnedQueryPooling``), ``tanh``,
dropout and a softmax classifier; ``pooling="mean"`` or ``"last"`` replaces the attention for
comparison.
"""

from __future__ import annotations

import torch
from torch import nn

from .checks import EMBEDDING_INDEX_DTYPES, check_positive_int, check_probability, check_step_lengths
from .packed import run_packed
from .pooling import LearnedQueryPooling

# ---------------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------------

POOLINGS = ("attention", "mean", "last")


def _check_bidirectional(output: torch.Tensor) -> int:
    if not isinstance(output, torch.Tensor) or output.dim() != 3 or output.shape[-1] % 2:
        raise ValueError(f"expected a bidirectional LSTM output (batch, steps, 2 * hidden), got "
                         f"{type(output).__name__} {tuple(getattr(output, 'shape', ()))}")
    return output.shape[-1] // 2


def sum_directions(output: torch.Tensor) -> torch.Tensor:
    """Zhou et al.'s ``h_i = forward_i + backward_i``: ``(batch, steps, 2h) -> (batch, steps, h)``.

    ``torch.nn.LSTM(..., bidirectional=True, batch_first=True)`` puts the forward direction's output
    in the first ``h`` features of each step and the backward direction's in the last ``h``.
    """
    h = _check_bidirectional(output)
    return output[..., :h] + output[..., h:]


def last_states(output: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """What a BiLSTM without attention reads: the forward state after the LAST real token plus the
    backward state after the FIRST token (the backward LSTM ends there), ``(batch, h)``.

    ``lengths`` ``(batch,)`` are the real lengths, integers in ``[1, steps]`` (0 would read the padding at the
    end): with padding, ``output[:, -1]`` is not the last real step of a short sentence.
    """
    h = _check_bidirectional(output)
    check_step_lengths("lengths", lengths, output.shape[0], 1, output.shape[1], "the steps of output")
    rows = torch.arange(output.shape[0], device=output.device)
    return output[rows, lengths.to(output.device) - 1, :h] + output[:, 0, h:]


class AttentionBiLSTM(nn.Module):
    """Zhou et al.'s Att-BLSTM: ``forward(tokens, lengths=None) -> logits (batch, num_classes)``.

    Embeddings -> bidirectional LSTM -> ``H``, the element-wise SUM of the forward and backward
    outputs ``(batch, steps, hidden_size)`` -> pooling -> ``h* = tanh(r)`` -> dropout -> linear layer
    (the softmax is in the loss). Dropout is applied to the embeddings, to the LSTM's outputs and
    to ``h*``, as in the paper. Pooling:

    - ``"attention"`` (the paper): ``alpha = softmax(w^T tanh(H))``, ``r = H alpha^T``
      (``LearnedQueryPooling(hidden_size)``); padding gets weight exactly 0; the weights of the last
      call are in ``attention_weights`` ``(batch, steps)``;
    - ``"mean"``: ``r`` is the mean of ``H`` over the real tokens (fixed, uniform weights);
    - ``"last"``: ``r`` is ``last_states``, the forward LSTM's state after the last token plus the
      backward LSTM's after the first: what a BiLSTM classifier without attention reads.

    For the last two ``attention_weights`` is ``None``. Sequences are packed, so the padding
    after a sentence changes nothing, in either direction. ``tokens`` are int64 or int32 ids ``(batch,
    steps)`` in ``[0, vocab_size)``, non-empty; ``lengths`` integers ``(batch,)`` in ``[1, steps]``. Sizes
    are positive ints, ``dropout`` in ``[0, 1)``, ``padding_idx`` ``None`` or an id in ``[0, vocab_size)``.
    """

    def __init__(self, vocab_size: int, embed_size: int, hidden_size: int, num_classes: int,
                 dropout: float = 0.3, pooling: str = "attention", padding_idx: int | None = 0):
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("embed_size", embed_size), ("hidden_size", hidden_size),
                            ("num_classes", num_classes)):
            check_positive_int(name, value)
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        check_probability("dropout", dropout)
        if padding_idx is not None and (isinstance(padding_idx, bool) or not isinstance(padding_idx, int)
                                        or not 0 <= padding_idx < vocab_size):
            raise ValueError(f"padding_idx must be None or a token id in [0, vocab_size={vocab_size}), got "
                             f"{padding_idx!r}")
        self.vocab_size, self.hidden_size, self.pooling = vocab_size, hidden_size, pooling
        self.embedding = nn.Embedding(vocab_size, embed_size, padding_idx=padding_idx)
        self.lstm = nn.LSTM(embed_size, hidden_size, batch_first=True, bidirectional=True)
        self.dropout = nn.Dropout(dropout)
        self.attention = LearnedQueryPooling(hidden_size) if pooling == "attention" else None
        self.classifier = nn.Linear(hidden_size, num_classes)
        self.attention_weights: torch.Tensor | None = None

    def _lengths(self, tokens: torch.Tensor, lengths: torch.Tensor | None) -> torch.Tensor:
        """Check the inputs; the lengths as a CPU tensor (``pack_padded_sequence`` wants them there)."""
        if (not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.dtype not in EMBEDDING_INDEX_DTYPES
                or tokens.numel() == 0):
            raise ValueError(f"AttentionBiLSTM expects token ids of shape (batch, steps), non-empty, with an "
                             f"integer dtype (torch.int64 or torch.int32), got {type(tokens).__name__} "
                             f"{tuple(getattr(tokens, 'shape', ()))} {getattr(tokens, 'dtype', '')}")
        batch, steps = tokens.shape
        low, high = int(tokens.min()), int(tokens.max())
        if low < 0 or high >= self.vocab_size:
            raise ValueError(f"token ids must lie in [0, {self.vocab_size}), got {low}..{high}")
        if lengths is None:
            return torch.full((batch,), steps, dtype=torch.long)
        if not isinstance(lengths, torch.Tensor) or lengths.shape != (batch,) or lengths.is_floating_point() \
                or lengths.dtype == torch.bool:
            raise ValueError(f"lengths must be an integer tensor of shape ({batch},), got {type(lengths).__name__} "
                             f"{tuple(getattr(lengths, 'shape', ()))} {getattr(lengths, 'dtype', '')}")
        lengths = lengths.detach().cpu().long()
        if bool(((lengths < 1) | (lengths > steps)).any()):
            raise ValueError(f"lengths must lie in [1, {steps}] (the padded length), got "
                             f"{int(lengths.min())}..{int(lengths.max())}")
        return lengths

    def bilstm(self, tokens: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """The BiLSTM's output ``(batch, steps, 2 * hidden_size)`` (forward half first), zero on padding."""
        cpu_lengths = self._lengths(tokens, lengths)
        x = self.dropout(self.embedding(tokens))  # (batch, steps, embed)
        return run_packed(self.lstm, x, cpu_lengths)  # (batch, steps, 2 * hidden)

    def encode(self, tokens: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """``H`` ``(batch, steps, hidden_size)``, the sum of the two directions (before dropout)."""
        return sum_directions(self.bilstm(tokens, lengths))

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        output = self.dropout(self.bilstm(tokens, lengths))  # (batch, steps, 2 * hidden)
        batch, steps = tokens.shape
        lengths = torch.full((batch,), steps, device=tokens.device) if lengths is None else lengths.to(tokens.device)
        H = sum_directions(output)  # (batch, steps, hidden), zero on padding
        if self.pooling == "attention":
            r = self.attention(H, lengths)  # (batch, hidden); its weights (batch, steps) are 0 on padding
            self.attention_weights = self.attention.attention_weights
        elif self.pooling == "mean":
            r = H.sum(dim=1) / lengths.unsqueeze(-1).to(H.dtype)
            self.attention_weights = None
        else:
            r = last_states(output, lengths)
            self.attention_weights = None
        h_star = torch.tanh(r)  # (batch, hidden)
        return self.classifier(self.dropout(h_star))  # (batch, num_classes)
