"""Robust parsing of judge output, and the retry loop that keeps unparsable output from ever becoming a score.

The card asks the judge to think first and end with a JSON block mapping each turn number to
``[fact_score, answer_score]``. Judges drift from that: prose around the block, several blocks (drafts), full-width
punctuation, trailing commas, single quotes, keys like ``"第1轮"``, or values as ``{"fact_score": 1, ...}``. We try
the fenced blocks, then bare ``{...}`` objects, last first (the card asks for the block *at the end*), and take the
first one that validates completely. Valid means: every expected turn present, ``fact_score`` in {-1, 0, 1}
(-1 = not applicable) and ``answer_score`` in [0, 10] ("满分10分"). Anything else raises ``JudgeParseError``.

``judge_with_retries`` is generic (OmniAssistBench uses it too): unparsable output, a judge exception or a wrong
number of outputs count as a failed attempt; failed prompts are re-sent up to ``max_retries`` more times, and what
still fails comes back with an error message and no value.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")

JudgeFn = Callable[..., list[str]]
"""A batch of judge prompts -> the batch of raw judge outputs, same order. Called as ``judge(prompts)``, or as
``judge(prompts, grammars=[...])`` (one GBNF grammar per prompt) when the benchmark's judge is constrained."""


class JudgeParseError(ValueError):
    """Judge output that cannot be turned into a valid score."""


_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.S)
_FULLWIDTH = str.maketrans(
    {"，": ",", "：": ":", "“": '"', "”": '"', "［": "[", "］": "]", "｛": "{", "｝": "}", "－": "-"}
)


def _balanced_objects(text: str) -> list[str]:
    """Every outermost ``{...}`` substring, respecting double-quoted strings."""
    out, depth, start, in_str, esc = [], 0, -1, False, False
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                out.append(text[start : i + 1])
    return out


def _loads_lenient(s: str) -> Any:
    """json.loads, then the same after common repairs, then a Python-literal read."""
    s = s.strip()
    try:
        return json.loads(s)
    except ValueError:
        pass
    fixed = s.translate(_FULLWIDTH)
    fixed = re.sub(r"//[^\n]*", "", fixed)
    fixed = re.sub(r",\s*([}\]])", r"\1", fixed)
    try:
        return json.loads(fixed)
    except ValueError:
        pass
    try:
        return ast.literal_eval(fixed)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    try:
        return json.loads(fixed.replace("'", '"'))
    except ValueError as e:
        raise JudgeParseError(f"not JSON: {e}") from None


def json_objects(text: str) -> list[Any]:
    """Decodable JSON/dict candidates in ``text``, last first: fenced blocks, then bare objects."""
    chunks = [m.group(1) for m in _FENCE.finditer(text)]
    chunks = chunks[::-1] + _balanced_objects(text)[::-1]
    out = []
    for c in chunks:
        try:
            out.append(_loads_lenient(c))
        except JudgeParseError:
            continue
    return out


def _number(v: Any) -> float:
    if isinstance(v, bool):
        raise JudgeParseError(f"boolean {v!r} is not a score")
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, str) and re.fullmatch(r"\s*-?\d+(\.\d+)?\s*", v):
        return float(v)
    raise JudgeParseError(f"{v!r} is not a number")


def _turn_key(k: Any) -> str | None:
    m = re.search(r"\d+", str(k))
    return str(int(m.group())) if m else None


def _pair(v: Any) -> tuple[int, float]:
    if isinstance(v, dict):
        v = [v.get("fact_score"), v.get("answer_score")]
    if not isinstance(v, list | tuple) or len(v) != 2:
        raise JudgeParseError(f"value {v!r} is not [fact_score, answer_score]")
    fact, answer = _number(v[0]), _number(v[1])
    if fact not in (-1.0, 0.0, 1.0):
        raise JudgeParseError(f"fact_score {v[0]!r} not in {{-1, 0, 1}}")
    if not 0.0 <= answer <= 10.0:
        raise JudgeParseError(f"answer_score {v[1]!r} not in [0, 10]")
    return int(fact), answer


def _scores_from(obj: Any, turn_keys: Sequence[str]) -> dict[str, tuple[int, float]]:
    if not isinstance(obj, dict):
        raise JudgeParseError("JSON is not an object")
    found: dict[str, Any] = {}
    for k, v in obj.items():
        key = _turn_key(k)
        if key is not None and key not in found:
            found[key] = v
    missing = [k for k in turn_keys if k not in found]
    if missing:
        raise JudgeParseError(f"turn(s) {missing} missing from the judge's JSON")
    return {k: _pair(found[k]) for k in turn_keys}


def parse_session_scores(text: Any, turn_keys: Sequence[str]) -> dict[str, tuple[int, float]]:
    """``{turn number: (fact_score, answer_score)}`` for exactly ``turn_keys``; raises JudgeParseError."""
    if not isinstance(text, str) or not text.strip():
        raise JudgeParseError("empty judge output")
    candidates = json_objects(text)
    if not candidates:
        raise JudgeParseError("no JSON object in the judge output")
    first_error: JudgeParseError | None = None
    for obj in candidates:
        try:
            return _scores_from(obj, [str(int(k)) for k in turn_keys])
        except JudgeParseError as e:
            first_error = first_error or e
    assert first_error is not None
    raise first_error


@dataclass
class JudgeOutcome(Generic[T]):
    value: T | None
    """Parsed value; None when every attempt failed."""
    raw: str | None
    """Raw output of the last attempt (None if the judge never returned one)."""
    attempts: int
    """Judge calls made for this prompt."""
    error: str | None = None
    """Why the last attempt failed, when ``value`` is None."""


def judge_with_retries(
    prompts: Sequence[str], judge: JudgeFn, parse: Callable[[int, str], T], *, max_retries: int = 2,
    grammars: Sequence[str] | None = None,
) -> list[JudgeOutcome[T]]:
    """Run ``judge`` in batches, re-sending only the prompts whose output ``parse(i, raw)`` rejected; with
    ``grammars`` (one per prompt) each reply is constrained to its grammar."""
    outcomes: list[JudgeOutcome[T]] = [JudgeOutcome(None, None, 0, "not judged") for _ in prompts]
    pending = list(range(len(prompts)))
    for _ in range(max_retries + 1):
        if not pending:
            break
        for i in pending:
            outcomes[i].attempts += 1
        try:
            batch = [prompts[i] for i in pending]
            raws = list(judge(batch) if grammars is None else judge(batch, grammars=[grammars[i] for i in pending]))
            if len(raws) != len(pending):
                raise RuntimeError(f"judge returned {len(raws)} outputs for {len(pending)} prompts")
        except Exception as e:  # a judge failure is one failed attempt, never a crash of the scoring pass
            for i in pending:
                outcomes[i].error = f"judge call failed: {type(e).__name__}: {e}"
            continue
        still = []
        for i, raw in zip(pending, raws, strict=True):
            outcomes[i].raw = raw if isinstance(raw, str) else repr(raw)
            try:
                outcomes[i].value = parse(i, raw)
                outcomes[i].error = None
            except JudgeParseError as e:
                outcomes[i].error = f"unparsable judge output: {e}"
                still.append(i)
        pending = still
    return outcomes
