"""Argument checks that several modules share: each raises ``ValueError`` naming what was expected and what came.

* ``check_tokens``: an integer tensor of token indices ``(batch, steps)``, the input of every
  translator, language model and sampler;
* ``check_token_ids``: token ids that can enter an ``nn.Embedding`` of ``vocab_size`` rows;
* ``check_positive_int``: a count such as a block size, and ``check_non_negative_int``: one that may be 0;
* ``check_bool``: a flag, ``True`` or ``False`` (not a truthy string or number);
* ``check_seed``: an integer seed that every generator takes (not a bool, a float or None), and
  ``check_device``: a device given by name or as a ``torch.device``;
* ``check_probability``: a probability such as a dropout rate, in [0, 1) (or [0, 1]);
* ``check_query_count``: queries that are the last of the keys' positions (at most as many);
* ``check_stream``: a 1-D token stream (running text);
* ``check_labelled_inputs``: a classifier's input tensors and their labels, one row per example;
* ``check_queries_keys`` and ``check_attention_inputs``: queries, keys (and values) that fit a
  scoring function or an attention layer;
* ``check_weights_dtype``: inputs in the dtype of a layer's weights (``autocast_on``: unless autocast casts them);
* ``checks_read_values`` and ``strict_checks``: whether a check that reads a tensor's values (lengths
  within range, NaN and inf) runs, see below.

**Checks that read values.** A shape or a dtype is known on the host; a value of a tensor on a GPU is
not, and reading one (``bool(t.any())``, ``t.item()``) makes the host wait until the device has
finished all the work queued before it (a *host synchronisation*), so the device runs dry between
calls. Such checks therefore run where they cost no wait, on CPU tensors (lengths still on the
CPU are checked before they move to the device), and on an accelerator only inside
``strict_checks()`` (or with the environment variable ``ATTN_UTILS_STRICT=1``): the attention layers'
hot path then never waits for the device. Turn strict checks on to debug a model on the GPU.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os

import torch

_strict = os.environ.get("ATTN_UTILS_STRICT", "") not in ("", "0")


@contextlib.contextmanager
def strict_checks(enabled: bool = True):
    """``with strict_checks(): ...`` runs every check that reads values on every device (see the module
    docstring); ``strict_checks(False)`` turns them off for accelerators inside a strict block."""
    global _strict
    before, _strict = _strict, bool(enabled)
    try:
        yield
    finally:
        _strict = before


def checks_read_values(*tensors) -> bool:
    """Should a check that reads the values of ``tensors`` run? Yes when every tensor among them is on
    the CPU (reading costs no wait there) or under ``strict_checks()``; no on an accelerator otherwise."""
    return _strict or all(t.device.type == "cpu" for t in tensors if isinstance(t, torch.Tensor))


def _integer_dtype(t: torch.Tensor) -> bool:
    return not (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool)


def check_step_lengths(name: str, lengths, rows: int, low: int, high: int, of: str) -> None:
    """Raise unless ``lengths`` is an integer tensor ``(rows,)`` (not bool) whose values lie in ``[low, high]``;
    ``of`` says what ``high`` counts (e.g. "the steps of X"). The values are read only where
    ``checks_read_values`` allows, so that an accelerator waits on no check."""
    if not isinstance(lengths, torch.Tensor) or lengths.shape != (rows,) or not _integer_dtype(lengths):
        raise ValueError(f"{name} must be an integer tensor of shape ({rows},), got "
                         f"{tuple(getattr(lengths, 'shape', ()))} {getattr(lengths, 'dtype', type(lengths).__name__)}")
    if checks_read_values(lengths) and lengths.numel() and bool(((lengths < low) | (lengths > high)).any()):
        raise ValueError(f"{name} must lie in [{low}, {high}] ({of}), got {int(lengths.min())}..{int(lengths.max())}")


def check_tokens(X, what: str) -> None:
    """Raise unless ``X`` is an integer tensor of token indices ``(batch, steps)`` (not bool); ``what``
    names it."""
    if not isinstance(X, torch.Tensor) or X.dim() != 2 or not _integer_dtype(X):
        got = f"shape {tuple(X.shape)}, dtype {X.dtype}" if isinstance(X, torch.Tensor) else type(X).__name__
        raise ValueError(f"{what} must be an integer tensor of token indices (batch, steps), got {got}")


#: the dtypes ``nn.Embedding`` takes as indices
EMBEDDING_INDEX_DTYPES = (torch.int64, torch.int32)


def check_token_ids(ids: torch.Tensor, vocab_size: int) -> None:
    """Raise ``ValueError`` unless ``ids`` holds token ids that an ``nn.Embedding(vocab_size, ...)`` can look up:
    an int64 or int32 tensor (checked always) with values in ``[0, vocab_size)`` (read only where
    ``checks_read_values(ids)`` says: on the CPU, and on an accelerator under ``strict_checks()``; an id out
    of range is an ``IndexError`` deep in torch on the CPU and a device-side assert on a GPU)."""
    if not isinstance(ids, torch.Tensor) or ids.dtype not in EMBEDDING_INDEX_DTYPES:
        got = f"dtype {ids.dtype}" if isinstance(ids, torch.Tensor) else type(ids).__name__
        raise ValueError(f"token ids must be integers (torch.int64 or torch.int32) in [0, vocab_size={vocab_size}), "
                         f"got {got}")
    if ids.numel() and checks_read_values(ids) and bool(((ids < 0) | (ids >= vocab_size)).any()):
        raise ValueError(f"token ids must be integers in [0, vocab_size={vocab_size}), got ids from "
                         f"{int(ids.min())} to {int(ids.max())}")


def check_positive_int(name: str, value, hint: str = "") -> int:
    """Return ``value`` if it is an int >= 1 (not a bool), else raise naming the argument ``name``.

    ``hint`` is said after "a positive integer", e.g. ``"(1 = unigram)"`` or ``"or None (no filtering)"``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer{' ' + hint if hint else ''}, got {value!r}")
    return value


def check_non_negative_int(name: str, value) -> int:
    """Return ``value`` if it is an int >= 0 (not a bool), else raise naming the argument ``name``: a count
    that may be zero, such as a number of new tokens."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return value


def check_bool(name: str, value) -> bool:
    """Return ``value`` if it is ``True`` or ``False``, else raise naming the argument ``name``: a flag such as
    ``"no"`` or ``1`` would otherwise be read as truthy and switch the option on."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {type(value).__name__} {value!r}")
    return value


#: the seeds ``torch.Generator.manual_seed`` takes, and with it every generator of the package
SEED_RANGE = (-2**63, 2**64)


def check_seed(name: str, value, *, non_negative: bool = False) -> int:
    """Return ``value`` as an int if it is an integer (Python's or NumPy's, not a bool) in ``SEED_RANGE``
    (``non_negative``: from 0 on, as NumPy's generators take), else raise naming the argument ``name``: a float,
    a string or ``None`` seeds Python's ``random`` (``None``: a new draw on every call) but not torch's, and
    ``True`` would silently be seed 1."""
    low = 0 if non_negative else SEED_RANGE[0]
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not low <= value < SEED_RANGE[1]:
        raise ValueError(f"{name} must be an integer seed in [{'0' if non_negative else '-2**63'}, 2**64), "
                         f"got {value!r}")
    return int(value)


def check_device(name: str, value) -> torch.device:
    """``value``, a ``torch.device`` or a device name (``"cpu"``, ``"cuda:1"``), as a ``torch.device``; else raise
    naming the argument ``name``. Whether this machine has that device is not checked (``device.get_device``
    does)."""
    if isinstance(value, torch.device):
        return value
    if isinstance(value, str):
        try:
            return torch.device(value)
        except RuntimeError:
            pass
    raise ValueError(f"{name} must be a torch.device or a device name such as 'cpu' or 'cuda:0', got {value!r}")


def is_finite_number(value) -> bool:
    """Is ``value`` a real number (not a bool: ``True`` is an int to Python) that is neither NaN nor infinite?"""
    return not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)


def check_probability(name: str, value, *, one_allowed: bool = False):
    """Return ``value`` if it is a real number (not a bool) in [0, 1) (``one_allowed``: [0, 1]), else raise
    naming the argument ``name``: a dropout rate of 1 (or NaN) would zero (or poison) every activation."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value) or not (
            0 <= value <= 1 if one_allowed else 0 <= value < 1):
        raise ValueError(f"{name} must be a number in [0, 1{']' if one_allowed else ')'}, got {value!r}")
    return value


def check_query_count(num_queries, num_keys) -> None:
    """Raise unless both are positive ints and ``num_queries <= num_keys``: the queries are the last
    ``num_queries`` of the ``num_keys`` positions (``alibi_bias``, ``sliding_window_mask``), so a query
    beyond them would see no key."""
    check_positive_int("num_queries", num_queries)
    check_positive_int("num_keys", num_keys)
    if num_queries > num_keys:
        raise ValueError(f"num_queries must be at most num_keys (the queries are the last positions), got "
                         f"num_queries={num_queries} > num_keys={num_keys}")


def check_stream(stream, name: str, min_length: int) -> None:
    """Raise unless ``stream`` is a 1-D integer tensor (not bool) of token indices holding at least ``min_length``."""
    if not isinstance(stream, torch.Tensor) or stream.dim() != 1 or not _integer_dtype(stream):
        got = f"shape {tuple(stream.shape)}, dtype {stream.dtype}" if isinstance(stream, torch.Tensor) \
            else type(stream).__name__
        raise ValueError(f"{name} must be a 1-D integer tensor of token indices, got {got}")
    if len(stream) < min_length:
        raise ValueError(f"{name} must hold at least {min_length} tokens, got {len(stream)}")


def check_labelled_inputs(inputs, labels) -> None:
    """Raise unless ``labels`` is a 1-D tensor of class indices and each of ``inputs`` a tensor with one
    row per label."""
    if not isinstance(labels, torch.Tensor) or labels.dim() != 1:
        raise ValueError(f"labels must be a 1-D tensor of class indices, got "
                         f"{type(labels).__name__} {tuple(getattr(labels, 'shape', ()))}")
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor) or x.shape[:1] != labels.shape:
            raise ValueError(f"input {i} must be a tensor with one row per label ({labels.shape[0]} rows), "
                             f"got {type(x).__name__} {tuple(getattr(x, 'shape', ()))}")


def check_queries_keys(queries, keys, same_size: bool = False, what: str = "this score") -> None:
    """Raise ``ValueError`` naming the shapes unless queries (..., Q, dq) and keys (..., K, dk) fit.

    They must be tensors of the same dtype with the same leading (batch) dimensions; with
    ``same_size=True`` also ``dq == dk``.
    """
    for name, t in (("queries", queries), ("keys", keys)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a tensor, got {type(t).__name__}")
        if t.dim() < 2:
            raise ValueError(f"{name} must have shape (..., items, features), got {tuple(t.shape)}")
        if not t.is_floating_point():
            raise ValueError(f"{name} must be a floating-point tensor, got dtype {t.dtype} (convert with .float())")
    q_shape, k_shape = tuple(queries.shape), tuple(keys.shape)
    if q_shape[:-2] != k_shape[:-2]:
        raise ValueError(
            f"queries {q_shape} and keys {k_shape} must have the same leading (batch) "
            f"dimensions, got {q_shape[:-2]} and {k_shape[:-2]}"
        )
    if same_size and q_shape[-1] != k_shape[-1]:
        raise ValueError(
            f"{what} needs queries and keys of the same size d; got queries {q_shape} "
            f"(d={q_shape[-1]}) and keys {k_shape} (d={k_shape[-1]})"
        )
    if queries.dtype != keys.dtype:
        raise ValueError(f"queries ({queries.dtype}) and keys ({keys.dtype}) must have the same dtype")


def check_attention_inputs(queries, keys, values, same_size: bool = False, what: str = "this layer") -> None:
    """Raise ``ValueError`` naming the shapes unless queries, keys and values fit an attention layer."""
    for name, t in (("queries", queries), ("keys", keys), ("values", values)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a tensor, got {type(t).__name__}")
        if t.dim() < 3:
            raise ValueError(f"{name} must have shape (batch, items, features), got {tuple(t.shape)}")
    check_queries_keys(queries, keys, same_size=same_size, what=what)
    if values.shape[:-1] != keys.shape[:-1]:
        raise ValueError(
            f"keys and values must come in pairs: keys {tuple(keys.shape)} hold {keys.shape[-2]} items, "
            f"values {tuple(values.shape)} hold {values.shape[-2]}"
            + ("" if values.shape[:-2] == keys.shape[:-2] else " (and their batch dimensions differ)")
        )
    if values.dtype != queries.dtype:
        raise ValueError(f"values ({values.dtype}) must have the dtype of queries and keys ({queries.dtype})")


def autocast_on(device_type: str) -> bool:
    """Is autocast on for ``device_type`` (``"cuda"``, ``"cpu"``, ...)? Inputs then come in autocast's dtype,
    not their weights', so a dtype check against the weights would refuse what autocast will cast."""
    try:
        return torch.is_autocast_enabled(device_type)
    except TypeError:  # torch < 2.4 takes no argument (and means CUDA)
        return torch.is_autocast_enabled() if device_type == "cuda" else torch.is_autocast_cpu_enabled()


def check_weights_dtype(module: torch.nn.Module, X: torch.Tensor, what: str) -> None:
    """Raise ``ValueError`` unless ``X`` has the dtype of ``module``'s first weight matrix (torch's own
    message, "mat1 and mat2 must have the same dtype", names neither the layer nor the fix). Scalar
    parameters are not compared (they promote), and nothing is checked under autocast, which casts."""
    if autocast_on(X.device.type):
        return
    for p in module.parameters():
        if isinstance(p, torch.nn.parameter.UninitializedParameter) or p.dim() >= 1:
            if p.dtype != X.dtype:
                raise ValueError(f"{what} has {p.dtype} weights but got {X.dtype} inputs; convert one to the "
                                 f"other, e.g. layer.to({X.dtype}) or inputs.to({p.dtype})")
            return
