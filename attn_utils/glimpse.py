"""Soft and hard attention over the regions of an image, after Xu et al. (2015) and Mnih et al. (2014).

The task (its canvases come from ``attn_utils.data.digits``): a canvas is a grid of regions, each
holding an 8x8 handwritten digit from scikit-learn's ``load_digits``; a bright frame in the margin of
one region says which digit to read, and a few other regions carry a *broken* frame (one side
missing), so that bright margins alone do not decide. The label is the digit in the framed region,
and its index is the ``evidence``.

The model has two pathways, as glimpse models do:

- *where*: a cheap scorer reads a coarse (average-pooled) view of every region, frame included,
  and gives each region a score ``e_i = w^T tanh(W g_i + b)``; ``alpha = softmax(e)``;
- *what*: a small CNN encoder reads a region's digit at full resolution, ``f_i``, and a linear
  classifier reads the context ``z``.

``mode="soft"`` encodes every region and reads ``z = sum_i alpha_i f_i``, the expected feature under
``alpha``, trained by backpropagation. ``mode="hard"`` samples one region ``s ~ Categorical(alpha)``
and encodes only that one, ``z = f_s``; the scorer then gets no gradient through ``z`` and is
trained by REINFORCE (Williams, 1992) with a baseline learned by regression on the reward (Mnih et
al., 2014). ``mode="uniform"`` fixes ``alpha_i = 1/L``: the same network without any "where".
Because the encoder never sees the frame, the uniform model cannot know which digit is asked for.
"""

from __future__ import annotations

import numpy as np
import torch
from matplotlib import patches
from matplotlib import pyplot as plt
from torch import nn
from torch.nn import functional as F

from .canvas import DIGIT, MARGIN, REGION
from .checks import check_bool, check_positive_int, check_weights_dtype, checks_read_values, is_finite_number
from .pooling import pool_by_scores

MODES = ("soft", "hard", "uniform")
REWARDS = ("log_likelihood", "correct")


def soft_context(features: torch.Tensor, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(z, alpha)``: ``z = sum_i alpha_i f_i`` with ``alpha = softmax(scores)``; features ``(batch, L, d)``,
    scores ``(batch, L)`` -> ``z`` ``(batch, d)``, ``alpha`` ``(batch, L)``.

    ``z`` is the expectation of the region feature under ``alpha``, which is what Xu et al.'s
    deterministic ("soft") attention feeds the decoder: attention pooling with one query per canvas,
    computed by ``pooling.pool_by_scores`` (the package's one weighted average). Equal scores (the
    uniform model) give the mean of the features.
    """
    for name, t in (("features", features), ("scores", scores)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a tensor, got {type(t).__name__}")
    if features.dim() != 3 or scores.shape != features.shape[:2]:
        raise ValueError(f"expected features (batch, L, d) and scores (batch, L), got "
                         f"{tuple(features.shape)} and {tuple(scores.shape)}")
    return pool_by_scores(scores, features)  # (batch, d), (batch, L)


def reinforce_surrogate(log_probs: torch.Tensor, rewards: torch.Tensor, baseline: torch.Tensor | float | None = None):
    """The mean of ``(R - b) * log pi(s)``, with ``R - b`` held constant: a quantity to *maximise*.

    ``log_probs`` are the log-probabilities of the choices that were sampled (one per example),
    ``rewards`` their rewards and ``baseline`` a per-example (or scalar) baseline. Its gradient with
    respect to the parameters of ``log_probs`` is the score-function (REINFORCE) estimate of the
    gradient of the expected reward, averaged over the batch. ``R - b`` is detached, so the
    surrogate trains neither the reward nor the baseline: those get their own losses. ``log_probs`` and
    ``rewards`` are floating-point tensors of one shape; a number ``baseline`` must be finite.
    """
    for name, t in (("log_probs", log_probs), ("rewards", rewards)):
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            raise ValueError(f"{name} must be a floating-point tensor, got {getattr(t, 'dtype', type(t).__name__)}")
    if baseline is not None and not isinstance(baseline, torch.Tensor) and not is_finite_number(baseline):
        raise ValueError(f"baseline must be None, a finite number or a tensor, got {baseline!r}")
    if log_probs.shape != rewards.shape:
        raise ValueError(f"log_probs and rewards must have the same shape (one per sampled choice), got "
                         f"{tuple(log_probs.shape)} and {tuple(rewards.shape)}")
    if baseline is None:
        baseline = 0.0
    elif torch.as_tensor(baseline).dim() and torch.as_tensor(baseline).shape != rewards.shape:
        raise ValueError(f"baseline must be a scalar or have the rewards' shape {tuple(rewards.shape)}, "
                         f"got {tuple(torch.as_tensor(baseline).shape)}")
    advantage = rewards - baseline
    return (advantage.detach() * log_probs).mean()


class GlimpseClassifier(nn.Module):
    """Soft, hard or uniform attention over the ``grid x grid`` regions of a canvas; one implementation.

    ``forward(images) -> logits (batch, classes)``; ``attention_weights`` keeps ``alpha`` ``(batch, L)``
    of the last call and, in hard mode, ``glimpses`` the region that was read ``(batch,)``. In hard
    mode ``forward`` samples a region while training and, in evaluation, reads the most probable one
    (``inference="argmax"``) or a sampled one (``inference="sample"``). ``training_loss`` is the
    objective that :func:`attn_utils.train_classifier` minimises.

    Hard-mode objective (per batch, ``s`` sampled from ``alpha``, ``R`` the reward)::

        cross-entropy of the classifier on f_s            (backprop through the chosen region)
        - reinforce_surrogate(log alpha_s, R, b)           (score function, for the scorer)
        + (b - R)^2                                        (the baseline network learns E[R | image])
        - entropy_weight * H(alpha)                        (optional exploration bonus)

    with ``R = log p(y | f_s)`` (``reward="log_likelihood"``, as Xu et al.) or ``1[correct]``
    (``reward="correct"``, as Mnih et al.). ``baseline=False`` uses ``b = 0``.

    Arguments: ``grid`` an int >= 2, ``pool`` a positive int dividing 10, the sizes positive ints,
    ``baseline`` ``True`` or ``False``, ``entropy_weight`` a finite number >= 0. ``images`` are
    ``(batch, 1, 10 grid, 10 grid)`` in the dtype of the weights, ``labels`` integers ``(batch,)`` in
    ``[0, num_classes)``.
    """

    def __init__(self, mode: str = "soft", grid: int = 3, hidden: int = 64, score_hidden: int = 32,
                 num_classes: int = 10, pool: int = 2, reward: str = "log_likelihood", baseline: bool = True,
                 entropy_weight: float = 0.0, inference: str = "argmax"):
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if reward not in REWARDS:
            raise ValueError(f"reward must be one of {REWARDS}, got {reward!r}")
        if inference not in ("argmax", "sample"):
            raise ValueError(f"inference must be 'argmax' or 'sample', got {inference!r}")
        check_positive_int("pool", pool, hint=f"dividing {REGION}")
        if not isinstance(grid, int) or grid < 2 or REGION % pool:
            raise ValueError(f"grid must be an int >= 2 and pool must divide {REGION}, "
                             f"got grid={grid!r}, pool={pool!r}")
        for name, size in (("hidden", hidden), ("score_hidden", score_hidden), ("num_classes", num_classes)):
            check_positive_int(name, size)
        check_bool("baseline", baseline)
        if not is_finite_number(entropy_weight) or entropy_weight < 0:
            raise ValueError(f"entropy_weight (the exploration bonus) must be a finite number >= 0, got "
                             f"{entropy_weight!r}")
        self.mode, self.grid, self.pool = mode, grid, pool
        self.reward, self.use_baseline = reward, baseline
        self.entropy_weight, self.inference = entropy_weight, inference
        coarse = (REGION // pool) ** 2
        # where: e_i = w^T tanh(W g_i + b) on the coarse view g_i of region i
        self.score_hidden = nn.Linear(coarse, score_hidden)
        self.score_out = nn.Linear(score_hidden, 1, bias=False)
        # what: a small CNN on a region's 8x8 digit -> f_i (hidden,)
        self.encoder = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # (16, 4, 4)
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # (32, 2, 2)
            nn.Flatten(), nn.Linear(32 * 2 * 2, hidden), nn.ReLU(),
        )
        self.classifier = nn.Linear(hidden, num_classes)
        # Mnih et al.'s learned baseline b(x): a small network on the coarse view of the whole canvas
        self.baseline = nn.Sequential(nn.Linear(grid * grid * coarse, 32), nn.Tanh(), nn.Linear(32, 1))
        self.attention_weights: torch.Tensor | None = None
        self.glimpses: torch.Tensor | None = None

    # ---- the two pathways -------------------------------------------------------------------
    def check_images(self, images) -> None:
        """Raise ``ValueError`` unless ``images`` are ``(batch, 1, 10 grid, 10 grid)`` in the weights' dtype."""
        side = self.grid * REGION
        if not isinstance(images, torch.Tensor) or images.dim() != 4 or images.shape[1:] != (1, side, side):
            raise ValueError(f"expected images of shape (batch, 1, {side}, {side}) for a {self.grid}x{self.grid} "
                             f"grid of {REGION}x{REGION} regions, got "
                             f"{tuple(images.shape) if isinstance(images, torch.Tensor) else type(images).__name__}")
        check_weights_dtype(self, images, "GlimpseClassifier")

    def regions(self, images: torch.Tensor) -> torch.Tensor:
        """``(batch, 1, 10 grid, 10 grid)`` -> ``(batch, L, 10, 10)``, regions row by row."""
        self.check_images(images)
        x = images[:, 0].unfold(1, REGION, REGION).unfold(2, REGION, REGION)  # (batch, grid, grid, R, R)
        return x.reshape(images.shape[0], self.grid * self.grid, REGION, REGION)

    def coarse(self, regions: torch.Tensor) -> torch.Tensor:
        """The cheap view: each region average-pooled by ``pool``, ``(batch, L, (10 / pool)^2)``."""
        batch, num = regions.shape[:2]
        pooled = F.avg_pool2d(regions.reshape(batch * num, 1, REGION, REGION), self.pool)  # (batch L, 1, r, r)
        return pooled.reshape(batch, num, (REGION // self.pool) ** 2)

    def scores(self, regions: torch.Tensor) -> torch.Tensor:
        """``e_i = w^T tanh(W g_i + b)``, ``(batch, L)``."""
        return self.score_out(torch.tanh(self.score_hidden(self.coarse(regions)))).squeeze(-1)

    def encode(self, digits: torch.Tensor) -> torch.Tensor:
        """Features of regions ``(..., 10, 10)`` -> ``(..., hidden)``; reads only the 8x8 digit, not the margin."""
        inner = digits[..., MARGIN:MARGIN + DIGIT, MARGIN:MARGIN + DIGIT]
        lead = inner.shape[:-2]
        return self.encoder(inner.reshape(-1, 1, DIGIT, DIGIT)).reshape(*lead, self.classifier.in_features)

    def attend(self, images: torch.Tensor):
        """``(regions (batch, L, 10, 10), scores (batch, L), alpha (batch, L))``; alpha is uniform in uniform mode."""
        regions = self.regions(images)
        if self.mode == "uniform":  # no "where" pathway: equal scores, and the scorer is not run
            scores = regions.new_zeros(regions.shape[:2])
        else:
            scores = self.scores(regions)
        return regions, scores, torch.softmax(scores, dim=-1)

    def _choose(self, alpha: torch.Tensor, sample: bool) -> torch.Tensor:
        return torch.multinomial(alpha, 1).squeeze(-1) if sample else alpha.argmax(-1)  # (batch,)

    def _read(self, regions: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
        """Encode only the chosen region of each canvas: ``(batch, hidden)``."""
        return self.encode(regions[torch.arange(regions.shape[0], device=regions.device), chosen])

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        regions, scores, alpha = self.attend(images)
        self.attention_weights = alpha
        if self.mode == "hard":
            chosen = self._choose(alpha, sample=self.training or self.inference == "sample")
            self.glimpses = chosen
            z = self._read(regions, chosen)
        else:
            z, _ = soft_context(self.encode(regions), scores)  # every region encoded: (batch, L, hidden) -> (batch, h)
        return self.classifier(z)

    # ---- training ------------------------------------------------------------------------------
    def check_labels(self, labels, batch: int) -> None:
        """Raise ``ValueError`` unless ``labels`` are integer class indices ``(batch,)`` in ``[0, num_classes)``
        (the range is read where ``checks_read_values`` says)."""
        classes = self.classifier.out_features
        if not isinstance(labels, torch.Tensor) or labels.shape != (batch,) or labels.is_floating_point() \
                or labels.is_complex() or labels.dtype == torch.bool:
            raise ValueError(f"labels must be integer class indices of shape ({batch},), got "
                             f"{tuple(getattr(labels, 'shape', ()))} {getattr(labels, 'dtype', type(labels).__name__)}")
        if checks_read_values(labels) and labels.numel() and bool(((labels < 0) | (labels >= classes)).any()):
            raise ValueError(f"labels must lie in [0, num_classes={classes}), got "
                             f"{int(labels.min())}..{int(labels.max())}")

    def rewards(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The reward of each example's glimpse, ``(batch,)``, never carrying a gradient."""
        if self.reward == "correct":
            return (logits.argmax(-1) == labels).float()
        return -F.cross_entropy(logits, labels, reduction="none").detach()

    def baseline_value(self, regions: torch.Tensor) -> torch.Tensor:
        """``b(x)``, ``(batch,)``, from the coarse view of the whole canvas (detached: it trains only itself)."""
        return self.baseline(self.coarse(regions).flatten(1).detach()).squeeze(-1)

    def training_loss(self, images: torch.Tensor, labels: torch.Tensor):
        """``(objective, cross_entropy, logits)`` of one batch; see the class docstring."""
        self.check_images(images)  # first, so that the labels are checked against their batch
        self.check_labels(labels, images.shape[0])
        if self.mode != "hard":
            logits = self(images)
            cross_entropy = F.cross_entropy(logits, labels)
            return cross_entropy, cross_entropy, logits
        regions, scores, alpha = self.attend(images)
        self.attention_weights = alpha
        chosen = self._choose(alpha, sample=True)
        self.glimpses = chosen
        logits = self.classifier(self._read(regions, chosen))
        cross_entropy = F.cross_entropy(logits, labels)
        reward = self.rewards(logits, labels)
        log_alpha = torch.log_softmax(scores, dim=-1)  # (batch, L)
        log_alpha_s = log_alpha.gather(1, chosen[:, None]).squeeze(1)  # (batch,)
        objective = cross_entropy
        if self.use_baseline:
            b = self.baseline_value(regions)
            objective = objective + F.mse_loss(b, reward)
        else:
            b = None
        objective = objective - reinforce_surrogate(log_alpha_s, reward, b)
        if self.entropy_weight:
            entropy = -(alpha * log_alpha).sum(-1).mean()
            objective = objective - self.entropy_weight * entropy
        return objective, cross_entropy, logits

    def scorer_parameters(self) -> list[nn.Parameter]:
        """The parameters of the *where* pathway, ``W``, ``b`` and ``w``."""
        return [self.score_hidden.weight, self.score_hidden.bias, self.score_out.weight]


# ---- the gradient of the scorer, estimated and exact -----------------------------------------------

def _flat_grad(output: torch.Tensor, params, grad_outputs=None, retain_graph=False) -> torch.Tensor:
    grads = torch.autograd.grad(output, params, grad_outputs=grad_outputs, retain_graph=retain_graph)
    return torch.cat([g.reshape(-1) for g in grads])


def _all_region_rewards(model: GlimpseClassifier, regions: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The reward the model would get from each region, ``(batch, L)``: one pass over every region."""
    with torch.no_grad():
        logits = model.classifier(model.encode(regions))  # (batch, L, classes)
        batch, num = logits.shape[:2]
        return model.rewards(logits.reshape(batch * num, -1), labels.repeat_interleave(num)).reshape(batch, num)


def scorer_gradient_samples(model: GlimpseClassifier, images: torch.Tensor, labels: torch.Tensor,
                            num_samples: int = 200, baseline: bool | None = None) -> torch.Tensor:
    """``num_samples`` estimates of the gradient of the loss w.r.t. the scorer, ``(num_samples, P)``.

    Hard mode: each row is the REINFORCE estimate ``-(1/B) sum_b (R_b - b_b) grad log alpha_{s_b}``
    from a fresh draw of one region per canvas (``baseline`` None: the model's own setting; False:
    ``b = 0``; True: the learned ``b(x)``). Soft and uniform modes: the gradient of the
    cross-entropy, which is deterministic, repeated ``num_samples`` times. Draws use torch's global
    generator. ``labels`` as in ``GlimpseClassifier.training_loss``.
    """
    check_positive_int("num_samples", num_samples)
    if baseline is not None:
        check_bool("baseline", baseline)
    model.check_images(images)
    model.check_labels(labels, images.shape[0])
    params = model.scorer_parameters()
    regions, scores, alpha = model.attend(images)
    if model.mode != "hard":
        logits = model.classifier(soft_context(model.encode(regions), scores)[0])
        if model.mode == "uniform":
            return torch.zeros(num_samples, sum(p.numel() for p in params), device=images.device)
        grad = _flat_grad(F.cross_entropy(logits, labels), params)
        return grad.expand(num_samples, -1).clone()
    use_baseline = model.use_baseline if baseline is None else baseline
    rewards = _all_region_rewards(model, regions, labels)  # (batch, L)
    b = model.baseline_value(regions).detach() if use_baseline else torch.zeros_like(rewards[:, 0])
    alpha = alpha.detach()
    rows = []
    for _ in range(num_samples):
        chosen = torch.multinomial(alpha, 1).squeeze(-1)  # (batch,)
        advantage = rewards.gather(1, chosen[:, None]).squeeze(1) - b  # (batch,)
        # d/dscores of -(R - b) log softmax(scores)_s, averaged over the batch: -(R - b)(onehot(s) - alpha) / B
        grad_scores = -advantage[:, None] * (F.one_hot(chosen, alpha.shape[1]).to(alpha.dtype) - alpha) / len(chosen)
        rows.append(_flat_grad(scores, params, grad_outputs=grad_scores, retain_graph=True))
    return torch.stack(rows)


def exact_scorer_gradient(model: GlimpseClassifier, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The exact expectation of :func:`scorer_gradient_samples`, ``(P,)``, by enumerating every region.

    Hard mode: the gradient of ``-(1/B) sum_b sum_s alpha_s R_b(s)`` with the rewards held fixed;
    soft mode: the gradient of the cross-entropy.
    """
    model.check_images(images)
    model.check_labels(labels, images.shape[0])
    if model.mode != "hard":
        return scorer_gradient_samples(model, images, labels, num_samples=1)[0]
    regions, _, alpha = model.attend(images)
    rewards = _all_region_rewards(model, regions, labels)
    return _flat_grad(-(alpha * rewards).sum(1).mean(), model.scorer_parameters())


# ---- cost and pictures ----------------------------------------------------------------------------

def count_flops(model: nn.Module, images: torch.Tensor, by_module: bool = False):
    """Floating-point operations per image of ``model(images)``, as counted by ``torch.utils.flop_counter``.

    It counts the matrix multiplications and convolutions of the model's layers (its child modules;
    2 per multiply-add), not element-wise operations (activations, softmax, pooling) nor the
    weighted sum of soft attention (``2 L d`` per image, computed by ``attend`` outside the layers),
    which are a small share here. ``by_module=True`` returns ``{child module name: flops per image}``
    with their sum under ``"total"``. ``images`` must hold at least one image (the counts are per image).
    """
    from torch.utils.flop_counter import FlopCounterMode

    if isinstance(images, torch.Tensor) and images.dim() >= 1 and images.shape[0] == 0:  # the model checks the rest
        raise ValueError(f"count_flops needs a batch of at least one image, got images of shape {tuple(images.shape)}")
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(images)
    counts = counter.get_flop_counts()
    prefix = type(model).__name__ + "."
    parts = {name: sum(counts.get(prefix + name, {}).values()) / images.shape[0] for name, _ in model.named_children()}
    total = sum(parts.values())
    return {**parts, "total": total} if by_module else total


def show_glimpses(images: torch.Tensor, weights: torch.Tensor, grid: int = 3, chosen: torch.Tensor | None = None,
                  evidence: torch.Tensor | None = None, titles=None, size: float = 1.8):
    """Canvases with their attention weights over the regions drawn on top; returns the figure.

    Each region is tinted in red by its weight (more opaque = more weight, the scale 0..1) and labelled
    with it (weights below 0.005 are not labelled), the ``chosen`` region (e.g. the glimpse of hard
    attention) is boxed in orange, and the ``evidence`` region, when given, by a dashed green box.
    """
    images = images.detach().float().cpu().numpy()
    weights = weights.detach().float().cpu().numpy()
    num = images.shape[0]
    if weights.shape != (num, grid * grid):
        raise ValueError(f"expected weights of shape ({num}, {grid * grid}), got {tuple(weights.shape)}")
    fig, axes = plt.subplots(1, num, figsize=(size * num, size + 0.3), squeeze=False, layout="constrained")
    side = grid * REGION
    for k, ax in enumerate(axes[0]):
        ax.imshow(images[k, 0], cmap="gray_r", vmin=0, vmax=1, extent=(0, side, side, 0))
        overlay = np.zeros((grid, grid, 4))  # red, as opaque as the region's weight is large
        overlay[..., 0] = 1.0
        overlay[..., 3] = 0.35 * weights[k].reshape(grid, grid)
        ax.imshow(overlay, extent=(0, side, side, 0), interpolation="nearest")
        for i in range(grid * grid):
            if weights[k, i] >= 0.005:  # the weights that round to 0.00 are left unlabelled
                r, c = divmod(i, grid)
                ax.text(c * REGION + 0.6, r * REGION + 2.4, f"{weights[k, i]:.2f}", fontsize=6, color="navy",
                        bbox=dict(boxstyle="square,pad=0.1", facecolor="white", alpha=0.8, linewidth=0))
        if evidence is not None:
            r, c = divmod(int(evidence[k]), grid)
            ax.add_patch(patches.Rectangle((c * REGION + 1.2, r * REGION + 1.2), REGION - 2.4, REGION - 2.4, fill=False,
                                           edgecolor="green", linewidth=1.5, linestyle="--"))
        if chosen is not None:
            r, c = divmod(int(chosen[k]), grid)
            ax.add_patch(patches.Rectangle((c * REGION, r * REGION), REGION, REGION, fill=False,
                                           edgecolor="orange", linewidth=2))
        ax.set_xticks([])
        ax.set_yticks([])
        if titles is not None:
            ax.set_title(titles[k], fontsize=8)
    return fig
