"""instructors.md's table of exercises agrees with the notebooks and the checkers: every exercise of
every chapter is listed once, in its chapter's row, as a lab exactly when it has a checker."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

from attn_utils.exercises import labels
from tools.notebook_setup import notebooks

ROOT = Path(__file__).resolve().parents[1]
EXERCISE = re.compile(r"^:{3,}\{exercise\}[^\n]*\n:label:\s*(\S+)", re.MULTILINE)
ROW = re.compile(r"^\| (\d+(?:\.\d+)?) \| (.*?) \| (.*?) \|$", re.MULTILINE)


def chapter_number(path: Path) -> str:
    """``01_attention_cues`` -> ``'1'``; a section ``07a_...`` -> ``'7.1'``."""
    number, letter = re.match(r"(\d+)([a-z]?)_", path.name).groups()
    return str(int(number)) + (f".{ord(letter) - ord('a') + 1}" if letter else "")


def exercises_by_chapter() -> dict[str, set[str]]:
    found = {}
    for path in notebooks():
        text = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")
        found[chapter_number(path)] = set(EXERCISE.findall(text))
    return found


def table() -> dict[str, tuple[list[str], list[str]]]:
    rows = ROW.findall((ROOT / "instructors.md").read_text(encoding="utf-8"))
    return {chapter: (re.findall(r"`([^`]+)`", lab), re.findall(r"`([^`]+)`", homework))
            for chapter, lab, homework in rows}


def test_every_exercise_is_in_its_chapters_row_once_as_lab_exactly_when_it_has_a_checker():
    checked, rows = set(labels()), table()
    for chapter, exercises in exercises_by_chapter().items():
        assert chapter in rows, f"instructors.md has no row for chapter {chapter}"
        lab, homework = rows[chapter]
        listed = lab + homework
        assert len(listed) == len(set(listed)), f"chapter {chapter}: an exercise is listed twice: {listed}"
        assert set(lab) == exercises & checked, (
            f"chapter {chapter}: the lab column should list the exercises with a checker, "
            f"{sorted(exercises & checked)}, got {lab}")
        assert set(homework) == exercises - checked, (
            f"chapter {chapter}: the homework column should list the exercises without a checker, "
            f"{sorted(exercises - checked)}, got {homework}")
    assert set(rows) == set(exercises_by_chapter()), "instructors.md lists a chapter that does not exist"
