"""Robust parsing of the OmniAssistBench judge output into one Table 4 rubric level (an integer 0–5).

Accepted, in order of trust: the last JSON object carrying ``score`` (also ``final_score``/``rating``, any case),
then the last ``score: N`` / ``Score = N`` / ``**Score:** N`` phrase, then the last ``N/5``, then an output that is
only the number. The level must be an integer 0–5 (``4.0`` is fine; ``4.5``, ``6`` or ``-1`` are rejected, since
the rubric has no such level). Anything else raises ``JudgeParseError`` and is retried by
``judge_with_retries`` (shared with EgoMem), never counted as a score.
"""

from __future__ import annotations

import re
from typing import Any

from omnieval.benchmarks.egomem._parse import JudgeFn, JudgeOutcome, JudgeParseError, json_objects, judge_with_retries

__all__ = ["JudgeFn", "JudgeOutcome", "JudgeParseError", "judge_with_retries", "parse_rubric_score"]

_KEYS = ("score", "final_score", "rating", "final score")
_NUM = r"(-?\d+(?:\.\d+)?)"
_PHRASE = re.compile(r"(?:final\s+)?(?:score|rating)\s*\**\s*[:=：]\s*\**\s*" + _NUM + r"(?![\d.]*\d)", re.I)
_OUT_OF = re.compile(_NUM + r"\s*/\s*5(?!\d)")


def _level(v: Any) -> int:
    if isinstance(v, bool):
        raise JudgeParseError(f"boolean {v!r} is not a rubric level")
    if isinstance(v, str):
        v = v.strip()
        if not re.fullmatch(_NUM, v):
            raise JudgeParseError(f"{v!r} is not a number")
        v = float(v)
    if not isinstance(v, int | float) or float(v) != int(v) or not 0 <= int(v) <= 5:
        raise JudgeParseError(f"{v!r} is not an integer rubric level 0-5")
    return int(v)


def parse_rubric_score(text: Any) -> int:
    """The rubric level (0–5) in the judge's output; raises JudgeParseError."""
    if not isinstance(text, str) or not text.strip():
        raise JudgeParseError("empty judge output")
    for obj in json_objects(text):
        if isinstance(obj, dict):
            lowered = {str(k).strip().lower(): v for k, v in obj.items()}
            for k in _KEYS:
                if k in lowered:
                    return _level(lowered[k])
    for pattern in (_PHRASE, _OUT_OF):
        found = pattern.findall(text)
        if found:
            return _level(found[-1])
    stripped = text.strip().strip("*").strip()
    if re.fullmatch(_NUM, stripped):
        return _level(stripped)
    raise JudgeParseError("no rubric score in the judge output")
