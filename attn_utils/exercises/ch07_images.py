"""Checkers for chapter 7's images section."""

from __future__ import annotations
