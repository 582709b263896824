"""The SemEval-2010 Task 8 files (Hendrickx et al., 2010): ``TRAIN_FILE.TXT`` and ``TEST_FILE_FULL.TXT``.

The task's data is distributed by its organisers and is not bundled with the course; the folder
holding the two files is passed as ``folder=`` or named by the environment variable
``ATTN_UTILS_SEMEVAL``. The examples are ``RelationExample`` objects (``attn_utils.data.relations``),
as in the generated corpus, without ``evidence``: the real data has no cue annotation.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from .relations import ENTITY_MARKERS, LABELS, RelationExample

SEMEVAL_ENV_VAR = "ATTN_UTILS_SEMEVAL"
SEMEVAL_FILES = {"train": "TRAIN_FILE.TXT", "test": "TEST_FILE_FULL.TXT"}

_SENTENCE_LINE = re.compile(r'^(\d+)\t"(.*)"\s*$')
_TOKEN = re.compile(r"</?e[12]>|[^\W_]+(?:['’.\-][^\W_]+)*|\S")


def tokenize_marked(sentence: str, lowercase: bool = True) -> list[str]:
    """Split a sentence (a string) with ``<e1>...</e1>`` and ``<e2>...</e2>`` into tokens, markers as tokens of
    their own."""
    if not isinstance(sentence, str):
        raise ValueError(f"sentence must be a string, got {type(sentence).__name__} {sentence!r:.40}")
    spaced = re.sub(r"(</?e[12]>)", r" \1 ", sentence)
    tokens = _TOKEN.findall(spaced)
    return [t if t in ENTITY_MARKERS or not lowercase else t.lower() for t in tokens]


def check_markers(tokens: Sequence[str]) -> None:
    """Raise ValueError unless each marker occurs once, in the order ``<e1> ... </e1> ... <e2> ... </e2>``,
    with at least one word inside each entity (``tokens``: a list of strings)."""
    if isinstance(tokens, str) or not isinstance(tokens, (list, tuple)):
        raise ValueError(f"tokens must be a list of tokens, got {type(tokens).__name__} {tokens!r:.40}")
    counts = {m: list(tokens).count(m) for m in ENTITY_MARKERS}
    if any(c != 1 for c in counts.values()):
        raise ValueError(f"expected each entity marker once, got counts {counts}")
    a, b, c, d = (list(tokens).index(m) for m in ENTITY_MARKERS)
    if not (a + 1 < b < c and c + 1 < d):
        raise ValueError(f"expected '<e1> words </e1> ... <e2> words </e2>', "
                         f"got markers at positions {a}, {b}, {c}, {d}")


def load_semeval(path: str | os.PathLike, lowercase: bool = True) -> list[RelationExample]:
    """Read one SemEval-2010 Task 8 file (``TRAIN_FILE.TXT`` or ``TEST_FILE_FULL.TXT``).

    Each example is a block of lines: ``<id>\\t"<sentence with <e1>..</e1> and <e2>..</e2>>"``, the
    label (``Cause-Effect(e2,e1)``, ..., ``Other``), an optional ``Comment:`` line, and a blank line.
    The examples have ``evidence = -1``: the data does not say which word carries the relation.
    A missing file raises FileNotFoundError, a malformed one ValueError, each naming the path (and line).
    ``path`` is a string or a path.
    """
    path = _path(path, "path")
    if not path.is_file():
        raise FileNotFoundError(f"no SemEval-2010 Task 8 file at {path} (expected {SEMEVAL_FILES['train']} "
                                f"or {SEMEVAL_FILES['test']} from the task's distribution)")
    lines = path.read_text(encoding="utf-8-sig").splitlines()
    examples: list[RelationExample] = []
    i = 0

    def fail(n: int, expected: str) -> None:
        got = repr(lines[n]) if n < len(lines) else "the end of the file"
        raise ValueError(f"{path}, line {n + 1}: expected {expected}, got {got}")

    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        match = _SENTENCE_LINE.match(lines[i])
        if not match:
            fail(i, 'a sentence line \'<id>\\t"<sentence>"\'')
        tokens = tokenize_marked(match.group(2), lowercase)
        try:
            check_markers(tokens)
        except ValueError as error:
            raise ValueError(f"{path}, line {i + 1}: {error}") from None
        if i + 1 >= len(lines) or lines[i + 1].strip() not in LABELS:
            fail(i + 1, "a label such as 'Cause-Effect(e1,e2)' or 'Other'")
        examples.append(RelationExample(tuple(tokens), lines[i + 1].strip()))
        i += 2
        if i < len(lines) and lines[i].startswith("Comment"):
            i += 1
        if i < len(lines) and lines[i].strip():
            fail(i, "a blank line after the label (and comment)")
    if not examples:
        raise ValueError(f"{path}: no examples found; is this a SemEval-2010 Task 8 file?")
    return examples


def _path(value, name: str) -> Path:
    if not isinstance(value, (str, os.PathLike)):
        raise ValueError(f"{name} must be a string or a path, got {type(value).__name__} {value!r:.40}")
    return Path(value)


def load_semeval_splits(folder: str | os.PathLike | None = None, lowercase: bool = True):
    """``(train, test)`` examples from the folder holding ``TRAIN_FILE.TXT`` and ``TEST_FILE_FULL.TXT``.

    ``folder`` defaults to the environment variable ``ATTN_UTILS_SEMEVAL``. The task's data is not
    bundled with the course (it is distributed separately); without it this raises FileNotFoundError.
    """
    folder = folder if folder is not None else os.environ.get(SEMEVAL_ENV_VAR)
    if not folder:
        raise FileNotFoundError(f"no SemEval-2010 Task 8 folder given: pass folder= or set {SEMEVAL_ENV_VAR}")
    folder = _path(folder, "folder")
    return tuple(load_semeval(folder / SEMEVAL_FILES[split], lowercase) for split in ("train", "test"))
