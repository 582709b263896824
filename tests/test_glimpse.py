"""Soft and hard attention over image regions (attn_utils.glimpse): model, REINFORCE, cost.

(The canvases are tested in test_data_digits.py.)
"""

from __future__ import annotations

import matplotlib
import pytest
import torch
from torch.nn import functional as F

matplotlib.use("Agg")

from data_helpers import canvas_region

from attn_utils.data.digits import make_digit_canvases
from attn_utils.evaluate import accuracy
from attn_utils.glimpse import (
    GlimpseClassifier,
    count_flops,
    exact_scorer_gradient,
    reinforce_surrogate,
    scorer_gradient_samples,
    show_glimpses,
    soft_context,
)
from attn_utils.tolerance import assert_close
from attn_utils.trainers import train_classifier

# ---- model ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["soft", "hard", "uniform"])
def test_shapes_and_weights_sum_to_one(mode):
    torch.manual_seed(0)
    model = GlimpseClassifier(mode).eval()
    images, labels, _ = make_digit_canvases(6, seed=0)
    logits = model(images)
    alpha = model.attention_weights
    assert logits.shape == (6, 10) and alpha.shape == (6, 9)
    torch.testing.assert_close(alpha.sum(-1), torch.ones(6))
    assert bool((alpha > 0).all())
    if mode == "uniform":
        torch.testing.assert_close(alpha, torch.full((6, 9), 1 / 9))
    if mode == "hard":
        assert torch.equal(model.glimpses, alpha.argmax(-1))
    objective, cross_entropy, logits2 = model.training_loss(images, labels)
    assert objective.dim() == cross_entropy.dim() == 0 and logits2.shape == (6, 10)
    assert torch.isfinite(objective)


def test_soft_context_equals_the_explicit_sum():
    torch.manual_seed(0)
    features, scores = torch.randn(2, 4, 3), torch.randn(2, 4)
    weights = torch.softmax(scores, -1)
    explicit = torch.zeros(2, 3)
    for b in range(2):
        for i in range(4):
            explicit[b] += weights[b, i] * features[b, i]
    z, alpha = soft_context(features, scores)
    torch.testing.assert_close(z, explicit)
    torch.testing.assert_close(alpha, weights)
    z, alpha = soft_context(features, torch.zeros(2, 4))  # equal scores: the mean of the features
    torch.testing.assert_close(z, features.mean(1))
    with pytest.raises(ValueError, match=r"expected features \(batch, L, d\) and scores \(batch, L\)"):
        soft_context(features, scores[:, :3])


def test_soft_and_hard_forward_against_a_hand_written_reference():
    """Scores w^T tanh(W g_i + b) on 2x2 block means, then sum_i alpha_i f_i (soft) or f_argmax (hard)."""
    torch.manual_seed(1)
    images, _, _ = make_digit_canvases(3, seed=5)
    soft = GlimpseClassifier("soft").eval()
    hard = GlimpseClassifier("hard").eval()
    hard.load_state_dict(soft.state_dict())
    W, b, w = soft.score_hidden.weight, soft.score_hidden.bias, soft.score_out.weight[0]
    with torch.no_grad():
        for n in range(3):
            scores, feats = [], []
            for i in range(9):
                region = canvas_region(images[n:n + 1], i)[0]  # (10, 10)
                g = region.reshape(5, 2, 5, 2).mean(dim=(1, 3)).reshape(25)  # 2x2 block means
                scores.append(w @ torch.tanh(W @ g + b))
                digit = region[1:9, 1:9].reshape(1, 1, 8, 8)
                feats.append(soft.encoder(digit)[0])
            alpha = torch.softmax(torch.stack(scores), 0)
            z = sum(a * f for a, f in zip(alpha, feats))
            torch.testing.assert_close(soft(images[n:n + 1])[0], soft.classifier(z), rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(soft.attention_weights[0], alpha, rtol=1e-5, atol=1e-6)
            chosen = int(alpha.argmax())
            torch.testing.assert_close(hard(images[n:n + 1])[0], hard.classifier(feats[chosen]), rtol=1e-5, atol=1e-5)


def test_uniform_model_ignores_the_frames_and_hard_reads_onecanvas_region():
    torch.manual_seed(0)
    images, _, _ = make_digit_canvases(4, seed=2)
    unframed = images.clone()
    for i in range(9):  # wipe every margin: the digits stay
        r, c = divmod(i, 3)
        block = unframed[:, 0, r * 10:(r + 1) * 10, c * 10:(c + 1) * 10]
        inner = block[:, 1:9, 1:9].clone()
        block.zero_()
        block[:, 1:9, 1:9] = inner
    uniform = GlimpseClassifier("uniform").eval()
    torch.testing.assert_close(uniform(images), uniform(unframed))
    seen = []  # the batch of digits each model's encoder reads
    for mode, regions_read in (("soft", 9), ("hard", 1)):
        model = GlimpseClassifier(mode).eval()
        hook = model.encoder.register_forward_hook(lambda module, inputs, output: seen.append(inputs[0].shape))
        model(images)
        hook.remove()
        assert seen.pop() == (4 * regions_read, 1, 8, 8)


# ---- REINFORCE --------------------------------------------------------------------------------------

def test_reinforce_is_unbiased_by_enumeration_with_and_without_a_baseline():
    """E_s[(R(s) - b) grad log alpha_s] = grad sum_s alpha_s R(s), for any b not depending on s."""
    theta = torch.tensor([0.3, -1.2, 0.8], dtype=torch.float64, requires_grad=True)
    rewards = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    alpha = torch.softmax(theta, 0)
    (exact,) = torch.autograd.grad((alpha * rewards).sum(), theta)
    # a hand-computed check of the exact gradient: alpha_k (R_k - sum_s alpha_s R_s)
    a = alpha.detach()
    torch.testing.assert_close(exact, a * (rewards - (a * rewards).sum()))
    for baseline in (None, 0.7, -3.0):
        enumerated = torch.zeros(3, dtype=torch.float64)
        for s in range(3):
            log_alpha = torch.log_softmax(theta, 0)
            surrogate = reinforce_surrogate(log_alpha[s:s + 1], rewards[s:s + 1], baseline)
            (grad,) = torch.autograd.grad(surrogate, theta)
            enumerated += a[s] * grad
        torch.testing.assert_close(enumerated, exact, rtol=1e-12, atol=1e-12)
    # Monte Carlo: the mean of N sampled estimates is within 5 standard errors (and 0.03) of the truth
    generator = torch.Generator().manual_seed(0)
    N = 20_000
    for baseline in (0.0, 0.5):
        s = torch.multinomial(a, N, replacement=True, generator=generator)  # (N,)
        log_alpha = torch.log_softmax(theta, 0)[s]
        (mean_grad,) = torch.autograd.grad(reinforce_surrogate(log_alpha, rewards[s], baseline), theta)
        per_sample = (rewards[s] - baseline)[:, None] * (F.one_hot(s, 3).double() - a)  # (N, 3)
        torch.testing.assert_close(mean_grad, per_sample.mean(0))
        stderr = per_sample.std(0) / N**0.5
        assert bool(((mean_grad - exact).abs() < 5 * stderr + 1e-9).all()), (mean_grad, exact, stderr)
        assert float((mean_grad - exact).abs().max()) < 0.03


def test_reinforce_surrogate_trains_neither_rewards_nor_baseline():
    log_probs = torch.log(torch.tensor([0.2, 0.5])).requires_grad_()
    rewards = torch.tensor([1.0, 3.0], requires_grad=True)
    baseline = torch.tensor([0.5, 0.5], requires_grad=True)
    value = reinforce_surrogate(log_probs, rewards, baseline)
    torch.testing.assert_close(value, ((rewards - baseline) * log_probs).mean())
    value.backward()
    assert rewards.grad is None and baseline.grad is None
    torch.testing.assert_close(log_probs.grad, torch.tensor([0.25, 1.25]))
    with pytest.raises(ValueError, match="same shape"):
        reinforce_surrogate(log_probs, rewards[:1])
    with pytest.raises(ValueError, match="baseline must be a scalar"):
        reinforce_surrogate(log_probs, rewards, torch.zeros(3))


@pytest.mark.parametrize("reward", ["log_likelihood", "correct"])
def test_model_scorer_gradient_samples_average_to_the_exact_gradient(reward, one_thread):
    torch.manual_seed(0)
    model = GlimpseClassifier("hard", reward=reward)
    images, labels, _ = make_digit_canvases(16, seed=4)
    exact = exact_scorer_gradient(model, images, labels)
    for baseline in (False, True):
        torch.manual_seed(1)
        samples = scorer_gradient_samples(model, images, labels, num_samples=3000, baseline=baseline)
        assert samples.shape == (3000, exact.numel())
        stderr = samples.std(0) / 3000**0.5
        assert bool(((samples.mean(0) - exact).abs() <= 5 * stderr + 1e-7).all())
    # the estimate inside training_loss is one of these samples: same draw, same scorer gradient
    torch.manual_seed(2)
    objective, _, _ = model.training_loss(images, labels)
    grads = torch.autograd.grad(objective, model.scorer_parameters())
    torch.manual_seed(2)
    one = scorer_gradient_samples(model, images, labels, num_samples=1)[0]
    torch.testing.assert_close(torch.cat([g.reshape(-1) for g in grads]), one, rtol=1e-4, atol=1e-6)


def test_soft_gradient_is_deterministic_and_uniform_has_no_scorer_gradient():
    torch.manual_seed(0)
    images, labels, _ = make_digit_canvases(8, seed=1)
    soft = GlimpseClassifier("soft")
    samples = scorer_gradient_samples(soft, images, labels, num_samples=5)
    assert float(samples.var(0).sum()) == 0.0 and float(samples.abs().sum()) > 0
    torch.testing.assert_close(exact_scorer_gradient(soft, images, labels), samples[0])
    uniform = GlimpseClassifier("uniform")
    assert float(scorer_gradient_samples(uniform, images, labels, num_samples=2).abs().sum()) == 0.0


# ---- training, cost, pictures, errors, devices -----------------------------------------------------

@pytest.mark.parametrize("mode, steps, kwargs", [("soft", 150, {}), ("hard", 300, {"reward": "correct"})])
def test_memorises_32_canvases(mode, steps, kwargs, one_thread):
    """(On 32 canvases the hard model may memorise whatever region it settles on, frame or not.)"""
    torch.manual_seed(0)
    images, labels, _ = make_digit_canvases(32, seed=11)
    model = GlimpseClassifier(mode, **kwargs)
    train_classifier(model, (images,), labels, max_steps=steps, batch_size=32, lr=5e-3, progress=False)
    assert accuracy(model, (images,), labels) == 1.0


def test_flops_by_hand():
    images, _, _ = make_digit_canvases(4, seed=0)
    encoder = 2 * (8 * 8 * 16 * 9 + 4 * 4 * 32 * 16 * 9 + 128 * 64)  # two convolutions and a linear layer
    scorer = 2 * 9 * (25 * 32 + 32)  # W g_i and w^T tanh(...) for 9 regions
    classifier = 2 * 64 * 10
    assert count_flops(GlimpseClassifier("soft").eval(), images) == 9 * encoder + scorer + classifier
    assert count_flops(GlimpseClassifier("hard").eval(), images) == encoder + scorer + classifier
    assert count_flops(GlimpseClassifier("uniform").eval(), images) == 9 * encoder + classifier  # no scorer
    parts = count_flops(GlimpseClassifier("hard").eval(), images, by_module=True)
    assert parts["encoder"] == encoder and parts["classifier"] == classifier and parts["baseline"] == 0
    assert parts["score_hidden"] + parts["score_out"] == scorer and parts["total"] == encoder + scorer + classifier
    # the weighted sum of soft attention (2 L d per image, outside the layers) is not counted, as documented
    assert count_flops(GlimpseClassifier("soft").eval(), images, by_module=True)["total"] == (
        9 * encoder + scorer + classifier)


def test_show_glimpses_draws_one_panel_per_canvas():
    images, _, evidence = make_digit_canvases(3, seed=0)
    weights = torch.softmax(torch.randn(3, 9), -1)
    fig = show_glimpses(images, weights, chosen=weights.argmax(-1), evidence=evidence, titles=["a", "b", "c"])
    assert len(fig.axes) == 3 and fig.axes[1].get_title() == "b"
    assert len(fig.axes[0].patches) == 2  # the boxes around the chosen and the framed region
    with pytest.raises(ValueError, match=r"expected weights of shape \(3, 9\)"):
        show_glimpses(images, weights[:, :4])


def test_bad_model_input_is_named():
    model = GlimpseClassifier("soft")
    with pytest.raises(ValueError, match=r"expected images of shape \(batch, 1, 30, 30\).*got \(2, 1, 24, 24\)"):
        model(torch.zeros(2, 1, 24, 24))
    with pytest.raises(ValueError, match=r"got \(2, 30, 30\)"):
        model(torch.zeros(2, 30, 30))
    with pytest.raises(ValueError, match="mode must be one of"):
        GlimpseClassifier("medium")
    with pytest.raises(ValueError, match="reward must be one of"):
        GlimpseClassifier("hard", reward="accuracy")
    with pytest.raises(ValueError, match="inference must be"):
        GlimpseClassifier("hard", inference="mean")
    with pytest.raises(ValueError, match="num_samples must be a positive integer, got 0"):
        scorer_gradient_samples(model, torch.zeros(1, 1, 30, 30), torch.zeros(1, dtype=torch.long), num_samples=0)


@pytest.mark.parametrize("mode", ["soft", "hard"])
def test_any_device(mode, any_device):
    torch.manual_seed(0)
    model = GlimpseClassifier(mode).to(any_device)
    images, labels, _ = make_digit_canvases(8, seed=0)
    images, labels = images.to(any_device), labels.to(any_device)
    objective, _, logits = model.training_loss(images, labels)
    objective.backward()
    assert logits.device.type == any_device.type and model.attention_weights.device.type == any_device.type
    model.eval()
    cpu = GlimpseClassifier(mode)
    cpu.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    assert_close(model(images), cpu.eval()(images.cpu()))
    samples = scorer_gradient_samples(model, images, labels, num_samples=3)
    assert samples.device.type == any_device.type and torch.isfinite(samples).all()
