"""Checkers for chapter 7's documents section."""

from __future__ import annotations
