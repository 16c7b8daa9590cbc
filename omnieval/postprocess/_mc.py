"""Multiple-choice letter extraction from free-form model output.

Rules, tried in this order; the first that yields an allowed letter wins:

1. **Whole answer** — the response (markdown ``*`` removed, stripped) is just a letter: ``B``, ``(B)``, ``[b]``,
   ``B.``, ``B)``, ``B:``; a lowercase letter is accepted only here, where it cannot be a word.
2. **Explicit phrase** — the *last* "answer is X", "answer: X", "correct option is (X)", "answer to the question
   is X", "X is the correct answer", ``\\boxed{X}``. Last, because models revise themselves ("... so the answer is
   C"). Lowercase X is accepted only when followed by the end of text or ``.``/``)``/``]``/``,``/``:``.
3. **Leading letter** — the first line starts with a letter followed by ``.``, ``)``, ``]``, ``:`` or ``,``:
   "B. Paris", "(B) Paris".
4. **Option text** — ``record.options`` is given and exactly one option's text occurs in the response
   (case-insensitive, word-bounded; an option found only inside a longer found option does not count).
5. **Bare letter** — the first standalone capital letter; an "A" or "I" directly followed by a lowercase word
   ("A cat is ...", "I think ...") reads as the article or pronoun and is used only when no other bare letter
   exists.

Allowed letters are the first ``len(record.options)`` letters when options are given (at most 26), else A–D. A
letter outside that set is skipped and the search goes on. Nothing found → None, which metrics score as wrong.
"""

from __future__ import annotations

import re
import string

from omnieval.core import Record

_DEFAULT_LETTERS = "ABCD"

_WHOLE = re.compile(r"[(\[]?\s*([A-Za-z])\s*[)\]]?[.):]?")
_LEAD = re.compile(r"\s*[(\[]?([A-Z])(?:[)\].:,]|\s*(?:\n|$))")
_EXPLICIT = re.compile(
    r"(?:(?i:\b(?:answer|option|choice)\b(?:[ \t]+[a-z]+){0,3}?(?:[ \t]+(?:is|would[ \t]+be|should[ \t]+be|will[ \t]+be)"
    r"|[ \t]*[:=-]))|\\boxed\{)"
    r"\s*(?i:(?:option|choice|letter)[ \t]+)?[(\[]?([A-Za-z])[)\]]?(?![A-Za-z0-9])"
)
_LETTER_FIRST = re.compile(
    r"(?<![A-Za-z0-9])[(\[]?([A-Z])[)\]]?[ \t]+(?i:is[ \t]+(?:the[ \t]+)?(?:correct|right|best|answer))"
)
_LOWER_OK = re.compile(r"\s*$|[.)\]},:]")
_BARE = re.compile(r"(?<![A-Za-z0-9'’])[(\[]?([A-Z])[)\]]?(?![A-Za-z0-9'’])")
_WORD_AFTER = re.compile(r"[)\]]?[ \t]+[a-z]")


def _allowed(record: Record | None) -> str:
    if record is not None and record.options:
        return string.ascii_uppercase[: min(len(record.options), 26)]
    return _DEFAULT_LETTERS


def _explicit(text: str, allowed: str) -> str | None:
    hits: list[tuple[int, str]] = []
    for pattern in (_EXPLICIT, _LETTER_FIRST):
        for m in pattern.finditer(text):
            letter = m.group(1)
            if letter.islower():
                if pattern is _LETTER_FIRST or not _LOWER_OK.match(text, m.end()):
                    continue
                letter = letter.upper()
            if letter in allowed:
                hits.append((m.start(), letter))
    return max(hits)[1] if hits else None


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _option_text(text: str, options: list[str], allowed: str) -> str | None:
    haystack = _norm(text)
    spans: dict[int, list[tuple[int, int]]] = {}
    for i, option in enumerate(options[: len(allowed)]):
        needle = _norm(option).rstrip(".")
        if not needle:
            continue
        found = [m.span() for m in re.finditer(rf"(?<!\w){re.escape(needle)}(?!\w)", haystack)]
        if found:
            spans[i] = found
    # Drop an option whose every occurrence sits inside an occurrence of a different, longer option.
    kept = [
        i
        for i, own in spans.items()
        if not all(
            any(j != i and s <= a and b <= e and (e - s) > (b - a) for j, other in spans.items() for s, e in other)
            for a, b in own
        )
    ]
    return allowed[kept[0]] if len(kept) == 1 else None


def _bare(text: str, allowed: str) -> str | None:
    wordlike: str | None = None
    for m in _BARE.finditer(text):
        letter = m.group(1)
        if letter not in allowed:
            continue
        if letter in "AI" and _WORD_AFTER.match(text, m.end(1)):
            wordlike = wordlike or letter
            continue
        return letter
    return wordlike


def mc_letter(text: str, record: Record | None = None) -> str | None:
    """The chosen option letter (``"A"``–``"Z"``) or None; see the module docstring for the rule order."""
    allowed = _allowed(record)
    cleaned = text.replace("*", "").strip()
    if not cleaned:
        return None
    whole = _WHOLE.fullmatch(cleaned)
    if whole and whole.group(1).upper() in allowed:
        return whole.group(1).upper()
    explicit = _explicit(cleaned, allowed)
    if explicit:
        return explicit
    lead = _LEAD.match(cleaned)
    if lead and lead.group(1) in allowed:
        return lead.group(1)
    if record is not None and record.options:
        by_text = _option_text(cleaned, record.options, allowed)
        if by_text:
            return by_text
    return _bare(cleaned, allowed)
