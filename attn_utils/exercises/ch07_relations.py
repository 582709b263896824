"""Checkers for chapter 7's relations section."""

from __future__ import annotations
