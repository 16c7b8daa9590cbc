"""Parse a verifier reply (``Explanation: ...`` then ``Rating: 0|1``) into a rating and its rationale.

Small judges drift from the format: markdown (``**Rating:** 1``), lowercase, a trailing period, brackets
(``Rating: [1]``), a draft verdict followed by a corrected one. The *last* rating wins because the format asks for
the verdict at the end, and a model that reconsiders writes its final answer last. What is rejected:

* no rating at all, or a value other than 0/1 (``Rating: 0.5``, ``Rating: 10``, ``Rating: 4/5``) -> None, so the
  caller retries and finally records an error instead of a guessed score;
* a template echo (``Rating: 0 or 1``, ``Rating: 0|1``, ``Rating: 1 if correct``), which a weak model copies from the prompt and which would
  otherwise read as a verdict.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_WRAP = r"[\s*_`\"'\[\(<{]*"
_RATING = re.compile(
    r"\brating" + r"[\s*_`]*" + r"[:：=]" + _WRAP + r"([01])"
    r"(?![\d.,]*\d)"  # not 0.5 / 10 / 1,5
    r"(?!\s*(?:/|\||or\b|-|–)\s*\d)"  # not 0/1, 0|1, "0 or 1", 1-5, 4/5 style scales or template echoes
    r"(?!\s*(?:if|when)\b)",  # not "1 if correct, 0 if not" (the format line echoed)
    re.IGNORECASE,
)
_EXPLANATION = re.compile(r"^[\s*_#]*(?:explanation|rationale|reason(?:ing)?)[\s*_]*[:：][\s*_]*", re.IGNORECASE)


@dataclass(frozen=True)
class ParsedVerdict:
    rating: int | None
    """0 or 1; None when the reply holds no parsable rating."""
    rationale: str
    """Text before the last rating, with an ``Explanation:`` label stripped; the whole reply when unparsed."""


def parse_rating(text: str | None) -> ParsedVerdict:
    """The last valid ``Rating: 0|1`` in ``text`` and the rationale that precedes it."""
    if not text:
        return ParsedVerdict(None, "")
    matches = list(_RATING.finditer(text))
    if not matches:
        return ParsedVerdict(None, text.strip())
    last = matches[-1]
    before = text[: last.start()].rstrip(" \t*_#`>-\n")
    rationale = _EXPLANATION.sub("", before.strip(), count=1).strip()
    return ParsedVerdict(int(last.group(1)), rationale)


def verdict_probability(tokens: Sequence[Any] | None) -> float | None:
    """P(rating = 1) at the verdict token: ``p1 / (p0 + p1)`` over the alternatives the engine reported there.

    ``tokens`` are the reply's ``TokenLogprob`` s (anything with ``.token`` and ``.top``); the verdict is the last
    token that is a bare ``0``/``1`` (a leading space is the same digit). Alternatives are taken before the grammar
    constrains sampling, so both digits are normally among them; one missing counts as probability 0, both missing
    (the engine returned no alternatives) gives None. The verifier score can then be the mean probability, which
    separates a confident judge from a coin flip, beside the mean verdict.
    """
    if not tokens:
        return None
    for t in reversed(tokens):
        if t.token.strip() in ("0", "1"):
            p = {"0": 0.0, "1": 0.0}
            for tok, lp in t.top.items():
                d = tok.strip()
                if d in p:
                    p[d] += math.exp(lp)
            total = p["0"] + p["1"]
            return None if total <= 0.0 else p["1"] / total
    return None
