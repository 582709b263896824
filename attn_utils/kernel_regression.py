"""Chapter 2's Nadaraya–Watson kernel regression: a kernel-weighted average of observed targets.

The estimate at a query ``x`` from examples ``(x_i, y_i)`` is

    f(x) = sum_i K((x - x_i) / h) / sum_j K((x - x_j) / h) * y_i,

a weighted average of the values ``y_i`` with weights that sum to 1. Writing ``K = exp(log K)``
turns the weights into ``softmax_i(log K((x - x_i) / h))``: attention pooling with the score
``log K``. That is how they are computed here, through :func:`attn_utils.attention.attend` (the
masked softmax and weighted sum of every attention layer), so tiny widths never underflow to 0/0
and a query with no example inside a compact kernel's window gets all-zero weights (and predicts 0)
instead of NaN.

Also here: the parametric version with a learned inverse width ``w`` (:class:`NWKernelRegression`),
the leave-one-out mask that makes it trainable, the course's toy data
``y = 2 sin(x) + x^0.8 + noise``, and measurements of error against width and data size.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import torch
from torch import nn

from .attention import attend
from .checks import check_non_negative_int, check_positive_int, is_finite_number

_LOG_HALF = math.log(0.5)
_LOG_THREE_QUARTERS = math.log(0.75)
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _gaussian(u: torch.Tensor) -> torch.Tensor:
    return -0.5 * u * u - _LOG_SQRT_2PI  # log of exp(-u^2/2) / sqrt(2 pi)


def _boxcar(u: torch.Tensor) -> torch.Tensor:
    inside = u.abs() <= 1  # log of 1/2 on [-1, 1], else log 0
    return torch.where(inside, torch.full_like(u, _LOG_HALF), torch.full_like(u, -math.inf))


def _epanechnikov(u: torch.Tensor) -> torch.Tensor:
    inside = u.abs() < 1  # log of 3/4 (1 - u^2) on (-1, 1), else log 0
    safe = torch.where(inside, 1 - u * u, torch.ones_like(u))  # keeps log (and its gradient) finite
    return torch.where(inside, _LOG_THREE_QUARTERS + torch.log(safe), torch.full_like(u, -math.inf))


def _constant(u: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(u)  # log 1: every example weighs the same (average pooling)


LOG_KERNELS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gaussian": _gaussian,
    "boxcar": _boxcar,
    "epanechnikov": _epanechnikov,
    "constant": _constant,
}
KERNELS = tuple(LOG_KERNELS)


def log_kernel(u: torch.Tensor, name: str = "gaussian") -> torch.Tensor:
    """``log K(u)`` for a kernel in :data:`KERNELS` (``-inf`` outside a compact kernel's support); ``u`` is a
    real (not bool) tensor of any shape."""
    if name not in LOG_KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {name!r}")
    if not isinstance(u, torch.Tensor) or u.dtype == torch.bool or u.is_complex():
        raise ValueError(f"u must be a real tensor, got {getattr(u, 'dtype', type(u).__name__)}")
    return LOG_KERNELS[name](u)


def kernel(u: torch.Tensor, name: str = "gaussian") -> torch.Tensor:
    """The kernel ``K(u)``: gaussian ``exp(-u^2/2)/sqrt(2 pi)``, boxcar ``1/2`` on ``|u| <= 1``,
    epanechnikov ``3/4 (1 - u^2)`` on ``|u| < 1``, constant ``1``."""
    return torch.exp(log_kernel(u, name))


def pairwise_differences(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """``queries[..., i] - keys[..., j]`` for every pair: (..., Q) and (..., K) give (..., Q, K), real (not bool)
    tensors with the same leading dimensions."""
    for name, t in (("queries", queries), ("keys", keys)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a tensor of scalar inputs, shape (..., n); got {type(t).__name__}")
        if t.dtype == torch.bool or t.is_complex():
            raise ValueError(f"{name} must hold real numbers, got dtype {t.dtype}")
        if t.dim() < 1:
            raise ValueError(f"{name} must have shape (..., n), got a 0-d tensor")
    if queries.shape[:-1] != keys.shape[:-1]:
        raise ValueError(
            f"queries {tuple(queries.shape)} and keys {tuple(keys.shape)} must have the same leading "
            f"(batch) dimensions"
        )
    return queries.unsqueeze(-1) - keys.unsqueeze(-2)  # (..., Q, 1) - (..., 1, K) -> (..., Q, K)


def _pool(u: torch.Tensor, values: torch.Tensor, kernel_name: str, valid_lens):
    """Weights ``softmax(log K(u))`` (..., Q, K) and the weighted average of ``values``."""
    keys_shape = u.shape[:-2] + u.shape[-1:]  # (..., K)
    if not isinstance(values, torch.Tensor):
        raise ValueError(f"values must be a tensor (..., K) or (..., K, v), got {type(values).__name__}")
    if values.dtype != u.dtype:
        raise ValueError(f"values must have the dtype of the scores, {u.dtype} (from the queries, keys and width), "
                         f"got {values.dtype}; convert with values.to({u.dtype})")
    scalar = values.shape == keys_shape
    if not scalar and values.shape[:-1] != keys_shape:
        raise ValueError(
            f"values must pair one-to-one with the keys: expected shape {tuple(keys_shape)} or "
            f"{tuple(keys_shape)} + (v,), got {tuple(values.shape)}"
        )
    output, weights = attend(log_kernel(u, kernel_name), values.unsqueeze(-1) if scalar else values, valid_lens)
    return (output.squeeze(-1) if scalar else output), weights  # (..., Q) or (..., Q, v); weights (..., Q, K)


def nadaraya_watson(queries, keys, values, kernel: str = "gaussian", width=1.0, valid_lens=None):
    """Nadaraya–Watson estimates at ``queries`` from examples (``keys``, ``values``).

    ``queries`` (..., Q) and ``keys`` (..., K) are scalar inputs; ``values`` is (..., K) or
    (..., K, v), in the dtype of the scores (that of the queries and keys). ``width`` is the bandwidth
    h > 0 (a number, not a bool, or a tensor broadcastable to (..., Q, K); ``inf`` gives the plain mean).
    ``valid_lens`` masks keys as in ``masked_softmax``. Returns ``(predictions, weights)``: predictions
    (..., Q) or (..., Q, v), weights (..., Q, K).
    """
    if isinstance(width, bool) or not isinstance(width, (numbers.Real, torch.Tensor)):
        raise ValueError(f"width must be a number > 0 or a tensor of them, got {type(width).__name__} {width!r}")
    width_t = torch.as_tensor(width)
    if not bool((width_t > 0).all()):
        raise ValueError(f"width must be > 0, got {width!r}")
    differences = pairwise_differences(queries, keys)  # (..., Q, K)
    try:
        fits = torch.broadcast_shapes(width_t.shape, differences.shape) == differences.shape
    except RuntimeError:
        fits = False
    if not fits:  # a larger width would silently enlarge the result
        raise ValueError(f"width of shape {tuple(width_t.shape)} does not broadcast to the (..., Q, K) pairs "
                         f"{tuple(differences.shape)}")
    u = differences / width  # (..., Q, K)
    return _pool(u, values, kernel, valid_lens)


def leave_one_out_mask(n: int, device=None) -> torch.Tensor:
    """Boolean (n, n) mask, True off the diagonal: example i may not look at itself (``n`` an int >= 0)."""
    check_non_negative_int("n", n)
    return ~torch.eye(n, dtype=torch.bool, device=device)


class NWKernelRegression(nn.Module):
    """Parametric attention pooling: ``softmax(-((x - x_i) w)^2 / 2)``-weighted average of the ``y_i``.

    ``w`` is a learned inverse width (the Gaussian kernel's bandwidth is ``1/|w|``). ``forward``
    takes what :func:`nadaraya_watson` takes and keeps ``.attention_weights``. Train it with
    ``valid_lens=leave_one_out_mask(n)`` when the queries are the training inputs themselves.
    ``w`` is a finite number (``0`` weighs every example alike).
    """

    def __init__(self, w: float = 1.0):
        super().__init__()
        if not is_finite_number(w):
            raise ValueError(f"w (the learned inverse width) must be a finite number, got {w!r}")
        self.w = nn.Parameter(torch.tensor(float(w)))
        self.attention_weights = None

    def __getstate__(self):
        return {**super().__getstate__(), "attention_weights": None}  # copies drop the last pass's graph

    def forward(self, queries, keys, values, valid_lens=None):
        u = pairwise_differences(queries, keys) * self.w  # (..., Q, K)
        predictions, self.attention_weights = _pool(u, values, "gaussian", valid_lens)
        return predictions


def true_function(x: torch.Tensor) -> torch.Tensor:
    """The course's regression target ``2 sin(x) + x^0.8`` (for x >= 0)."""
    return 2 * torch.sin(x) + x**0.8


def make_data(n: int, noise: float = 0.5, high: float = 5.0, repeats: int | None = None,
              generator: torch.Generator | None = None, dtype=torch.float32):
    """Sorted inputs ``x ~ U(0, high)`` and ``y = true_function(x) + N(0, noise^2)``.

    Shapes (n,), or (repeats, n) for ``repeats`` independent data sets (``n`` and ``repeats`` ints >= 0).
    ``noise`` and ``high`` are finite numbers >= 0, ``dtype`` a floating-point dtype. Pass a seeded
    ``generator`` for reproducible data.
    """
    check_non_negative_int("n", n)
    if repeats is not None:
        check_non_negative_int("repeats", repeats)
    for name, value in (("noise", noise), ("high", high)):
        if not is_finite_number(value) or value < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
    shape = (n,) if repeats is None else (repeats, n)
    x, _ = torch.sort(torch.rand(shape, generator=generator, dtype=dtype) * high, dim=-1)
    y = true_function(x) + noise * torch.randn(shape, generator=generator, dtype=dtype)
    return x, y


def _chunked_predictions(queries, x, y, kernel_name, width, chunk_elems: int = 2**22):
    """NW predictions (R, Q) for R data sets, a few sets at a time to bound memory, and a (R, Q)
    boolean that is True where the query's kernel window held no example."""
    per_set = queries.numel() * x.shape[-1]
    step = max(1, chunk_elems // per_set)
    preds, empty = [], []
    for start in range(0, x.shape[0], step):
        xs, ys = x[start:start + step], y[start:start + step]  # (r, n)
        p, weights = nadaraya_watson(queries.expand(xs.shape[0], -1), xs, ys, kernel_name, width)  # (r, Q), (r, Q, n)
        preds.append(p)
        empty.append(weights.sum(-1) == 0)
    return torch.cat(preds), torch.cat(empty)


def _check_measurement(kernel: str, repeats, num_queries, **counts) -> None:
    """The arguments ``bias_variance`` and ``error_vs_n`` share, checked before any data is drawn."""
    if kernel not in LOG_KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    for name, value in (*counts.items(), ("repeats", repeats), ("num_queries", num_queries)):
        check_positive_int(name, value)


def _widths(widths) -> list:
    """``widths`` as a list of numbers > 0 (``nadaraya_watson`` checks each again)."""
    if isinstance(widths, (str, bytes)) or not hasattr(widths, "__iter__"):
        raise ValueError(f"widths must be a sequence of numbers > 0, got {type(widths).__name__} {widths!r}")
    widths = list(widths)
    for width in widths:
        if not is_finite_number(width) or width <= 0:
            raise ValueError(f"each width must be a finite number > 0, got {width!r}")
    return widths


def bias_variance(widths, n: int = 50, repeats: int = 200, kernel: str = "gaussian", noise: float = 0.5,
                  seed: int = 0, num_queries: int = 101):
    """Measure the estimator's error against ``true_function`` for each width, over ``repeats`` data sets.

    Returns one dict per width: ``bias2`` (squared error of the average fit), ``variance``
    (spread of the fits around their average), ``mse`` (= bias2 + variance) averaged over
    ``num_queries`` evenly spaced queries in [0, 5], and ``empty``, the fraction of
    (data set, query) pairs whose kernel window held no example (those predict 0).
    Computed in float64. ``widths`` is a sequence of numbers > 0; ``n``, ``repeats`` and ``num_queries`` are
    positive ints.
    """
    _check_measurement(kernel, repeats, num_queries, n=n)
    widths = _widths(widths)
    generator = torch.Generator().manual_seed(seed)
    x, y = make_data(n, noise, repeats=repeats, generator=generator, dtype=torch.float64)  # (R, n)
    queries = torch.linspace(0, 5, num_queries, dtype=torch.float64).unsqueeze(0)  # (1, Q)
    truth = true_function(queries[0])  # (Q,)
    rows = []
    for width in widths:
        preds, empty = _chunked_predictions(queries, x, y, kernel, width)  # (R, Q), (R, Q)
        mean = preds.mean(0)  # (Q,)
        rows.append({
            "width": float(width),
            "bias2": ((mean - truth) ** 2).mean().item(),
            "variance": preds.var(0, unbiased=False).mean().item(),
            "mse": ((preds - truth) ** 2).mean().item(),
            "empty": empty.double().mean().item(),
        })
    return rows


def error_vs_n(ns, width, repeats: int = 100, kernel: str = "gaussian", noise: float = 0.5, seed: int = 0,
               num_queries: int = 101, low: float = 0.0, high: float = 5.0):
    """Mean squared error against ``true_function`` as the number of examples n grows.

    ``width`` is a number (the same bandwidth for every n) or a function ``n -> width`` (e.g. a
    bandwidth that shrinks like ``n ** -0.2``). Returns one dict per n with ``n``, ``width``,
    ``mse``. Computed in float64 over ``repeats`` data sets per n, at ``num_queries`` evenly spaced
    queries in [``low``, ``high``] (the data always cover [0, 5]: [1, 4] leaves out the boundary).
    ``ns`` is a sequence of positive ints; ``repeats`` and ``num_queries`` are positive ints.
    """
    _check_measurement(kernel, repeats, num_queries)
    ns = list(ns) if isinstance(ns, (list, tuple, range)) else ns
    if not isinstance(ns, list):
        raise ValueError(f"ns must be a sequence of positive ints, got {type(ns).__name__}")
    for n in ns:
        check_positive_int("each n of ns", n)
    for name, value in (("low", low), ("high", high)):
        if not is_finite_number(value):
            raise ValueError(f"{name} must be a finite number, got {value!r}")
    generator = torch.Generator().manual_seed(seed)
    queries = torch.linspace(low, high, num_queries, dtype=torch.float64).unsqueeze(0)  # (1, Q)
    truth = true_function(queries[0])
    rows = []
    for n in ns:
        h = float(width(n)) if callable(width) else float(width)
        x, y = make_data(n, noise, repeats=repeats, generator=generator, dtype=torch.float64)
        preds, _ = _chunked_predictions(queries, x, y, kernel, h)  # (R, Q)
        rows.append({"n": int(n), "width": h, "mse": ((preds - truth) ** 2).mean().item()})
    return rows
