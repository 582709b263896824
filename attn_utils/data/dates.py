"""Human-readable dates → ISO dates, with gold alignments from source to target tokens.

A date between 1950-01-01 and 2049-12-31 is written in one of ``DATE_FORMATS`` (tokens separated
by spaces, the separators "/" and "," being tokens of their own) and translated to the ISO date
as five tokens, ``2021 - 03 - 03``; ``iso_date`` joins them back into ``2021-03-03``. Slashed
dates are American (month first), and two-digit years mean 1950–2049 (``50``–``99`` → 19xx,
``00``–``49`` → 20xx). Links join the month, day and year tokens to the ISO month, day and year;
weekdays, "the", "of", "," and "/" in the source and the two "-" in the target have none.
"""

from __future__ import annotations

import datetime
import random
import re

from ..checks import check_non_negative_int, check_seed

MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september",
          "october", "november", "december"]
MONTHS_SHORT = [m[:3] for m in MONTHS]
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
FIRST_DAY, LAST_DAY = datetime.date(1950, 1, 1), datetime.date(2049, 12, 31)
# Each format is a list of fields; the letters Y M D name the tokens that carry year, month, day.
DATE_FORMATS = {
    "month_day_year": "{month} {day} , {year}",           # march 3 , 2021
    "day_month_year": "{day} {month} {year}",             # 3 march 2021
    "short_month": "{mon} {day} , {year}",                # mar 3 , 2021
    "slashes": "{mm} / {dd} / {yy}",                      # 03 / 03 / 21
    "weekday": "{weekday} , {month} {day} , {year}",      # wednesday , march 3 , 2021
    "ordinal": "the {ordinal} of {month} , {year}",       # the 3rd of march , 2021
}
_FIELD_TARGET = {"month": 2, "mon": 2, "mm": 2, "day": 4, "dd": 4, "ordinal": 4, "year": 0, "yy": 0}


def _ordinal(day: int) -> str:
    suffix = "th" if 11 <= day % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def format_date(date: datetime.date, fmt: str):
    """``(source_tokens, target_tokens, links)`` for ``date`` (a ``datetime.date`` from 1950-01-01 to 2049-12-31,
    where two-digit years are unambiguous) written in format ``fmt``."""
    if not isinstance(date, datetime.date) or not FIRST_DAY <= date <= LAST_DAY:
        raise ValueError(f"date must be a datetime.date from {FIRST_DAY} to {LAST_DAY}, got {date!r}")
    if not isinstance(fmt, str) or fmt not in DATE_FORMATS:
        raise ValueError(f"unknown date format {fmt!r}; expected one of {sorted(DATE_FORMATS)}")
    values = {
        "month": MONTHS[date.month - 1], "mon": MONTHS_SHORT[date.month - 1], "mm": f"{date.month:02d}",
        "day": str(date.day), "dd": f"{date.day:02d}", "ordinal": _ordinal(date.day),
        "year": str(date.year), "yy": f"{date.year % 100:02d}", "weekday": WEEKDAYS[date.weekday()],
    }
    source, links = [], []
    for piece in DATE_FORMATS[fmt].split():
        name = piece[1:-1] if piece.startswith("{") else None
        if name in _FIELD_TARGET:
            links.append((len(source), _FIELD_TARGET[name]))
        source.append(values[name] if name else piece)
    target = [f"{date.year:04d}", "-", f"{date.month:02d}", "-", f"{date.day:02d}"]
    return source, target, sorted(links)


def iso_date(tokens) -> str:
    """Join target tokens (a list of strings) back into an ISO date string: ``['2021', '-', '03', '-', '03']`` →
    ``'2021-03-03'``."""
    if isinstance(tokens, str) or not isinstance(tokens, (list, tuple)) or not all(isinstance(t, str) for t in tokens):
        raise ValueError(f"tokens must be a list of strings, got {type(tokens).__name__} {tokens!r:.60}")
    return "".join(tokens)


_SEPARATORS = re.compile(r"\s*([/,-])\s*")


def tokenize_date(text: str) -> list[str]:
    """Tokens of a date typed by hand (a string), as in the corpus: ``"March 3, 2021"`` → ``['march', '3', ',',
    '2021']``."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__} {text!r:.40}")
    return _SEPARATORS.sub(r" \1 ", text.lower().replace(".", " ")).split()


def generate_dates(num_examples: int = 5000, seed: int = 0):
    """``num_examples`` random dates, each in a random format, the same for the same seed (an int)."""
    check_non_negative_int("num_examples", num_examples)
    seed = check_seed("seed", seed)
    rng = random.Random(seed)
    span = (LAST_DAY - FIRST_DAY).days + 1
    names = list(DATE_FORMATS)
    examples = []
    for _ in range(num_examples):
        date = FIRST_DAY + datetime.timedelta(days=rng.randrange(span))
        examples.append(format_date(date, names[rng.randrange(len(names))]))
    return examples
