"""The two training budgets: the book's, and a quick one for the tests.

Every training cell of the course takes its size from ``budget(book=..., quick=...)``. A reader's
own run and ``make execute`` (which stores the outputs the book shows) use the **book** budget,
large enough for each claim in the text to hold. ``make test`` sets ``ATTN_UTILS_QUICK=1``: every
training cell then shrinks to a smoke size that still runs every code path (a few steps, then
decoding, evaluation and plots), so the whole suite stays within minutes.
"""

from __future__ import annotations

import os

QUICK_ENV_VAR = "ATTN_UTILS_QUICK"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


def quick_mode() -> bool:
    """True when the environment variable ``ATTN_UTILS_QUICK`` asks for the quick budget (``1``)."""
    value = os.environ.get(QUICK_ENV_VAR, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"{QUICK_ENV_VAR} must be 1 (quick budget) or 0/unset (book budget), got {value!r}")


def budget(book, quick):
    """``quick`` under ``ATTN_UTILS_QUICK=1``, else ``book``: e.g. ``STEPS = budget(book=1200, quick=4)``.

    Both may be any value (a number of steps, seconds, a dict of settings); they must be of the
    same type (an int and a float count as the same), so a cell runs the same code under both.
    """
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (book, quick))
    if not numbers and type(book) is not type(quick):
        raise ValueError(f"book and quick budgets must be of the same type, got {type(book).__name__} "
                         f"and {type(quick).__name__}")
    return quick if quick_mode() else book


def budget_name() -> str:
    """``'book budget'`` or ``'quick budget (ATTN_UTILS_QUICK=1)'``: what training cells print."""
    return f"quick budget ({QUICK_ENV_VAR}=1)" if quick_mode() else "book budget"
