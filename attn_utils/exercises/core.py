"""The shared core of the exercise checkers: cases, comparison, and messages that say what went wrong.

A checker runs the reader's function on several named cases, each with an expected result computed
by a tested reference, and reports the first case that fails with what was expected and what came
back. Nothing here knows about any one exercise; the chapter modules (``ch01``, ...) register theirs.
"""

from __future__ import annotations

import copy
import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch

from ..tolerance import full_float32, least_precise, magnitude, tolerance

REGISTRY: dict[str, Callable] = {}

#: seconds one case may take before the checker gives up on it (``run_cases(..., timeout=)``)
DEFAULT_TIMEOUT = 60.0


def seeded_randn(*shape: int, seed: int, scale: float = 1.0) -> torch.Tensor:
    """``scale * randn(*shape)`` from a generator of its own: the same case data on every machine."""
    return scale * torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class TensorTooLarge(RuntimeError):
    """Raised when a function builds a tensor larger than its exercise allows."""


class _Refusing(torch.Tensor):
    """A tensor whose every operation raises ``TensorTooLarge`` when its result has ``limit`` or more
    numbers (``limit`` and ``advice`` are set on a subclass made per case)."""

    limit = 0
    advice = ""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        result = super().__torch_function__(func, types, args, kwargs or {})
        for t in result if isinstance(result, (tuple, list)) else (result,):
            if isinstance(t, torch.Tensor) and t.numel() >= cls.limit:
                raise TensorTooLarge(
                    f"your function built a tensor of shape {tuple(t.shape)}, {t.numel():,} "
                    f"numbers: {cls.advice}")
        return result


def refuse_large(tensors, limit: int, advice: str) -> tuple[torch.Tensor, ...]:
    """``tensors`` as tensors that refuse to build a result of ``limit`` numbers or more, saying
    ``advice``: the check that a function works in pieces (tiles, groups, windows) rather than all at
    once."""
    kind = type("RefusingTensor", (_Refusing,), {"limit": limit, "advice": advice})
    return tuple(t.as_subclass(kind) for t in tensors)


@dataclass
class Case:
    """One call of the reader's function: ``fn(*args, **kwargs)`` should return ``expected``.

    The result must match within ``attn_utils.tolerance``'s policy for its dtype and device, relative
    to ``scale``: the largest magnitude in the computation, by default that of the expected result
    (give it where intermediate values grow larger, e.g. large scores; not the inputs, which may hold
    trap values that never enter a correct computation). ``atol`` and ``rtol``, when given, replace
    the policy's (``0.0`` for a result that must be exact).
    """

    name: str
    args: tuple
    expected: torch.Tensor
    kwargs: dict = field(default_factory=dict)
    atol: float | None = None
    rtol: float | None = None
    scale: float | None = None

    def tolerance(self, got: torch.Tensor, device: torch.device) -> dict:
        """``{"atol", "rtol"}`` for comparing ``got``, computed on ``device``, with the expected result."""
        dtypes = tuple(_REAL_OF_COMPLEX.get(d, d) for d in (got.dtype, self.expected.dtype))
        if not any(d.is_floating_point for d in dtypes):
            policy = {"atol": 0.0, "rtol": 0.0}  # integers: exact
        else:
            scale = self.scale
            if scale is None:
                scale = magnitude(self.expected)
            policy = tolerance(least_precise(dtypes), device, scale)
        return {"atol": policy["atol"] if self.atol is None else self.atol,
                "rtol": policy["rtol"] if self.rtol is None else self.rtol}


@dataclass
class CheckResult:
    """What a checker found: ``passed`` is True only when every case passed."""

    label: str
    passed: bool
    cases_passed: int
    cases_total: int
    message: str
    not_implemented: bool = False
    #: what passed but deserves a word, e.g. a float64 result where the cases expect float32 (also in ``message``)
    notes: tuple[str, ...] = ()

    @property
    def score(self) -> float:
        """The fraction of cases passed (0.0 for a function that is not implemented yet)."""
        return self.cases_passed / self.cases_total if self.cases_total else 0.0

    def __bool__(self) -> bool:
        return self.passed


class ExerciseFailed(AssertionError):
    """Raised by ``check_exercise`` when the reader's function gives a wrong answer."""


def register(label: str):
    """Decorator: ``@register("ch01-...")`` on a function ``device -> list[Case]``."""

    def decorate(make_cases: Callable[[torch.device], list[Case]]):
        if label in REGISTRY:
            raise ValueError(f"exercise {label!r} is registered twice")
        REGISTRY[label] = make_cases
        return make_cases

    return decorate


def labels() -> list[str]:
    """Every exercise that has a checker, sorted."""
    return sorted(REGISTRY)


def _show(x) -> str:
    if isinstance(x, torch.Tensor):
        values = x.detach().cpu()
        if values.is_floating_point():
            values = values.double().round(decimals=4)
        text = str(values.tolist() if values.numel() <= 24 else values)
        return f"{text} (shape {tuple(x.shape)}, dtype {str(x.dtype).replace('torch.', '')}, device {x.device.type})"
    return f"{x!r} (a {type(x).__name__}, not a tensor)"


_REAL_OF_COMPLEX = {torch.complex32: torch.float16, torch.complex64: torch.float32, torch.complex128: torch.float64}


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _kind(dtype: torch.dtype) -> str:
    """``'bool'``, ``'complex'``, ``'floating-point'`` or ``'integer'``: what a result's numbers are."""
    if dtype == torch.bool:
        return "bool"
    if dtype.is_complex:
        return "complex"
    return "floating-point" if dtype.is_floating_point else "integer"


_KIND_ADVICE = {
    ("floating-point", "integer"): "integers where real numbers are expected (a one-hot or rounded result instead "
                                   "of probabilities or averages? compute in the inputs' dtype)",
    ("integer", "floating-point"): "indices and counts are integers: return an integer tensor (argmax and "
                                   "torch.arange give int64; convert with .long())",
    ("floating-point", "complex"): "a complex result where real numbers are expected: its imaginary part would be "
                                   "dropped, not checked (take .real only if the imaginary part is 0 by construction)",
    ("integer", "complex"): "a complex result where integers are expected",
}


def _dtype_problem(got: torch.Tensor, want: torch.Tensor) -> str | None:
    """Why ``got``'s dtype cannot stand for ``want``'s, or None: another kind of number (integer,
    floating-point, complex, bool), or a floating-point dtype less precise than the expected one (a
    float16 result where the cases expect float32 has lost digits the check would then forgive). A
    more precise dtype, or another width of integer, is not a problem here (see ``dtype_note``)."""
    got_kind, want_kind = _kind(got.dtype), _kind(want.dtype)
    if got_kind != want_kind:
        advice = _KIND_ADVICE.get((want_kind, got_kind), f"{want_kind} numbers are expected")
        return (f"expected dtype {_dtype_name(want.dtype)} ({want_kind}), got {_dtype_name(got.dtype)} ({got_kind}): "
                f"{advice}; got {_show(got)}")
    if got_kind in ("floating-point", "complex"):
        got_real, want_real = (_REAL_OF_COMPLEX.get(d, d) for d in (got.dtype, want.dtype))
        if torch.finfo(got_real).eps > torch.finfo(want_real).eps:
            return (f"expected dtype {_dtype_name(want.dtype)}, got {_dtype_name(got.dtype)}, which holds fewer "
                    f"digits: the function converted to a lower precision (.half(), .to(torch.bfloat16)?); "
                    f"compute and return the result in {_dtype_name(want.dtype)}")
    return None


def dtype_note(got, case: Case) -> str | None:
    """A note for a result that passed in another dtype of the same kind than the case expects (float64
    for float32, int32 for int64), or None. Such a result is right within the expected dtype's
    tolerance, so it passes; the note says so, because the dtype will matter where the result meets
    the rest of the model (float32 weights refuse a float64 input)."""
    if not isinstance(got, torch.Tensor) or got.dtype == case.expected.dtype:
        return None
    where = " (a float64 tensor often comes from NumPy or from dtype=torch.float64)" \
        if got.dtype == torch.float64 else ""
    return (f"case {case.name!r} returned {_dtype_name(got.dtype)} where the cases expect "
            f"{_dtype_name(case.expected.dtype)}; the values are right, so it passes, but the result should "
            f"keep the inputs' dtype{where}: convert with .to(an_input.dtype)")


def compare(got, case: Case, device: torch.device) -> str | None:
    """None if ``got`` matches the case, else a sentence saying how it differs.

    In order: a tensor, on the inputs' device, of the expected shape, of the expected kind of number
    (bool, integer, floating-point or complex: an int64 one-hot is no probability distribution, a complex
    result is not compared on its real part alone) and not less precise than expected (float16 for
    float32); then the values, within the policy's tolerance. A more precise result (float64 for
    float32) passes, with a note (``dtype_note``): its values are right, and refusing it would fail a
    correct formula for a dtype the exercise never asked about."""
    want = case.expected
    if not isinstance(got, torch.Tensor):
        return f"expected a tensor, got {_show(got)}"
    if got.device.type != device.type:
        return (f"expected a tensor on {device.type} (the device of the inputs), got one on {got.device.type}; "
                f"create new tensors with device=<an input>.device")
    if tuple(got.shape) != tuple(want.shape):
        return f"expected shape {tuple(want.shape)}, got shape {tuple(got.shape)}: {_show(got)}"
    if want.dtype == torch.bool or got.dtype == torch.bool:
        if got.dtype != want.dtype:
            return f"expected dtype {want.dtype}, got {got.dtype}"
        differ = (got.cpu() != want.cpu()).sum().item()
        if differ:
            return f"expected {_show(want)}, got {_show(got)} ({differ} entries differ)"
        return None
    problem = _dtype_problem(got, want)
    if problem:
        return problem
    wide = torch.complex128 if want.is_complex() else torch.float64  # compare in full precision
    g, w = got.detach().cpu().to(wide), want.detach().cpu().to(wide)
    if torch.isnan(g).any() and not torch.isnan(w).any():
        return f"expected {_show(want)}, got NaN in {_show(got)}"
    tol = case.tolerance(got, device)
    if not torch.allclose(g, w, **tol, equal_nan=True):
        worst = (g - w).abs().max().item()
        return (f"expected {_show(want)}, got {_show(got)} (largest difference {worst:.3g}; allowed "
                f"{tol['atol']:.2g} + {tol['rtol']:.2g} x |expected|)")
    return None


def _to(x, device: torch.device):
    return x.to(device) if isinstance(x, torch.Tensor) else x


def _copy(x):
    """A copy of a case argument that the reader's function may do anything to without touching ours."""
    if isinstance(x, torch.Tensor):
        return x.detach().clone().requires_grad_(x.requires_grad) if x.is_leaf else x.detach().clone()
    if isinstance(x, (list, tuple)):
        return type(x)(_copy(v) for v in x)
    if isinstance(x, dict):
        return {k: _copy(v) for k, v in x.items()}
    try:
        return copy.deepcopy(x)
    except Exception:  # something that cannot be copied (a lock, a generator): pass it as it is
        return x


def _unchanged(given, original) -> bool:
    """Whether the copy the reader's function was given still equals the original (NaN equals NaN)."""
    if isinstance(original, torch.Tensor):
        if not isinstance(given, torch.Tensor) or given.shape != original.shape or given.dtype != original.dtype:
            return False
        a, b = given.detach(), original.detach().to(given.device)
        if a.is_floating_point() or a.is_complex():
            return bool(torch.equal(a, b) or torch.allclose(a, b, rtol=0.0, atol=0.0, equal_nan=True))
        return bool(torch.equal(a, b))
    if isinstance(original, (list, tuple)):
        return (isinstance(given, (list, tuple)) and len(given) == len(original)
                and all(_unchanged(g, o) for g, o in zip(given, original)))
    if isinstance(original, dict):
        return (isinstance(given, dict) and given.keys() == original.keys()
                and all(_unchanged(given[k], original[k]) for k in original))
    return True  # numbers, strings, functions: nothing a student can change in place that we check


def _input_name(fn: Callable, position: int | str) -> str:
    """``'keys' (argument 2)`` for a positional argument, ``'valid_lens'`` for a keyword one."""
    if isinstance(position, str):
        return repr(position)
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    if position < len(params):
        return f"{params[position].name!r} (argument {position + 1})"
    return f"argument {position + 1}"


class _TimedOut(Exception):
    """The reader's function did not return within the time limit."""


def _call(fn: Callable, args: tuple, kwargs: dict, timeout: float | None):
    """``fn(*args, **kwargs)``, giving up after ``timeout`` seconds (None: wait for ever).

    The call runs in a daemon thread that the checker waits on with ``join(timeout)``. Python cannot
    kill a thread, so a function that never returns keeps running in the background (on the copies of
    the inputs, so it changes nothing of the checker's) until it ends or the session does.
    """
    if timeout is None:
        return fn(*args, **kwargs)
    outcome: dict = {}
    grad_enabled = torch.is_grad_enabled()  # grad mode is per thread: give the call the caller's

    def target():
        try:
            with torch.set_grad_enabled(grad_enabled):
                outcome["value"] = fn(*args, **kwargs)
        except BaseException as error:  # handed to the caller, which reports it
            outcome["error"] = error

    thread = threading.Thread(target=target, name=f"checker-{getattr(fn, '__name__', 'fn')}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise _TimedOut
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def run_cases(label: str, fn: Callable, device=None, timeout: float | None = DEFAULT_TIMEOUT) -> CheckResult:
    """Run ``fn`` on every case of exercise ``label`` on ``device`` (default: CPU).

    ``fn`` gets copies of each case's inputs; a case fails if ``fn`` changed one of them in place (the
    checker's own data, and the expected results, stay as they were). A case that takes more than
    ``timeout`` seconds (None: no limit) fails, and the cases after it are not run: the call cannot be
    stopped, so it may go on running in the background. Results are compared within
    ``attn_utils.tolerance``'s policy (``Case``), with TF32 off on CUDA.

    Never raises for a wrong or missing answer; raises ValueError for an unknown label or a non-function.
    """
    if not isinstance(label, str) or label not in REGISTRY:
        raise ValueError(f"no checker for exercise {label!r}; known exercises: {', '.join(labels())}")
    if not callable(fn):
        raise ValueError(f"pass the function itself (not its result) to the checker; got {type(fn).__name__}")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not timeout > 0):  # NaN fails timeout > 0
        raise ValueError(f"timeout must be a positive number of seconds, or None or inf for no limit, got {timeout!r}")
    if timeout is not None and timeout >= threading.TIMEOUT_MAX:  # inf: no limit (join() cannot wait that long)
        timeout = None
    try:
        device = torch.device("cpu" if device is None else device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device must be a torch.device or a name such as 'cpu' or 'cuda', got {device!r}") from err
    if device.type == "meta":  # tensors without values: every case would fail with an obscure error
        raise ValueError("device 'meta' holds shapes but no values, so no answer can be checked there; leave "
                         "device out to check on the CPU")
    try:  # a device this machine lacks fails here, not as an AssertionError (an ExerciseFailed look-alike) later
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError) as err:
        raise ValueError(f"device {str(device)!r} is not available on this machine ({err}); leave device out to "
                         f"check on the CPU") from err
    # TF32 off while the cases are built, run and compared: the check is of the reader's formula, so
    # float32 means float32 on every device, and a correct answer's tolerance is the CPU's.
    with full_float32():
        return _run_cases(label, fn, device, timeout)


def _run_cases(label: str, fn: Callable, device: torch.device, timeout: float | None) -> CheckResult:
    """``run_cases`` once its arguments are checked."""
    cases = REGISTRY[label](device)
    failures: list[tuple[str, str]] = []  # (case name, what went wrong)
    notes: list[str] = []  # cases that passed in another dtype of the same kind
    for index, case in enumerate(cases):
        # the expected result may be a view of an input: keep a copy of its own
        if isinstance(case.expected, torch.Tensor):
            case = replace(case, expected=case.expected.detach().clone())
        originals = tuple(_to(a, device) for a in case.args)
        original_kwargs = {k: _to(v, device) for k, v in case.kwargs.items()}
        args = tuple(_copy(a) for a in originals)
        kwargs = {k: _copy(v) for k, v in original_kwargs.items()}
        try:
            got = _call(fn, args, kwargs, timeout)
        except NotImplementedError:
            return CheckResult(label, False, 0, len(cases), (
                f"{label}: not implemented yet (the function raised NotImplementedError). "
                f"Replace `raise NotImplementedError` with your code and run the check again."
            ), not_implemented=True)
        except _TimedOut:
            problem = (f"case {case.name!r} took more than {timeout:g} s: the function did not return "
                       f"(an endless loop, or far too much work?)")
            skipped = cases[index + 1:]
            if skipped:
                problem += f"; the {len(skipped)} cases after it were not run"
            failures.append((case.name, problem))
            failures.extend((c.name, "not run (an earlier case timed out)") for c in skipped)
            break
        except Exception as error:  # the reader's code crashed: say on which case, and how
            failures.append((case.name, f"raised {type(error).__name__}: {error}"))
            continue
        except SystemExit as error:  # exit() inside the answer: a wrong answer, not the end of a grading run
            failures.append((case.name, f"called exit() or sys.exit() (SystemExit: {error.code!r}) instead of "
                                        f"returning a result"))
            continue
        changed = [i for i, (a, o) in enumerate(zip(args, originals)) if not _unchanged(a, o)]
        changed += [k for k in original_kwargs if not _unchanged(kwargs[k], original_kwargs[k])]
        if changed:
            failures.append((case.name, f"your function modified its input {_input_name(fn, changed[0])} in place; "
                                        f"work on a copy (x.clone()) or use out-of-place operations"))
            continue
        problem = compare(got, case, device)
        if problem:
            failures.append((case.name, problem))
        elif (note := dtype_note(got, case)) is not None:
            notes.append(note)
    passed = len(cases) - len(failures)
    if failures:
        name, problem = failures[0]
        message = f"{label}: {passed} of {len(cases)} cases pass. Case {name!r} failed: {problem}"
        if len(failures) > 1:
            message += "\nAlso failing: " + "; ".join(repr(n) for n, _ in failures[1:])
        return CheckResult(label, False, passed, len(cases), message + _notes_text(notes), notes=tuple(notes))
    message = f"{label}: all {len(cases)} cases pass on {device.type}." + _notes_text(notes)
    return CheckResult(label, True, passed, len(cases), message, notes=tuple(notes))


def _notes_text(notes: list[str]) -> str:
    """The first note, and how many more cases it applies to, on a line of its own ('' without notes)."""
    if not notes:
        return ""
    more = f" (and {len(notes) - 1} more case{'s' if len(notes) > 2 else ''} alike)" if len(notes) > 1 else ""
    return f"\nNote: {notes[0]}{more}"
