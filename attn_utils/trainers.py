"""The task trainers: each is the course's one loop, ``training_loop.fit``, with one task's batches and loss.

Every trainer takes the model first, trains it in place and returns the ``History``; they name the
same things the same way (``max_steps``, ``time_budget``, ``lr``, ``warmup``, ``clip``):

* ``train_nw`` (chapter 2): Nadaraya–Watson's learned width, full-batch SGD on the squared error;
* ``train_seq2seq`` (chapters 4–6, 10): any ``EncoderDecoder`` on a ``TranslationData``'s pairs,
  with teacher forcing (the decoder reads ``<bos>`` and the target shifted right; the batches
  already hold that input), ``losses.sequence_loss`` with label smoothing, gradient clipping and
  Adam whose learning rate rises linearly over ``warmup`` steps and then falls linearly to 0 at
  the budget, and validation BLEU at a few points;
* ``train_classifier`` (chapter 7): a classifier on minibatches of examples, with validation
  accuracy; ``train_seeds`` trains one per seed (``SeedRuns``), since a comparison of models rests
  on several;
* ``train_language_model`` (chapter 11): a language model on the batches of a ``batch_loss``;
  ``train_causal_text_lm`` and ``train_masked_text_lm`` are section 11.1's two recipes with it, on
  random windows of a token stream (the section and ``benchmarks/lm_choices.py`` train with them);
  ``train_copying_lm`` is section 11.4's, on fresh sequences of the copying task
  (``induction.repeated_segments``; the section and ``benchmarks/induction_runs.py`` train with it);
  ``train_previous_token_lm`` is section 11.3's, on random tokens whose target is the token before
  (the section and ``benchmarks/bench_modern_attention.py --extrapolation`` train with it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from .checks import check_bool, check_labelled_inputs, check_positive_int
from .data.windows import random_windows
from .device import model_device, set_seed
from .evaluate import accuracy, evaluate_bleu, predict
from .induction import repeated_segments
from .kernel_regression import NWKernelRegression, leave_one_out_mask
from .language_models import mask_tokens
from .losses import IGNORE_INDEX, causal_lm_loss, classifier_loss, masked_lm_loss, sequence_loss
from .metrics import evidence_hit_rate
from .training_loop import DIVERGENCE_FACTOR, History, describe_budget, fit

# ---------------------------------------------------------------------------------------------
# Chapter 2: Nadaraya–Watson kernel regression
# ---------------------------------------------------------------------------------------------


def train_nw(model: NWKernelRegression, x: torch.Tensor, y: torch.Tensor, max_steps: int = 50, lr: float = 1.0,
             leave_one_out: bool = True, progress: bool = False) -> History:
    """Fit ``model`` (an ``NWKernelRegression``) on examples (x, y), queries = keys = x, by full-batch SGD
    on the MSE; return the ``History``.

    The model is moved to the device and dtype of ``x`` first. Trained with ``fit`` (plain SGD,
    constant learning rate, no clipping). With ``leave_one_out`` (a bool) each example is predicted from
    the others only. ``x`` and ``y`` are floating-point tensors ``(n,)`` of one dtype, with ``n >= 1`` (``n >=
    2`` with ``leave_one_out``, so that every example has another to be predicted from).
    """
    if not isinstance(x, torch.Tensor) or x.dim() != 1 or not x.is_floating_point():
        raise ValueError(f"x must be a floating-point tensor of inputs (n,), got "
                         f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__} "
                         f"{getattr(x, 'dtype', '')}")
    if not isinstance(y, torch.Tensor) or y.shape != x.shape or y.dtype != x.dtype:
        raise ValueError(f"y must be a tensor of targets of x's shape {tuple(x.shape)} and dtype {x.dtype}, got "
                         f"{tuple(getattr(y, 'shape', ()))} {getattr(y, 'dtype', type(y).__name__)}")
    check_bool("leave_one_out", leave_one_out)
    if len(x) < (2 if leave_one_out else 1):
        raise ValueError(f"train_nw needs at least {2 if leave_one_out else 1} examples"
                         f"{' with leave_one_out' if leave_one_out else ''}, got {len(x)}")
    model.to(device=x.device, dtype=x.dtype)
    mask = leave_one_out_mask(len(x), x.device) if leave_one_out else None

    def step_loss(model, step):
        return ((model(x, x, y, mask) - y) ** 2).mean()

    return fit(model, step_loss, max_steps=max_steps, lr=lr, optimizer="sgd", schedule="constant", clip=None,
               progress=progress, desc="Nadaraya-Watson")


# ---------------------------------------------------------------------------------------------
# Chapters 4-6 and 10: the translators
# ---------------------------------------------------------------------------------------------


def trim_batch(batch, pad: int):
    """Drop the columns that are padding in every row: ``(src, dec_input, src_valid_lens, label)``."""
    src, dec_input, src_valid_lens, label = batch
    src_steps = int(src_valid_lens.max())
    tgt_steps = int((label != pad).sum(dim=1).max())
    return src[:, :src_steps], dec_input[:, :tgt_steps], src_valid_lens, label[:, :tgt_steps]


def _check_training_set(data) -> None:
    """``ValueError`` when ``data`` has no training pair (training would have nothing to learn from)."""
    if len(data.pairs("train")) == 0:
        raise ValueError(f"the training set is empty: {data.summary()}; load the data with num_train > 0 "
                         "(or None for every pair left after the validation and test sets)")


def _check_vocabulary_sizes(model, data) -> None:
    """``ValueError`` when ``model`` was built for a smaller source or target vocabulary than ``data``'s.

    Read where the translators keep it: ``model.config``'s ``src_vocab_size`` and ``tgt_vocab_size``
    (every ``make_...`` builder records them; the target one is also the output layer's size) and the
    number of rows of ``model.encoder.embedding`` and ``model.decoder.embedding``. Otherwise the first
    batch holding a token past the model's vocabulary fails deep inside torch (an index error on the
    CPU, a device-side assert on a GPU), possibly many steps into training. A larger vocabulary is fine.
    """
    needed = {"source": len(data.src_vocab), "target": len(data.tgt_vocab)}
    found = []  # (side, where the model says it, its size)
    config = getattr(model, "config", None)
    if isinstance(config, dict):
        for side, key in (("source", "src_vocab_size"), ("target", "tgt_vocab_size")):
            if isinstance(config.get(key), int):
                found.append((side, f"model.config[{key!r}]", config[key]))
    for side, part in (("source", "encoder"), ("target", "decoder")):
        embedding = getattr(getattr(model, part, None), "embedding", None)
        if isinstance(embedding, nn.Embedding):
            found.append((side, f"model.{part}.embedding", embedding.num_embeddings))
    for side, where, size in found:
        if size < needed[side]:
            raise ValueError(
                f"the model was built for a {side} vocabulary of {size:,} tokens ({where}), but the data's {side} "
                f"vocabulary has {needed[side]:,} ({data.summary()}); build the model with "
                f"len(data.src_vocab) and len(data.tgt_vocab), e.g. make_transformer(len(data.src_vocab), "
                f"len(data.tgt_vocab), ...)")


def _check_logits_width(logits: torch.Tensor, data) -> None:
    """The same for a model that keeps its sizes elsewhere: its logits (first step) must cover the
    target vocabulary (a shape, read on the host)."""
    if logits.dim() >= 1 and logits.shape[-1] < len(data.tgt_vocab):
        raise ValueError(f"the model must return logits (batch, steps, vocab) over at least the data's "
                         f"{len(data.tgt_vocab):,} target tokens, got shape {tuple(logits.shape)}")


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

    An empty training set is a ``ValueError``, and so is a model built for a smaller source or target
    vocabulary than ``data``'s (``model.config``, the embeddings, the first step's logits). A loss that
    rises ``divergence_factor`` times above its start stops training with ``RuntimeError`` (``fit``
    says how; ``None`` turns the check off).
    """
    device = model_device(model) if device is None else torch.device(device)
    model.to(device)
    torch.manual_seed(seed)
    pad = data.tgt_vocab.pad
    _check_training_set(data)  # before the budget line and the progress bar
    _check_vocabulary_sizes(model, data)
    check_positive_int("batch_size", batch_size)
    if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, (int, float)) \
            or not 0 <= label_smoothing <= 1:
        raise ValueError(f"label_smoothing must be a number in [0, 1], got {label_smoothing!r}")
    if eval_points and len(data.pairs(eval_split)) == 0:  # pairs() names a split that does not exist
        raise ValueError(f"eval_split {eval_split!r} is empty ({data.summary()}): validation BLEU has nothing to "
                         f"translate; pass eval_points=0, or another eval_split")
    batches = _batches(data, batch_size, seed)

    def step_loss(model, step):
        src, dec_input, src_valid_lens, label = (t.to(device) for t in trim_batch(next(batches), pad))
        logits = model(src, dec_input, src_valid_lens)
        if step == 0:
            _check_logits_width(logits, data)
        loss = sequence_loss(logits, label, pad=pad, label_smoothing=label_smoothing)
        return loss, {"tokens": int((label != pad).sum())}

    return fit(model, step_loss, max_steps=max_steps, time_budget=time_budget, lr=lr, warmup=warmup, clip=clip,
               betas=betas, evaluate=lambda m: {"val_bleu": evaluate_bleu(m, data, eval_split)},
               eval_points=eval_points, progress=progress, divergence_factor=divergence_factor)


# ---------------------------------------------------------------------------------------------
# Chapter 7: classifiers, and several seeds
# ---------------------------------------------------------------------------------------------


def train_classifier(model: nn.Module, inputs: Sequence[torch.Tensor], labels: torch.Tensor, *,
                     max_steps: int | None = None, time_budget: float | None = None, batch_size: int = 64,
                     lr: float = 1e-3, warmup: int = 0, weight_decay: float = 0.0, clip: float | None = 5.0,
                     val: tuple[Sequence[torch.Tensor], torch.Tensor] | None = None, eval_every: int = 50,
                     val_evidence: torch.Tensor | None = None, seed: int = 0, progress: bool = True) -> History:
    """Train ``model`` with ``fit`` (Adam, constant learning rate after ``warmup``) on minibatches drawn
    without replacement (reshuffled each epoch); return the ``History``.

    ``model(*inputs)`` returns logits ``(batch, classes)`` and keeps the attention weights of its last
    call in ``attention_weights``; the loss is ``losses.classifier_loss`` (the model's own
    ``training_loss`` where it has one). ``inputs`` are tensors with one row per example (moved to the
    model's device batch by batch), ``labels`` the class indices. Each step records the cross-entropy
    as its loss and the batch accuracy (``history.metrics["accuracy"]``). ``val = (val_inputs,
    val_labels)`` is scored every ``eval_every`` steps and after the last
    (``history.evals["val_accuracy"]``). With ``val_evidence`` ``(n_val,)``, the position that decides
    each validation label, each evaluation also records ``metrics.evidence_hit_rate`` of the same
    pass (``history.evals["val_hit_rate"]``); it changes nothing in the training. The order of the
    batches depends only on ``seed``.
    """
    inputs = tuple(inputs)
    check_labelled_inputs(inputs, labels)
    if labels.shape[0] == 0:  # every batch would be empty, its mean loss NaN
        raise ValueError("labels is empty: train_classifier needs at least one example, got 0")
    check_positive_int("batch_size", batch_size)
    if val is not None:  # checked now, not at the first evaluation after eval_every steps of training
        if not (isinstance(val, (tuple, list)) and len(val) == 2):
            raise ValueError(f"val must be a pair (val_inputs, val_labels), got {type(val).__name__}")
        check_labelled_inputs(tuple(val[0]), val[1])
        if val[1].shape[0] == 0:
            raise ValueError("val's labels are empty: validation accuracy needs at least one example; pass val=None")
    if val_evidence is not None and (val is None or not isinstance(val_evidence, torch.Tensor)
                                     or val_evidence.shape != val[1].shape):
        raise ValueError(f"val_evidence must be a tensor with one position per validation label "
                         f"{'(no val given)' if val is None else tuple(val[1].shape)}, got "
                         f"{tuple(val_evidence.shape) if isinstance(val_evidence, torch.Tensor) else val_evidence!r}")
    device = model_device(model)
    generator = torch.Generator().manual_seed(seed)
    num = labels.shape[0]
    order, position = torch.randperm(num, generator=generator), 0

    def step_loss(model, step):
        nonlocal order, position
        if position + batch_size > num:
            order, position = torch.randperm(num, generator=generator), 0
        idx = order[position:position + batch_size]
        position += batch_size
        y = labels[idx].to(device)
        objective, cross_entropy, logits = classifier_loss(model, [x[idx].to(device) for x in inputs], y)
        return objective, {"loss": cross_entropy.detach(), "accuracy": (logits.argmax(-1) == y).float().mean()}

    def evaluate(trained):
        if val_evidence is None:
            return {"val_accuracy": accuracy(trained, *val)}
        predictions, weights = predict(trained, tuple(val[0]))
        if weights is None:
            raise ValueError(f"val_evidence needs a model that keeps attention_weights; "
                             f"{type(trained).__name__} keeps none")
        return {"val_accuracy": float((predictions == val[1].cpu()).float().mean()),
                "val_hit_rate": evidence_hit_rate(weights, val_evidence)}

    return fit(model, step_loss, max_steps=max_steps, time_budget=time_budget, lr=lr, warmup=warmup,
               schedule="constant", clip=clip, weight_decay=weight_decay,
               evaluate=evaluate if val is not None else None,
               eval_every=eval_every if val is not None else None, progress=progress)


@dataclass
class SeedRuns:
    """One model per seed, trained the same way: ``seeds``, the trained ``models`` and their ``histories``."""

    seeds: list[int]
    models: list[nn.Module]
    histories: list[History]


def train_seeds(build: Callable[[], nn.Module], inputs: Sequence[torch.Tensor], labels: torch.Tensor, *,
                seeds: Sequence[int] = (0, 1, 2), device: torch.device | str | None = None, progress: bool = True,
                **train_options) -> SeedRuns:
    """Train ``build()`` once per seed with ``train_classifier`` and return the ``SeedRuns``.

    For each seed, ``set_seed(seed)`` comes first, so the seed fixes the initial weights, the
    minibatch order (``train_classifier(..., seed=seed)``) and any sampling in the model; the model
    is moved to ``device`` when one is given. ``train_options`` go to ``train_classifier``
    (``max_steps``, ``lr``, ``val``, ``eval_every``, ...), the same for every seed. With
    ``progress``, prints the seeds and the budget once and shows one progress bar over the seeds.
    ``metrics.steps_to_reach`` reads when a run first reached a level, ``plot.plot_seed_curves``
    draws the runs, ``metrics.spread`` summarises a number over the seeds.
    """
    from tqdm.auto import tqdm

    seeds = list(seeds)
    if not seeds or len(set(seeds)) != len(seeds) or not all(isinstance(s, int) for s in seeds):
        raise ValueError(f"seeds must be a non-empty sequence of distinct ints, got {seeds}")
    if "seed" in train_options:
        raise ValueError("pass the seeds as seeds=[...]; train_seeds sets train_classifier's seed itself")
    if progress:
        print(f"{len(seeds)} seeds ({', '.join(map(str, seeds))}), each "
              f"{describe_budget(train_options.get('max_steps'), train_options.get('time_budget'))}")
    models, histories = [], []
    for seed in tqdm(seeds, desc="seeds", unit="seed", disable=not progress):
        set_seed(seed)
        model = build()
        if not isinstance(model, nn.Module):
            raise ValueError(f"build() must return an nn.Module, got {type(model).__name__}")
        if device is not None:
            model = model.to(device)
        histories.append(train_classifier(model, inputs, labels, seed=seed, progress=False, **train_options))
        models.append(model)
    return SeedRuns(seeds, models, histories)


# ---------------------------------------------------------------------------------------------
# Chapter 11: language models
# ---------------------------------------------------------------------------------------------


def train_language_model(model: nn.Module, batch_loss: Callable[[nn.Module, int], torch.Tensor], *,
                         max_steps: int | None = None, time_budget: float | None = None, lr: float = 1e-3,
                         warmup: int = 100, clip: float = 1.0, betas=(0.9, 0.98), progress: bool = True,
                         desc: str = "training", **fit_options) -> History:
    """Train ``model`` with ``fit`` on ``batch_loss(model, step)``; return the ``History``.

    Adam with linear warm-up over ``warmup`` steps, then linear decay to 0 at the end of the budget,
    and gradient clipping at norm ``clip``, as ``train_seq2seq``. The model is left in eval mode.
    ``fit_options`` go to ``fit`` (e.g. ``optimizer="adamw", weight_decay=0.1``, ``evaluate``,
    ``eval_every``). The losses are ``losses.causal_lm_loss`` and ``losses.masked_lm_loss``.
    """
    return fit(model, batch_loss, max_steps=max_steps, time_budget=time_budget, lr=lr, warmup=warmup, clip=clip,
               betas=betas, progress=progress, desc=desc, **fit_options)


def _text_lm_options(lr, warmup, weight_decay) -> dict:
    """Section 11.1's optimiser for both recipes: AdamW with weight decay, warm-up, linear decay to 0."""
    return dict(lr=lr, warmup=warmup, optimizer="adamw", weight_decay=weight_decay, progress=False)


def train_causal_text_lm(model: nn.Module, stream: torch.Tensor, *, context: int, max_steps: int, seed: int,
                         pad: int, batch_size: int = 32, lr: float = 3e-3, warmup: int = 100,
                         weight_decay: float = 0.1, evaluate=None, eval_every: int | None = None) -> History:
    """Train a ``CausalLanguageModel`` (``model(X)`` returns ``(logits, cache)``) on ``batch_size`` random
    windows of ``context + 1`` tokens of ``stream`` per step, drawn with a generator seeded by ``seed``:
    every position predicts the next token (``causal_lm_loss``; ``pad`` targets would not count).
    ``evaluate`` and ``eval_every`` go to ``fit``. Returns the ``History``; the model ends in eval mode."""
    device = model_device(model)
    draws = torch.Generator().manual_seed(seed)

    def step_loss(model, step):
        batch = random_windows(stream, batch_size, context, draws).to(device)  # (batch, context + 1)
        return causal_lm_loss(model, batch, pad)

    return train_language_model(model, step_loss, max_steps=max_steps, evaluate=evaluate, eval_every=eval_every,
                                **_text_lm_options(lr, warmup, weight_decay))


def train_masked_text_lm(model: nn.Module, stream: torch.Tensor, *, context: int, max_steps: int, seed: int,
                         mask_id: int, vocab_size: int, first_token: int, keep: Sequence[int] = (),
                         mask_rate: float = 0.15, batch_size: int = 32, lr: float = 5e-3, warmup: int = 100,
                         weight_decay: float = 0.1) -> History:
    """Train a ``MaskedLanguageModel`` on ``batch_size`` random windows of ``context`` tokens of ``stream``
    per step, masked anew per batch by ``mask_tokens`` with rate ``mask_rate`` (random replacements from
    ``first_token`` on; the tokens in ``keep``, e.g. ``<bos>``, are never chosen); the loss is
    ``masked_lm_loss`` at the chosen positions only. Windows and masks come from one generator seeded
    by ``seed``. Returns the ``History``; the model ends in eval mode."""
    device = model_device(model)
    draws = torch.Generator().manual_seed(seed)
    kept = torch.tensor(list(keep), dtype=torch.long)

    def step_loss(model, step):
        windows = random_windows(stream, batch_size, context - 1, draws)  # (batch, context)
        inputs, labels = mask_tokens(windows, ~torch.isin(windows, kept), mask_id, vocab_size,
                                     random_low=first_token, mask_prob=mask_rate, generator=draws)
        inputs, labels = inputs.to(device), labels.to(device)
        return masked_lm_loss(model(inputs, predict_at=labels != IGNORE_INDEX), labels)

    return train_language_model(model, step_loss, max_steps=max_steps, **_text_lm_options(lr, warmup, weight_decay))


def train_copying_lm(model: nn.Module, *, max_steps: int, seed: int, vocab_size: int, length: int,
                     min_segment: int, max_segment: int, batch_size: int = 64, lr: float = 3e-3, warmup: int = 100,
                     evaluate=None, eval_every: int | None = None) -> History:
    """Section 11.4's recipe: train a ``CausalLanguageModel`` on ``batch_size`` fresh sequences of the copying
    task per step (``induction.repeated_segments(batch_size, length, vocab_size, min_segment, max_segment)``,
    drawn with one generator seeded by ``seed``), every position predicting the next token (the mean
    cross-entropy over all of them, most of them unpredictable). The optimiser is ``train_language_model``'s
    (Adam, betas 0.9 and 0.98, warm-up over ``warmup`` steps, linear decay, clipping at norm 1); ``evaluate``
    and ``eval_every`` go to ``fit`` (e.g. ``evaluate.copy_scores`` on held-out sequences). Returns the
    ``History``; the model ends in eval mode."""
    device = model_device(model)
    draws = torch.Generator().manual_seed(seed)

    def step_loss(model, step):
        tokens = repeated_segments(batch_size, length, vocab_size, min_segment, max_segment,
                                   generator=draws).tokens.to(device)
        logits, _ = model(tokens[:, :-1])  # (batch, length - 1, vocab): every position predicts the next token
        return nn.functional.cross_entropy(logits.reshape(-1, vocab_size), tokens[:, 1:].reshape(-1))

    return train_language_model(model, step_loss, max_steps=max_steps, lr=lr, warmup=warmup, evaluate=evaluate,
                                eval_every=eval_every, progress=False)


def train_previous_token_lm(model: nn.Module, *, max_steps: int, seed: int, vocab_size: int, length: int,
                            batch_size: int = 64, lr: float = 3e-3, warmup: int = 50) -> History:
    """Section 11.3's recipe (chapter 8's task): train a ``CausalLanguageModel`` on ``batch_size`` fresh
    sequences of ``length`` random tokens (``torch.randint(vocab_size, ...)`` with one generator seeded by
    ``seed``) per step; at every position but the first the target is the token one position *earlier*,
    which only positions can find. The mean cross-entropy over those positions, ``fit``'s Adam with
    warm-up over ``warmup`` steps, linear decay and clipping at norm 1. ``evaluate.previous_token_accuracy``
    scores the result. Returns the ``History``; the model ends in eval mode."""
    for name, value in (("max_steps", max_steps), ("vocab_size", vocab_size), ("batch_size", batch_size)):
        check_positive_int(name, value)
    if not isinstance(length, int) or isinstance(length, bool) or length < 2:
        raise ValueError(f"length must be an int >= 2 (a position and the one before it), got {length!r}")
    device = model_device(model)
    draws = torch.Generator().manual_seed(seed)

    def step_loss(model, step):
        tokens = torch.randint(vocab_size, (batch_size, length), generator=draws).to(device)
        logits, _ = model(tokens)  # (batch, length, vocab)
        return nn.functional.cross_entropy(logits[:, 1:].reshape(-1, vocab_size), tokens[:, :-1].reshape(-1))

    return fit(model, step_loss, max_steps=max_steps, lr=lr, warmup=warmup, progress=False)
