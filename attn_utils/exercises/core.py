"""The shared core of the exercise checkers: cases, comparison, and messages that say what went wrong.

A checker runs the reader's function on several named cases, each with an expected result computed
by a tested reference, and reports the first case that fails with what was expected and what came
back. Nothing here knows about any one exercise; the chapter modules (``ch01``, ...) register theirs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

_REGISTRY: dict[str, Callable] = {}


def seeded_randn(*shape: int, seed: int, scale: float = 1.0) -> torch.Tensor:
    """``scale * randn(*shape)`` from a generator of its own: the same case data on every machine."""
    return scale * torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@dataclass
class Case:
    """One call of the reader's function: ``fn(*args, **kwargs)`` should return ``expected``."""

    name: str
    args: tuple
    expected: torch.Tensor
    kwargs: dict = field(default_factory=dict)
    atol: float = 1e-5
    rtol: float = 1e-4


@dataclass
class CheckResult:
    """What a checker found: ``passed`` is True only when every case passed."""

    label: str
    passed: bool
    cases_passed: int
    cases_total: int
    message: str
    not_implemented: bool = False

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
        if label in _REGISTRY:
            raise ValueError(f"exercise {label!r} is registered twice")
        _REGISTRY[label] = make_cases
        return make_cases

    return decorate


def labels() -> list[str]:
    """Every exercise that has a checker, sorted."""
    return sorted(_REGISTRY)


def _show(x) -> str:
    if isinstance(x, torch.Tensor):
        values = x.detach().cpu()
        if values.is_floating_point():
            values = values.double().round(decimals=4)
        text = str(values.tolist() if values.numel() <= 24 else values)
        return f"{text} (shape {tuple(x.shape)}, dtype {str(x.dtype).replace('torch.', '')}, device {x.device.type})"
    return f"{x!r} (a {type(x).__name__}, not a tensor)"


def compare(got, case: Case, device: torch.device) -> str | None:
    """None if ``got`` matches the case, else a sentence saying how it differs."""
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
    g, w = got.detach().cpu().double(), want.detach().cpu().double()
    if torch.isnan(g).any() and not torch.isnan(w).any():
        return f"expected {_show(want)}, got NaN in {_show(got)}"
    if not torch.allclose(g, w, atol=case.atol, rtol=case.rtol, equal_nan=True):
        worst = (g - w).abs().max().item()
        return f"expected {_show(want)}, got {_show(got)} (largest difference {worst:.3g})"
    return None


def _to(x, device: torch.device):
    return x.to(device) if isinstance(x, torch.Tensor) else x


def run_cases(label: str, fn: Callable, device=None) -> CheckResult:
    """Run ``fn`` on every case of exercise ``label`` on ``device`` (default: CPU).

    Never raises for a wrong or missing answer; raises ValueError for an unknown label or a non-function.
    """
    if label not in _REGISTRY:
        raise ValueError(f"no checker for exercise {label!r}; known exercises: {', '.join(labels())}")
    if not callable(fn):
        raise ValueError(f"pass the function itself (not its result) to the checker; got {type(fn).__name__}")
    device = torch.device("cpu" if device is None else device)
    cases = _REGISTRY[label](device)
    failures: list[tuple[str, str]] = []  # (case name, what went wrong)
    for case in cases:
        args = tuple(_to(a, device) for a in case.args)
        kwargs = {k: _to(v, device) for k, v in case.kwargs.items()}
        try:
            got = fn(*args, **kwargs)
        except NotImplementedError:
            return CheckResult(label, False, 0, len(cases), (
                f"{label}: not implemented yet (the function raised NotImplementedError). "
                f"Replace `raise NotImplementedError` with your code and run the check again."
            ), not_implemented=True)
        except Exception as error:  # the reader's code crashed: say on which case, and how
            failures.append((case.name, f"raised {type(error).__name__}: {error}"))
            continue
        problem = compare(got, case, device)
        if problem:
            failures.append((case.name, problem))
    passed = len(cases) - len(failures)
    if failures:
        name, problem = failures[0]
        message = f"{label}: {passed} of {len(cases)} cases pass. Case {name!r} failed: {problem}"
        if len(failures) > 1:
            message += "\nAlso failing: " + "; ".join(repr(n) for n, _ in failures[1:])
        return CheckResult(label, False, passed, len(cases), message)
    return CheckResult(label, True, passed, len(cases), f"{label}: all {len(cases)} cases pass on {device.type}.")
