"""Train several translators on the same data with the same budget and tabulate what they achieve.

``registry.TRANSLATORS`` names the models chapters 4–6 compare; ``compare_translators`` trains each with
``train_seq2seq`` (same data, same seed, same budget) and returns one row per model: parameters,
steps, seconds of training, seconds per epoch (the measured time per step times the steps an
epoch of the training set takes), test BLEU and, on corpora with gold alignments, the alignment
error rate of its attention. ``benchmarks/compare_translators.py`` runs it at full size.
"""

from __future__ import annotations

import math

from .device import get_device, set_seed
from .evaluate import alignment_error, evaluate_bleu
from .registry import TRANSLATORS, build_translator
from .seq2seq import EncoderDecoder
from .train import train_seq2seq


def train_and_score(name: str, data, *, embed_size: int = 256, num_hiddens: int = 256, num_layers: int = 2,
                    window: int = 2, seed: int = 0, device=None, split: str = "test",
                    **train_kwargs) -> tuple[EncoderDecoder, dict]:
    """Build, train (``train_seq2seq(**train_kwargs)``) and score one model: ``(model, row)``.

    ``device=None`` means ``get_device()`` (a GPU when there is one).
    """
    set_seed(seed)
    device = get_device() if device is None else device
    model = build_translator(name, data, embed_size, num_hiddens, num_layers, window, device)
    train_kwargs.setdefault("eval_points", 0)
    history = train_seq2seq(model, data, seed=seed, **train_kwargs)
    batch_size = train_kwargs.get("batch_size", 128)
    steps_per_epoch = math.ceil(len(data.train) / batch_size)
    row = {
        "model": name,
        "parameters": sum(p.numel() for p in model.parameters()),
        "steps": len(history.steps),
        "train_seconds": history.train_seconds,
        "seconds_per_epoch": history.train_seconds / max(1, len(history.steps)) * steps_per_epoch,
        "bleu": evaluate_bleu(model, data, split),
        "aer": None,
    }
    if data.pairs(split).alignments is not None and model.decoder.has_attention:
        row["aer"] = alignment_error(model, data, split)
    return model, row


def compare_translators(data, names=None, **kwargs) -> tuple[dict, list[dict]]:
    """Train every model of ``names`` (default: all of ``TRANSLATORS``) with the same settings.

    Returns ``(models, rows)``: the trained models by name and one row each (see ``train_and_score``).
    """
    models, rows = {}, []
    for name in names or TRANSLATORS:
        models[name], row = train_and_score(name, data, **kwargs)
        rows.append(row)
    return models, rows


def format_table(rows: list[dict], bleu_label: str = "test BLEU") -> str:
    """The rows as a fixed-width text table (AER shown as '-' for models without attention)."""
    lines = [f"{'model':<15} {bleu_label:>10} {'AER':>6} {'parameters':>11} {'s/epoch':>8}"]
    for r in rows:
        aer = "-" if r.get("aer") is None else f"{r['aer']:.3f}"
        lines.append(f"{r['model']:<15} {r['bleu']:>10.1f} {aer:>6} {r['parameters']:>11,} "
                     f"{r['seconds_per_epoch']:>8.1f}")
    return "\n".join(lines)
