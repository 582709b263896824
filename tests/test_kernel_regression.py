"""Nadaraya–Watson kernel regression: kernels, pooling by hand, the learned width, the measurements,
and the bandwidth figures."""

from __future__ import annotations

import math

import matplotlib
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attn_utils import (
    KERNELS,
    NWKernelRegression,
    bias_variance,
    error_vs_n,
    kernel,
    leave_one_out_mask,
    make_data,
    nadaraya_watson,
    train_nw,
    true_function,
)
from attn_utils.widgets import bandwidth_explorer, bandwidth_grid, draw_nw_fit


def test_kernel_values_by_hand():
    u = torch.tensor([0.0, 0.5, 1.0, 1.5, -0.5], dtype=torch.float64)
    g = [math.exp(-x * x / 2) / math.sqrt(2 * math.pi) for x in u.tolist()]
    torch.testing.assert_close(kernel(u, "gaussian"), torch.tensor(g, dtype=torch.float64))
    torch.testing.assert_close(kernel(u, "boxcar"), torch.tensor([0.5, 0.5, 0.5, 0.0, 0.5], dtype=torch.float64))
    torch.testing.assert_close(kernel(u, "epanechnikov"),
                               torch.tensor([0.75, 0.5625, 0.0, 0.0, 0.5625], dtype=torch.float64))
    torch.testing.assert_close(kernel(u, "constant"), torch.ones(5, dtype=torch.float64))


@pytest.mark.parametrize("name", ["gaussian", "boxcar", "epanechnikov"])
def test_proper_kernels_integrate_to_one(name):
    u = torch.linspace(-8, 8, 160_001, dtype=torch.float64)
    assert torch.trapezoid(kernel(u, name), u).item() == pytest.approx(1.0, abs=1e-4)


def test_unknown_kernel_is_named():
    with pytest.raises(ValueError,
                       match=r"kernel must be one of \('gaussian', 'boxcar', 'epanechnikov', 'constant'\), "
                             r"got 'tricube'"):
        kernel(torch.zeros(1), "tricube")


def test_nadaraya_watson_by_hand():
    keys = torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64)
    values = torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64)
    queries = torch.tensor([0.5, 1.8], dtype=torch.float64)
    # boxcar, width 1: query 0.5 sees keys 0 and 1 -> (1 + 2) / 2; query 1.8 sees keys 1 and 2 -> 3
    pred, weights = nadaraya_watson(queries, keys, values, "boxcar", 1.0)
    torch.testing.assert_close(pred, torch.tensor([1.5, 3.0], dtype=torch.float64))
    torch.testing.assert_close(weights, torch.tensor([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]], dtype=torch.float64))
    # Epanechnikov, width 2: K((0.5 - k)/2) = 0.75 (1 - u^2) for u = 0.25, -0.25, -0.75
    k = [0.75 * (1 - u * u) for u in (0.25, -0.25, -0.75)]
    pred, _ = nadaraya_watson(queries[:1], keys, values, "epanechnikov", 2.0)
    assert pred.item() == pytest.approx(sum(ki * vi for ki, vi in zip(k, (1, 2, 4))) / sum(k))
    # Gaussian, width 0.5: weights proportional to exp(-((0.5 - k) / 0.5)^2 / 2)
    g = [math.exp(-((0.5 - x) / 0.5) ** 2 / 2) for x in (0.0, 1.0, 2.0)]
    pred, weights = nadaraya_watson(queries[:1], keys, values, "gaussian", 0.5)
    torch.testing.assert_close(weights[0], torch.tensor([x / sum(g) for x in g], dtype=torch.float64))
    assert pred.item() == pytest.approx(sum(gi * vi for gi, vi in zip(g, (1, 2, 4))) / sum(g))


def test_constant_kernel_is_average_pooling():
    x, y = make_data(30, generator=torch.Generator().manual_seed(0))
    for width in (0.1, 1.0, 10.0):
        pred, weights = nadaraya_watson(torch.linspace(0, 5, 7), x, y, "constant", width)
        torch.testing.assert_close(pred, y.mean().expand(7))
        torch.testing.assert_close(weights, torch.full((7, 30), 1 / 30))


def test_empty_window_gives_zero_weights_not_nan():
    keys = torch.tensor([0.0, 1.0], requires_grad=True)
    values = torch.tensor([3.0, 5.0])
    queries = torch.tensor([0.2, 10.0])  # the second query is far outside every window
    for name in ("boxcar", "epanechnikov"):
        pred, weights = nadaraya_watson(queries, keys, values, name, 0.5)
        assert torch.equal(weights[1], torch.zeros(2)) and pred[1].item() == 0.0
        assert pred[0].item() == pytest.approx(3.0)
    pred.sum().backward()  # Epanechnikov's weights depend smoothly on the keys inside the window
    assert torch.isfinite(keys.grad).all()


def test_tiny_gaussian_width_is_nearest_neighbour_without_underflow():
    keys = torch.tensor([0.0, 1.0, 2.0])
    values = torch.tensor([1.0, 2.0, 4.0])
    pred, weights = nadaraya_watson(torch.tensor([0.4, 1.7]), keys, values, "gaussian", 1e-3)
    torch.testing.assert_close(pred, torch.tensor([1.0, 4.0]))
    assert torch.isfinite(weights).all()


def test_vector_values_and_batches():
    gen = torch.Generator().manual_seed(1)
    keys = torch.rand(2, 6, generator=gen)
    values = torch.randn(2, 6, 3, generator=gen)
    queries = torch.rand(2, 4, generator=gen)
    pred, weights = nadaraya_watson(queries, keys, values, "gaussian", 0.3)
    assert pred.shape == (2, 4, 3) and weights.shape == (2, 4, 6)
    for b in range(2):
        single, _ = nadaraya_watson(queries[b], keys[b], values[b, :, 0], "gaussian", 0.3)
        torch.testing.assert_close(pred[b, :, 0], single)


def test_valid_lens_mask_keys():
    keys = torch.tensor([[0.0, 1.0, 2.0]])
    values = torch.tensor([[1.0, 2.0, 100.0]])
    pred, weights = nadaraya_watson(torch.tensor([[0.5]]), keys, values, "gaussian", 1.0, valid_lens=torch.tensor([2]))
    assert weights[0, 0, 2].item() == 0.0
    assert pred.item() == pytest.approx(1.5)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 12), q=st.integers(1, 6), width=st.floats(0.05, 5.0), name=st.sampled_from(KERNELS),
       seed=st.integers(0, 2**16))
def test_weights_are_a_convex_combination(n, q, width, name, seed):
    gen = torch.Generator().manual_seed(seed)
    keys, values = torch.rand(n, generator=gen) * 5, torch.randn(n, generator=gen)
    queries = torch.rand(q, generator=gen) * 5
    pred, weights = nadaraya_watson(queries, keys, values, name, width)
    sums = weights.sum(-1)
    assert bool(((sums - 1).abs() < 1e-5).logical_or(sums == 0).all())
    assert bool((weights >= 0).all())
    seen = sums > 0
    assert bool((pred[seen] <= values.max() + 1e-5).all() and (pred[seen] >= values.min() - 1e-5).all())


def test_bad_input_is_named():
    keys, values = torch.zeros(3), torch.zeros(3)
    with pytest.raises(ValueError, match="width must be > 0, got 0"):
        nadaraya_watson(torch.zeros(2), keys, values, "gaussian", 0)
    with pytest.raises(ValueError, match=r"values must pair one-to-one with the keys: "
                                         r"expected shape \(3,\) or \(3,\) \+ \(v,\), got \(4,\)"):
        nadaraya_watson(torch.zeros(2), keys, torch.zeros(4))
    with pytest.raises(ValueError, match=r"queries \(2, 2\) and keys \(3,\) must have the same leading"):
        nadaraya_watson(torch.zeros(2, 2), keys, values)
    with pytest.raises(ValueError, match="queries must be a tensor of scalar inputs"):
        nadaraya_watson([0.5], keys, values)


# --- the parametric version ---------------------------------------------------------------------

def test_learned_width_model_equals_nonparametric_gaussian():
    x, y = make_data(20, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    queries = torch.linspace(0, 5, 9, dtype=torch.float64)
    model = NWKernelRegression(w=4.0).double()
    expected, weights = nadaraya_watson(queries, x, y, "gaussian", 0.25)
    torch.testing.assert_close(model(queries, x, y), expected)
    torch.testing.assert_close(model.attention_weights, weights)


def test_leave_one_out_hides_each_example_from_itself():
    mask = leave_one_out_mask(4)
    assert torch.equal(mask, ~torch.eye(4, dtype=torch.bool))
    x, y = make_data(5, generator=torch.Generator().manual_seed(3))
    model = NWKernelRegression(w=100.0)
    model(x, x, y, leave_one_out_mask(5))
    assert torch.equal(model.attention_weights.diagonal(), torch.zeros(5))
    model(x, x, y)  # without the mask a huge w makes every example copy itself
    torch.testing.assert_close(model.attention_weights, torch.eye(5))


def test_gradcheck_float64():
    gen = torch.Generator().manual_seed(4)
    x = torch.rand(6, generator=gen, dtype=torch.float64) * 5
    y = torch.randn(6, generator=gen, dtype=torch.float64)
    q = (torch.rand(3, generator=gen, dtype=torch.float64) * 5).requires_grad_()
    w = torch.tensor(1.3, dtype=torch.float64, requires_grad=True)

    def parametric(q, w):
        model = NWKernelRegression().double()
        return torch.func.functional_call(model, {"w": w}, (q, x, y, None))

    assert torch.autograd.gradcheck(parametric, (q, w))
    width = torch.tensor(0.8, dtype=torch.float64, requires_grad=True)
    for name in ("gaussian", "epanechnikov"):
        assert torch.autograd.gradcheck(lambda q, h, name=name: nadaraya_watson(q, x, y, name, h)[0], (q, width))


def test_training_with_leave_one_out_finds_a_finite_minimum():
    x, y = make_data(50, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    model = NWKernelRegression(w=1.0)
    history = train_nw(model, x, y, max_steps=60, lr=3.0)
    assert model.w.dtype == torch.float64  # moved to the data's dtype first
    losses = history.loss
    assert losses[-1] < losses[0]
    w = model.w.item()
    assert 1.0 < w < 10.0  # data seeds 0-7 gave w = 2.96-4.91 (float64, full batch: no summation-order luck)

    def loo_loss(w):
        m = NWKernelRegression(w).double()
        return ((m(x, x, y, leave_one_out_mask(50)) - y) ** 2).mean().item()

    assert loo_loss(w) <= min(loo_loss(0.8 * w), loo_loss(1.25 * w))  # a minimum, not an edge


def test_training_without_leave_one_out_runs_to_the_trivial_solution():
    x, y = make_data(50, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    model, longer = NWKernelRegression(w=1.0), NWKernelRegression(w=1.0)
    losses = train_nw(model, x, y, max_steps=60, lr=3.0, leave_one_out=False).loss
    assert all(b <= a + 1e-12 for a, b in zip(losses, losses[1:]))  # the training loss only falls
    more = train_nw(longer, x, y, max_steps=240, lr=3.0, leave_one_out=False)
    assert longer.w.item() > model.w.item() > 3.5  # w keeps growing (after 60 steps 4.48-7.02 over data seeds 0-7) ...
    assert more.loss[-1] < losses[-1]  # ... towards zero training error, each point copying itself


# --- measurements -------------------------------------------------------------------------------

def test_bias_variance_trade_off_is_measured():
    rows = bias_variance([0.05, 0.2, 0.5, 1.0, 2.0], n=50, repeats=100)
    for r in rows:
        assert r["mse"] == pytest.approx(r["bias2"] + r["variance"], rel=1e-9)
    bias2 = [r["bias2"] for r in rows]
    variance = [r["variance"] for r in rows]
    assert bias2 == sorted(bias2)  # wider kernels: more bias ...
    assert variance == sorted(variance, reverse=True)  # ... less variance
    mse = [r["mse"] for r in rows]
    assert min(mse) in mse[1:3]  # the best width is in between
    assert bias_variance([0.2], repeats=20) == bias_variance([0.2], repeats=20)  # seeded


def test_compact_kernels_report_empty_windows():
    tiny, wide = bias_variance([0.02, 1.0], n=20, repeats=20, kernel="boxcar")
    assert tiny["empty"] > 0.2 and wide["empty"] == 0.0
    assert all(r["empty"] == 0.0 for r in bias_variance([0.02], n=20, repeats=20))  # the Gaussian never is


def test_consistency_error_falls_as_n_grows_with_a_shrinking_width():
    rows = error_vs_n([25, 100, 400, 1600], lambda n: 0.3 * (n / 50) ** -0.2, repeats=30)
    mse = [r["mse"] for r in rows]
    assert mse == sorted(mse, reverse=True) and mse[-1] < mse[0] / 10
    fixed = error_vs_n([400, 1600], 1.0, repeats=30)  # a fixed wide kernel stalls at its bias
    assert fixed[1]["mse"] > 0.3


def test_make_data_is_seeded_sorted_and_on_the_curve():
    a = make_data(10, generator=torch.Generator().manual_seed(5))
    b = make_data(10, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert torch.equal(a[0], a[0].sort().values) and bool((a[0] >= 0).all() and (a[0] <= 5).all())
    x, y = make_data(4, noise=0.0, repeats=3)
    assert x.shape == (3, 4)
    torch.testing.assert_close(y, 2 * torch.sin(x) + x**0.8)
    torch.testing.assert_close(true_function(torch.tensor([0.0, math.pi / 2])),
                               torch.tensor([0.0, 2 + (math.pi / 2) ** 0.8]))


# --- figures ------------------------------------------------------------------------------------

def test_draw_nw_fit_draws_the_fit_and_its_weights():
    x, y = make_data(15, generator=torch.Generator().manual_seed(6))
    fig = draw_nw_fit(x, y, "epanechnikov", 0.7, truth=true_function)
    fit_ax, w_ax = fig.axes[:2]
    assert len(fit_ax.lines) == 3  # data, truth, fit
    expected, weights = nadaraya_watson(torch.linspace(float(x.min()), float(x.max()), 100), x, y, "epanechnikov", 0.7)
    assert fit_ax.lines[2].get_ydata() == pytest.approx(expected.numpy())
    assert w_ax.images[0].get_array().shape == (100, 15)
    assert "epanechnikov, width 0.7" in fit_ax.get_title()


def test_bandwidth_grid_has_a_column_per_width():
    x, y = make_data(15, generator=torch.Generator().manual_seed(6))
    fig = bandwidth_grid(x, y, [0.1, 0.5, 2.0])
    assert len(fig.axes) == 6
    assert isinstance(fig, matplotlib.figure.Figure)


def test_bandwidth_explorer_builds_a_menu_and_a_slider():
    pytest.importorskip("ipywidgets")
    x, y = make_data(15, generator=torch.Generator().manual_seed(6))
    box = bandwidth_explorer(x, y, kernel="boxcar", width=0.3)
    menu, slider = box.children[0].children
    assert menu.value == "boxcar" and list(menu.options) == list(KERNELS)
    assert slider.value == pytest.approx(0.3)


def test_error_vs_n_over_the_interior_leaves_out_the_boundary_bias():
    # A wide window is biased most at the ends of [0, 5], where it sees examples on one side only.
    whole = error_vs_n([200], 0.5, repeats=20, seed=0)[0]["mse"]
    inside = error_vs_n([200], 0.5, repeats=20, seed=0, low=1.0, high=4.0)[0]["mse"]
    assert inside < whole / 2
