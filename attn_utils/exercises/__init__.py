"""Checkers for the coding exercises: ``check_exercise("ch01-write-soft-lookup", my_soft_lookup)``.

Each chapter module registers its exercises' cases; ``check_exercise`` prints one line when every
case passes, prints "not implemented yet" when the function still raises ``NotImplementedError``,
and raises :class:`ExerciseFailed` naming the failing case, what was expected and what came back.
``grade`` returns the same findings as a :class:`CheckResult` without printing or raising (for
autograders).
"""

from __future__ import annotations

import importlib
import pkgutil
import re

from .core import DEFAULT_TIMEOUT, Case, CheckResult, ExerciseFailed, labels, run_cases

# Every chapter's checker module (``ch01``, ``ch07_relations``, ...) is found here and imported, in
# sorted order, which registers its exercises: a new chapter's ``chNN.py`` needs no edit in this file.
CHECKER_MODULES = tuple(sorted(m.name for m in pkgutil.iter_modules(__path__) if re.fullmatch(r"ch\d\d\w*", m.name)))
for _name in CHECKER_MODULES:
    importlib.import_module(f"{__name__}.{_name}")


def grade(label: str, fn, device=None, timeout: float | None = DEFAULT_TIMEOUT) -> CheckResult:
    """Run the checker of exercise ``label`` on ``fn``; never raises for a wrong or missing answer.

    A case that takes more than ``timeout`` seconds (default 60; None: no limit) fails (see ``run_cases``).
    """
    return run_cases(label, fn, device, timeout=timeout)


def check_exercise(label: str, fn, device=None, timeout: float | None = DEFAULT_TIMEOUT) -> None:
    """Check ``fn`` for exercise ``label`` on ``device`` (default CPU): print one line when it passes
    or is not implemented yet, raise :class:`ExerciseFailed` saying which case failed and how.

    ``fn`` works on copies of the inputs and fails a case if it changes one in place; a case that takes
    more than ``timeout`` seconds (default 60; None: no limit) fails without waiting for it to end."""
    result = run_cases(label, fn, device, timeout=timeout)
    if not (result.passed or result.not_implemented):
        raise ExerciseFailed(result.message)
    print(result.message)


__all__ = ["Case", "CheckResult", "ExerciseFailed", "check_exercise", "grade", "labels"]
