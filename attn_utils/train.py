"""One training loop for every translation chapter, its history, a plot of it, and checkpoints.

``train_seq2seq`` trains any ``EncoderDecoder`` with teacher forcing (the decoder reads
``<bos>`` and the target shifted right; ``TranslationData`` batches already hold that input),
a masked cross-entropy with label smoothing, gradient clipping and Adam whose learning rate
rises linearly over ``warmup`` steps and then falls linearly to 0 at the budget: ``max_steps``
steps or ``time_budget`` seconds of training, whichever ends first. A step budget gives the
same model on every machine; a time budget the best model a machine can train in that time.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field

import torch
from torch.nn import functional as F
from tqdm.auto import tqdm

from .evaluate import evaluate_bleu
from .masking import lengths_to_mask


def sequence_loss(logits: torch.Tensor, labels: torch.Tensor, valid_len: torch.Tensor | None = None,
                  pad: int = 0, label_smoothing: float = 0.0) -> torch.Tensor:
    """Mean cross-entropy over the real target tokens.

    ``logits`` ``(batch, steps, vocab)``, ``labels`` ``(batch, steps)``. Real tokens are the first
    ``valid_len`` of each row, or, without ``valid_len``, those that are not ``pad``; the others
    (logits and labels alike) do not count.
    """
    if logits.dim() != 3 or labels.shape != logits.shape[:2]:
        raise ValueError(f"expected logits (batch, steps, vocab) and labels (batch, steps), got "
                         f"{tuple(logits.shape)} and {tuple(labels.shape)}")
    if valid_len is None:
        mask = labels != pad  # (batch, steps)
    else:
        mask = lengths_to_mask(valid_len.to(labels.device), labels.shape[1])  # (batch, steps)
    losses = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1),
                             reduction="none", label_smoothing=label_smoothing)  # (batch * steps,)
    count = mask.sum()
    if int(count) == 0:
        raise ValueError("the batch has no target token to learn from (every label is padding)")
    return (losses * mask.reshape(-1)).sum() / count


def learning_rate_factor(step: int, warmup: int, progress: float) -> float:
    """Linear warm-up over ``warmup`` steps, then linear decay to 0 as ``progress`` goes 0 → 1."""
    rise = (step + 1) / warmup if warmup > 0 else 1.0
    return max(0.0, min(rise, 1.0 - progress))


def trim_batch(batch, pad: int):
    """Drop the columns that are padding in every row: ``(src, dec_input, src_valid_len, label)``."""
    src, dec_input, src_valid_len, label = batch
    src_steps = int(src_valid_len.max())
    tgt_steps = int((label != pad).sum(dim=1).max())
    return src[:, :src_steps], dec_input[:, :tgt_steps], src_valid_len, label[:, :tgt_steps]


@dataclass
class History:
    """What happened during training: one entry per step, and validation BLEU at a few points."""

    steps: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)  # training time when the step ended
    val_bleu: list[tuple[int, float]] = field(default_factory=list)  # (step, BLEU)
    target_tokens: int = 0
    train_seconds: float = 0.0

    @property
    def tokens_per_second(self) -> float:
        """Training throughput: target tokens (padding excluded) per second of training."""
        return self.target_tokens / self.train_seconds if self.train_seconds > 0 else 0.0

    def summary(self) -> str:
        last = f"; validation BLEU {self.val_bleu[-1][1]:.1f}" if self.val_bleu else ""
        return (f"{len(self.steps)} steps in {self.train_seconds:.0f} s, {self.tokens_per_second:,.0f} target "
                f"tokens/s; final loss {self.loss[-1]:.3f}{last}") if self.steps else "no steps"

    def to_dict(self) -> dict:
        return {"steps": self.steps, "loss": self.loss, "lr": self.lr, "seconds": self.seconds,
                "val_bleu": [list(p) for p in self.val_bleu], "target_tokens": self.target_tokens,
                "train_seconds": self.train_seconds}

    @classmethod
    def from_dict(cls, d: dict) -> History:
        return cls(d["steps"], d["loss"], d["lr"], d["seconds"], [tuple(p) for p in d["val_bleu"]],
                   d["target_tokens"], d["train_seconds"])


def _batches(data, batch_size: int, seed: int):
    """Training batches forever, epoch after epoch (each epoch reshuffled)."""
    loader = data.dataloader("train", batch_size=batch_size, seed=seed)
    while True:
        yield from loader


def train_seq2seq(model, data, *, lr: float = 5e-3, max_steps: int | None = None, time_budget: float | None = None,
                  batch_size: int = 128, warmup: int = 100, label_smoothing: float = 0.1, clip: float = 1.0,
                  betas=(0.9, 0.98), eval_points: int = 4, eval_split: str = "val", device=None, seed: int = 0,
                  progress: bool = True) -> History:
    """Train ``model`` on ``data``'s training pairs; return the ``History``.

    The budget is ``max_steps`` and/or ``time_budget`` (seconds of training, not counting the
    validation); the learning rate reaches 0 when the first of them is used up. Validation BLEU
    (greedy decoding of ``eval_split``) is measured ``eval_points`` times, evenly over the budget
    (the last at the end); ``eval_points=0`` skips it.
    """
    if max_steps is None and time_budget is None:
        raise ValueError("give a budget: max_steps (an int > 0) and/or time_budget (seconds > 0); got neither")
    if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
        raise ValueError(f"max_steps must be a positive int, got {max_steps!r}")
    if time_budget is not None and not time_budget > 0:
        raise ValueError(f"time_budget must be a positive number of seconds, got {time_budget!r}")
    device = next(model.parameters()).device if device is None else torch.device(device)
    model.to(device)
    torch.manual_seed(seed)
    pad = data.tgt_vocab.pad
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=tuple(betas))
    history = History()
    next_eval = [k / eval_points for k in range(1, eval_points + 1)] if eval_points else []
    total = max_steps if max_steps is not None else float(time_budget)
    bar = tqdm(total=total, desc="training", unit="step" if max_steps is not None else "s", disable=not progress,
               mininterval=1.0)
    elapsed, step = 0.0, 0
    batches = _batches(data, batch_size, seed)
    model.train()
    while True:
        progress_now = max(step / max_steps if max_steps else 0.0, elapsed / time_budget if time_budget else 0.0)
        if progress_now >= 1.0:
            break
        start = time.perf_counter()
        src, dec_input, src_valid_len, label = (t.to(device) for t in trim_batch(next(batches), pad))
        factor = learning_rate_factor(step, warmup, progress_now)
        for group in optimizer.param_groups:
            group["lr"] = lr * factor
        logits = model(src, dec_input, src_valid_len)
        loss = sequence_loss(logits, label, pad=pad, label_smoothing=label_smoothing)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        loss_value = loss.item()  # waits for the device, so the timing below is real
        if not math.isfinite(loss_value):
            raise FloatingPointError(f"the loss became {loss_value} at step {step}; try a smaller lr (got {lr})")
        elapsed += time.perf_counter() - start
        step += 1
        history.steps.append(step)
        history.loss.append(loss_value)
        history.lr.append(lr * factor)
        history.seconds.append(elapsed)
        history.target_tokens += int((label != pad).sum())
        bar.update(1 if max_steps is not None else min(elapsed, total) - bar.n)
        bar.set_postfix(loss=f"{loss_value:.3f}", refresh=False)
        done = max(step / max_steps if max_steps else 0.0, elapsed / time_budget if time_budget else 0.0)
        if next_eval and (done >= next_eval[0] or done >= 1.0):
            while next_eval and done >= next_eval[0]:
                next_eval.pop(0)
            if done >= 1.0:
                next_eval.clear()
            history.val_bleu.append((step, evaluate_bleu(model, data, eval_split)))
            bar.set_postfix(loss=f"{loss_value:.3f}", val_bleu=f"{history.val_bleu[-1][1]:.1f}", refresh=False)
            model.train()
    bar.close()
    history.train_seconds = elapsed
    model.eval()
    return history


def plot_history(history: History, figsize=(9, 3)):
    """Training loss per step (and its running mean) beside validation BLEU; returns the figure."""
    from matplotlib import pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=figsize, layout="constrained")
    ax1.plot(history.steps, history.loss, lw=0.5, alpha=0.4, label="per step")
    window = max(1, len(history.loss) // 50)
    if len(history.loss) >= window:
        kernel = torch.ones(window) / window
        smooth = torch.conv1d(torch.tensor(history.loss)[None, None], kernel[None, None])[0, 0]
        ax1.plot(history.steps[window - 1:], smooth.tolist(), label=f"mean of {window}")
    ax1.set(xlabel="step", ylabel="training loss", title="loss (label-smoothed)")
    ax1.legend(fontsize=8)
    if history.val_bleu:
        steps, scores = zip(*history.val_bleu)
        ax2.plot(steps, scores, marker="o")
    ax2.set(xlabel="step", ylabel="BLEU", title="validation BLEU (greedy)")
    return fig


def save_checkpoint(path, model, history: History | None = None, extra: dict | None = None) -> None:
    """Save the weights and a JSON-able record (``model.config``, the history, ``extra``)."""
    record = {"config": getattr(model, "config", {}), "history": history.to_dict() if history else None,
              "extra": extra or {}}
    try:
        text = json.dumps(record)
    except TypeError as err:
        raise ValueError(f"the config, history and extra must be JSON-able: {err}") from err
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    torch.save({"state_dict": state, "record": text}, path)


def load_checkpoint(path, model=None, map_location="cpu"):
    """Load a checkpoint (``torch.load(weights_only=True)``): returns ``(model, record)``.

    Without ``model`` it is rebuilt from the stored config (``seq2seq.build_model``).
    """
    from .seq2seq import build_model

    saved = torch.load(path, map_location=map_location, weights_only=True)
    record = json.loads(saved["record"])
    if model is None:
        model = build_model(record["config"])
    model.load_state_dict(saved["state_dict"])
    if record.get("history"):
        record["history"] = History.from_dict(record["history"])
    return model, record
