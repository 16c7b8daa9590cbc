"""Trivial postprocessors; they transform rather than extract, so they never return None."""

from __future__ import annotations

from omnieval.core import Record


def identity(text: str, record: Record | None = None) -> str:
    """Return the raw prediction unchanged (the default when a benchmark names none)."""
    return text


def strip(text: str, record: Record | None = None) -> str:
    """Drop leading and trailing whitespace."""
    return text.strip()


def first_line(text: str, record: Record | None = None) -> str:
    """The first non-blank line, stripped; "" for blank text.

    Short-answer benchmarks ask for the answer alone, but chatty models append an explanation on later lines.
    """
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""
