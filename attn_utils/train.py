"""Training the translators of chapters 4–6 and 10: the loss, the trainer, a plot of its history, checkpoints.

``train_seq2seq`` trains any ``EncoderDecoder`` through the course's one loop (``training_loop.fit``) with
teacher forcing (the decoder reads ``<bos>`` and the target shifted right; ``TranslationData``
batches already hold that input), a masked cross-entropy with label smoothing, gradient clipping
and Adam whose learning rate rises linearly over ``warmup`` steps and then falls linearly to 0 at
the budget: ``max_steps`` steps or ``time_budget`` seconds of training, whichever ends first.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from pathlib import Path

import torch
from torch.nn import functional as F

from .evaluate import evaluate_bleu
from .masking import lengths_to_mask
from .registry import MODEL_BUILDERS, build_model
from .training_loop import DIVERGENCE_FACTOR, History, fit


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


def trim_batch(batch, pad: int):
    """Drop the columns that are padding in every row: ``(src, dec_input, src_valid_len, label)``."""
    src, dec_input, src_valid_len, label = batch
    src_steps = int(src_valid_len.max())
    tgt_steps = int((label != pad).sum(dim=1).max())
    return src[:, :src_steps], dec_input[:, :tgt_steps], src_valid_len, label[:, :tgt_steps]


def _check_training_set(data) -> None:
    """``ValueError`` when ``data`` has no training pair (training would have nothing to learn from)."""
    if len(data.pairs("train")) == 0:
        raise ValueError(f"the training set is empty: {data.summary()}; load the data with num_train > 0 "
                         "(or None for every pair left after the validation and test sets)")


def _batches(data, batch_size: int, seed: int):
    """Training batches forever, epoch after epoch (each epoch reshuffled). The caller checks first
    that there is a training pair (``_check_training_set``): over an empty loader this never yields."""
    loader = data.dataloader("train", batch_size=batch_size, seed=seed)
    while True:
        yield from loader


def train_seq2seq(model, data, *, lr: float = 5e-3, max_steps: int | None = None, time_budget: float | None = None,
                  batch_size: int = 128, warmup: int = 100, label_smoothing: float = 0.1, clip: float = 1.0,
                  betas=(0.9, 0.98), eval_points: int = 4, eval_split: str = "val", device=None, seed: int = 0,
                  progress: bool = True, divergence_factor: float | None = DIVERGENCE_FACTOR) -> History:
    """Train ``model`` on ``data``'s training pairs with ``fit``; return the ``History``.

    The budget is ``max_steps`` and/or ``time_budget`` (seconds of training, not counting the
    validation); the learning rate reaches 0 when the first of them is used up. Validation BLEU
    (greedy decoding of ``eval_split``, ``history.evals["val_bleu"]``) is measured ``eval_points``
    times, evenly over the budget (the last at the end); ``eval_points=0`` skips it. Each step
    records its number of target tokens (``history.metrics["tokens"]``).

    An empty training set is a ``ValueError``. A loss that rises ``divergence_factor`` times above
    its start stops training with ``RuntimeError`` (``fit`` says how; ``None`` turns the check off).
    """
    device = next(model.parameters()).device if device is None else torch.device(device)
    model.to(device)
    torch.manual_seed(seed)
    pad = data.tgt_vocab.pad
    _check_training_set(data)  # before the budget line and the progress bar
    batches = _batches(data, batch_size, seed)

    def step_loss(model, step):
        src, dec_input, src_valid_len, label = (t.to(device) for t in trim_batch(next(batches), pad))
        logits = model(src, dec_input, src_valid_len)
        loss = sequence_loss(logits, label, pad=pad, label_smoothing=label_smoothing)
        return loss, {"tokens": int((label != pad).sum())}

    return fit(model, step_loss, max_steps=max_steps, time_budget=time_budget, lr=lr, warmup=warmup, clip=clip,
               betas=betas, evaluate=lambda m: {"val_bleu": evaluate_bleu(m, data, eval_split)},
               eval_points=eval_points, progress=progress, divergence_factor=divergence_factor)


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
    if "val_bleu" in history.evals:
        ax2.plot(*history.curve("val_bleu"), marker="o")
    ax2.set(xlabel="step", ylabel="BLEU", title="validation BLEU (greedy)")
    return fig


class CheckpointError(ValueError):
    """A file that ``load_checkpoint`` cannot load, or a model that ``save_checkpoint`` should not save."""


#: what ``load_checkpoint`` expects, for its messages
_EXPECTED = "expected a checkpoint written by save_checkpoint (a dict with 'state_dict' and a JSON 'record')"


def _kind(config) -> str | None:
    """The model kind a config names, or None where it names none that ``build_model`` knows."""
    kind = config.get("kind") if isinstance(config, dict) else None
    return kind if kind in MODEL_BUILDERS else None


def save_checkpoint(path, model, history: History | None = None, extra: dict | None = None, *,
                    require_config: bool = True) -> None:
    """Save the weights and a JSON-able record (``model.config``, the history, ``extra``).

    ``load_checkpoint(path)`` rebuilds the model from ``model.config``, so a model without one (with a
    ``kind`` that ``registry.build_model`` knows) is refused here rather than when it is loaded; with
    ``require_config=False`` it is saved, and must be loaded with ``load_checkpoint(path, model)``.
    The file is written next to ``path`` and then renamed onto it (``os.replace``), so a save that fails
    or is interrupted leaves the previous file at ``path`` as it was.
    """
    config = getattr(model, "config", None)
    if require_config and _kind(config) is None:
        raise CheckpointError(
            f"cannot save {type(model).__name__} to {path}: load_checkpoint(path) rebuilds a model from its "
            f"config, and this model has {'no config' if config is None else f'the config {config!r}'} "
            f"(model.config with a 'kind' of {sorted(MODEL_BUILDERS)}). Build it with registry.build_model or "
            f"a make_... function, or pass require_config=False and load it with load_checkpoint(path, model).")
    record = {"config": config or {}, "history": history.to_dict() if history else None, "extra": extra or {}}
    try:
        text = json.dumps(record)
    except TypeError as err:
        raise ValueError(f"the config, history and extra must be JSON-able: {err}") from err
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    path = Path(path)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(temporary, 0o666 & ~_umask())  # mkstemp's file is private (0600); give it a usual file's mode
        with os.fdopen(handle, "wb") as file:
            torch.save({"state_dict": state, "record": text}, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _read_checkpoint(path: Path, map_location) -> tuple[dict, dict]:
    """The state dict and the parsed record of the checkpoint at ``path``, or a CheckpointError saying
    what the file holds instead."""
    def refuse(found: str):
        return CheckpointError(f"{path}: {_EXPECTED}, found {found}")

    size = path.stat().st_size  # a missing file raises FileNotFoundError, which says so already
    if size == 0:
        raise refuse("an empty file (0 bytes): was its save interrupted?")
    try:
        saved = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:
        with open(path, "rb") as file:
            start = file.read(16)
        reason = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        if start.startswith(b"PK") and not zipfile.is_zipfile(path):
            raise refuse(f"a truncated or damaged torch file ({size:,} bytes; {reason})") from err
        if start.startswith(b"PK") or start.startswith(b"\x80"):
            raise refuse(f"a torch file that cannot be loaded with weights_only=True ({reason})") from err
        raise refuse(f"a file that is not a torch file at all ({size:,} bytes starting {start!r})") from err
    if not isinstance(saved, dict):
        raise refuse(f"a {type(saved).__name__} saved with torch.save")
    if "record" not in saved or "state_dict" not in saved:
        if saved and all(isinstance(v, torch.Tensor) for v in saved.values()):
            raise refuse(f"a raw state dict ({len(saved)} tensors, e.g. {next(iter(saved))!r}, and no 'record'): "
                         f"load it with model.load_state_dict(torch.load(path)), or save with save_checkpoint")
        raise refuse(f"a dict with the keys {sorted(map(str, saved))[:8]}")
    try:
        record = json.loads(saved["record"])
        if not isinstance(record, dict):
            raise TypeError(f"a JSON {type(record).__name__}")
    except (TypeError, ValueError) as err:
        raise refuse(f"a 'record' that is not a JSON dict ({err})") from err
    if not isinstance(saved["state_dict"], dict):
        raise refuse(f"a 'state_dict' that is a {type(saved['state_dict']).__name__}, not a dict of tensors")
    return saved["state_dict"], record


def load_checkpoint(path, model=None, map_location="cpu"):
    """Load a checkpoint (``torch.load(weights_only=True)``): returns ``(model, record)``.

    Without ``model`` it is rebuilt from the stored config (``registry.build_model``). A file that is
    not such a checkpoint (empty, truncated, a raw state dict, anything else), or one of another kind of
    model than ``model``, raises :class:`CheckpointError` (a ValueError) naming the file, what was
    expected and what was found.
    """
    path = Path(path)
    state, record = _read_checkpoint(path, map_location)
    config = record.get("config") or {}
    stored = _kind(config)
    if model is None:
        if stored is None:
            raise CheckpointError(
                f"{path}: expected a checkpoint with a config that rebuilds its model (a 'kind' of "
                f"{sorted(MODEL_BUILDERS)}), found the config {config!r}: pass the model, load_checkpoint(path, model)")
        model = build_model(config)
    else:
        given = _kind(getattr(model, "config", None))
        if stored is not None and given is not None and stored != given:
            raise CheckpointError(f"{path}: expected a checkpoint of a {given!r} model (the model given), "
                                  f"found a checkpoint of a {stored!r} model (config {config!r})")
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        detail = " ".join(str(err).split())
        raise CheckpointError(
            f"{path}: expected weights that fit the {type(model).__name__} given (config "
            f"{getattr(model, 'config', None)!r}), found weights saved from the config {config!r}: "
            f"{detail[:300]}{'...' if len(detail) > 300 else ''}") from err
    if record.get("history"):
        record["history"] = History.from_dict(record["history"])
    return model, record
