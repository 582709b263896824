"""Train several translators on the same data with the same budget and tabulate what they achieve.

``registry.TRANSLATORS`` names the models chapters 4–6 and 10 compare; ``compare_translators`` trains each
with ``train_seq2seq`` (same data, same seed, same budget) and returns one row per model: parameters,
steps, seconds of training, seconds per epoch (the measured time per step times the steps an
epoch of the training set takes), test BLEU and, on corpora with gold alignments, the alignment
error rate of its attention.

``BOOK_RECIPES`` holds how each translator is sized and trained on Tatoeba at the book budget: the
chapters train one seed with it live, and ``benchmarks/compare_translators.py`` trains three seeds of
each and stores them (``stored_results``). Every model gets the same steps and batch. The learning rate
of no attention, Bahdanau, Luong general and the Transformer is the best of the same sweep (1e-3, 2e-3,
5e-3 and 1e-2 for 600 steps, validation BLEU; kept in the stored file); the other Luong variants take
Luong general's, Bahdanau's uniform control Bahdanau's. Warm-up is 100 steps for the recurrent models and 200
for the Transformer.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from .checks import check_bool, check_positive_int
from .device import get_device, set_seed
from .evaluate import alignment_error, bleu_report, evaluate_bleu
from .registry import CHAPTER_6_TRANSLATORS, build_translator
from .seq2seq import EncoderDecoder
from .trainers import train_seq2seq
from .training_loop import History

#: The book budget of the Tatoeba translators: the same steps of the same batch for every model.
BOOK_STEPS = 3000
BOOK_BATCH = 64


class Recipe(NamedTuple):
    """How one run of the comparison builds its model (``translator``, a key of ``TRANSLATORS``, with the
    ``model`` sizes and options of ``build_translator``) and trains it (``train``: ``train_seq2seq``
    options besides the budget) at the book budget."""

    translator: str
    model: dict
    train: dict


_RNN, _LUONG = {"lr": 5e-3, "warmup": 100}, {"num_layers": 1, "scaled": True}
BOOK_RECIPES = {
    "no attention": Recipe("no attention", {"num_layers": 1}, {"lr": 1e-2, "warmup": 100}),
    "Bahdanau": Recipe("Bahdanau", {}, _RNN),
    "Bahdanau uniform": Recipe("Bahdanau uniform", {}, _RNN),
    "Luong dot": Recipe("Luong dot", _LUONG, _RNN),
    "Luong general": Recipe("Luong general", _LUONG, _RNN),
    "Luong concat": Recipe("Luong concat", {"num_layers": 1}, _RNN),
    "Luong local-m": Recipe("Luong local-m", {**_LUONG, "half_width": 2}, _RNN),
    "Luong local-p": Recipe("Luong local-p", {**_LUONG, "half_width": 2}, _RNN),
    "Luong general, unscaled": Recipe("Luong general", {"num_layers": 1}, _RNN),
    "Luong uniform": Recipe("Luong uniform", {"num_layers": 1}, _RNN),
    "Luong general, 2 layers": Recipe("Luong general", {**_LUONG, "num_layers": 2}, _RNN),
    "Luong general, no feeding": Recipe("Luong general", {**_LUONG, "input_feeding": False}, _RNN),
    "Transformer": Recipe("Transformer", {"num_hiddens": 256, "dropout": 0.1}, {"lr": 2e-3, "warmup": 200}),
}
#: options of the models' builders that ``train_and_score`` passes on (the rest go to ``train_seq2seq``)
MODEL_OPTIONS = ("dropout", "scaled", "input_feeding")


#: The grammar corpus's sizes and budget. Chapter 6 trains every recipe's design with them, and so do the stored
#: comparison's grammar runs, whose alignment error rates its table shows.
GRAMMAR_SETTINGS = {"embed_size": 32, "num_hiddens": 64, "lr": 1e-2, "batch_size": 64, "max_steps": 300, "warmup": 20}


def recipe_design(name: str) -> dict:
    """The design of the book recipe ``name`` (a key of ``BOOK_RECIPES``), without its sizes or training: the
    translator and its options (depth, scaled scores, window), as ``build_and_train`` keyword arguments."""
    if not isinstance(name, str) or name not in BOOK_RECIPES:
        raise ValueError(f"name must be one of {list(BOOK_RECIPES)}, got {name!r}")
    recipe = BOOK_RECIPES[name]
    return {"translator": recipe.translator, **recipe.model}


def book_settings(name: str, max_steps: int = BOOK_STEPS) -> dict:
    """``train_and_score`` keyword arguments of the book recipe ``name`` (a key of ``BOOK_RECIPES``; ``max_steps``
    steps of ``BOOK_BATCH``)."""
    return {**recipe_design(name), **BOOK_RECIPES[name].train, "max_steps": max_steps, "batch_size": BOOK_BATCH}


def grammar_settings(name: str, max_steps: int = GRAMMAR_SETTINGS["max_steps"]) -> dict:
    """``train_and_score`` keyword arguments of the design of recipe ``name`` at the grammar corpus's sizes and
    budget (``GRAMMAR_SETTINGS``, with ``max_steps`` steps)."""
    return {**recipe_design(name), **GRAMMAR_SETTINGS, "max_steps": max_steps}


def build_and_train(name: str, data, *, embed_size: int = 256, num_hiddens: int = 256, num_layers: int = 1,
                    half_width: int = 2, seed: int = 0, device=None, translator: str | None = None,
                    **kwargs) -> tuple[EncoderDecoder, History]:
    """Build ``TRANSLATORS[translator or name]`` from seed ``seed`` and train it: ``(model, history)``.

    The ``MODEL_OPTIONS`` found in ``kwargs`` go to the builder, the rest to ``train_seq2seq``.
    ``device=None`` means ``get_device()`` (a GPU when there is one).
    """
    set_seed(seed)
    device = get_device() if device is None else device
    options = {key: kwargs.pop(key) for key in MODEL_OPTIONS if key in kwargs}
    model = build_translator(translator or name, data, embed_size, num_hiddens, num_layers, half_width, device,
                             **options)
    return model, train_seq2seq(model, data, seed=seed, **{"eval_points": 0, **kwargs})


def train_recipe(name: str, data, *, max_steps: int = BOOK_STEPS, seed: int = 0, device=None,
                 **kwargs) -> tuple[EncoderDecoder, History]:
    """Build and train the book recipe ``name`` for ``max_steps`` steps: ``(model, history)``.

    With the book's ``max_steps`` and ``seed=0`` it repeats the seed-0 run of the stored comparison
    (``benchmarks/compare_translators.py``): the same initial weights and the same batches. The result is
    identical only with the same device and number of threads; otherwise floating-point sums taken in another
    order let the two runs drift apart by about as much as two seeds differ. ``kwargs`` go to ``train_seq2seq``
    (``eval_points``, ``progress``, or ``time_budget``, which then ends training first).
    """
    return build_and_train(name, data, seed=seed, device=device, **{**book_settings(name, max_steps), **kwargs})


def train_and_score(name: str, data, *, seed: int = 0, split: str = "test", num_samples: int | None = None,
                    keep_hypotheses: bool = False, **kwargs) -> tuple[EncoderDecoder, dict]:
    """Build, train (``build_and_train(name, data, seed=seed, **kwargs)``) and score one model: ``(model, row)``.

    With ``num_samples``, the row also holds ``bleu_report``'s bootstrap intervals, multi-reference BLEU and
    BLEU in each of the split's length buckets (``by_length``; ``data.split.buckets``), the ``hypotheses``
    too with ``keep_hypotheses``, and, when validation BLEU was measured (``eval_points``), the learning
    ``curve``: steps, seconds of training and validation BLEU at each evaluation. ``split``, ``num_samples``
    (a positive int or None) and ``keep_hypotheses`` (a bool) are checked before training.
    """
    if not hasattr(data, "pairs"):
        raise ValueError(f"data must be the TranslationData of load_translation_data, got {type(data).__name__}")
    data.pairs(split)  # a split that does not exist, named now rather than after training
    if num_samples is not None:
        check_positive_int("num_samples", num_samples, hint="or None (BLEU alone)")
    check_bool("keep_hypotheses", keep_hypotheses)
    model, history = build_and_train(name, data, seed=seed, **kwargs)
    batch_size = kwargs.get("batch_size", 128)
    steps_per_epoch = math.ceil(len(data.train) / batch_size)
    row = {
        "model": name,
        "parameters": sum(p.numel() for p in model.parameters()),
        "steps": len(history.steps),
        "train_seconds": history.train_seconds,
        "seconds_per_epoch": history.train_seconds / max(1, len(history.steps)) * steps_per_epoch,
        "aer": None,
    }
    if num_samples is None:
        row["bleu"] = evaluate_bleu(model, data, split)
    else:  # one decoding of the split gives BLEU, its interval and multi-reference BLEU
        row.update(seed=seed, **bleu_report(model, data, split, num_samples=num_samples, seed=seed,
                                            buckets=data.split.buckets, keep_hypotheses=keep_hypotheses))
        steps, bleus = history.curve("val_bleu") if "val_bleu" in history.evals else ([], [])
        row["curve"] = {"steps": list(steps), "seconds": [history.seconds[s - 1] for s in steps],
                        "val_bleu": list(bleus)}
    if data.pairs(split).alignments is not None and model.decoder.has_attention:
        row["aer"] = alignment_error(model, data, split)
    return model, row


def compare_translators(data, names=None, *, recipes: bool = False, **kwargs) -> tuple[dict, list[dict]]:
    """Train every model of ``names`` (default: chapter 6's seven, ``CHAPTER_6_TRANSLATORS``) with the same settings.

    Returns ``(models, rows)``: the trained models by name and one row each (see ``train_and_score``).
    ``names``: a list of names of ``registry.TRANSLATORS`` (or None). With ``recipes=True`` the names are keys
    of ``BOOK_RECIPES`` and each model has its recipe's design (``recipe_design``: e.g. "Luong general" scaled,
    "Luong general, unscaled" as the paper scores), at the sizes and budget of ``kwargs``.
    """
    check_bool("recipes", recipes)
    if names is not None and (isinstance(names, str) or not isinstance(names, (list, tuple)) or not names
                              or not all(isinstance(n, str) for n in names)):
        raise ValueError(f"names must be a non-empty list of translator names, or None, got {names!r:.60}")
    models, rows = {}, []
    for name in names or CHAPTER_6_TRANSLATORS:
        models[name], row = train_and_score(name, data, **{**(recipe_design(name) if recipes else {}), **kwargs})
        rows.append(row)
    return models, rows
