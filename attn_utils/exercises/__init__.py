"""Checkers for the coding exercises: ``check_exercise("ch01-write-soft-lookup", my_soft_lookup)``.

Each chapter module registers its exercises' cases; ``check_exercise`` prints one line when every
case passes, prints "not implemented yet" when the function still raises ``NotImplementedError``,
and raises :class:`ExerciseFailed` naming the failing case, what was expected and what came back.
``grade`` returns the same findings as a :class:`CheckResult` without printing or raising (for
autograders).
"""

from __future__ import annotations

from . import (  # noqa: F401  (registers the chapters' exercises)
    ch01,
    ch02,
    ch03,
    ch04,
    ch05,
    ch06,
    ch07_documents,
    ch07_images,
    ch07_relations,
    ch08,
    ch09,
    ch10,
    ch11_fast,
    ch11_models,
)
from .core import Case, CheckResult, ExerciseFailed, labels, run_cases


def grade(label: str, fn, device=None) -> CheckResult:
    """Run the checker of exercise ``label`` on ``fn``; never raises for a wrong or missing answer."""
    return run_cases(label, fn, device)


def check_exercise(label: str, fn, device=None) -> None:
    """Check ``fn`` for exercise ``label`` on ``device`` (default CPU): print one line when it passes
    or is not implemented yet, raise :class:`ExerciseFailed` saying which case failed and how."""
    result = run_cases(label, fn, device)
    if not (result.passed or result.not_implemented):
        raise ExerciseFailed(result.message)
    print(result.message)


__all__ = ["Case", "CheckResult", "ExerciseFailed", "check_exercise", "grade", "labels"]
