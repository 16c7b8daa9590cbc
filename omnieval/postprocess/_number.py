"""Final numeric answer extraction (GSM8K-style math word problems).

Where the answer is looked for, in this order (the first place holding a number wins):

1. after the last ``####`` (the GSM8K reference format, which few-shot prompts teach models to copy);
2. inside the last ``\\boxed{...}`` (``\\frac{a}{b}`` is read as ``a/b`` first);
3. after the last "answer is" / "answer:" / "answer =" (first number on the rest of that line, trying earlier
   phrases if the last has none);
4. the last number anywhere in the text.

A number is an optional minus sign (``-`` or ``−``), an optional currency sign (``$ € £ ¥``, either side of the
minus), digits with optional ``,`` thousands groups, an optional decimal part and an optional ``/denominator``.
Units and ``%`` after it are ignored. It is normalised to a canonical string so exact match works: commas and
currency dropped, trailing decimal zeros and leading zeros removed (``"15.0"`` → ``"15"``, ``"007"`` → ``"7"``),
``"-0"`` → ``"0"``. A fraction becomes a decimal only when that decimal is exact (``"1/2"`` → ``"0.5"``, ``"6/3"`` →
``"2"``); otherwise it stays as written (``"1/3"``). No number → None.
"""

from __future__ import annotations

import re
from decimal import Decimal, localcontext
from fractions import Fraction

from omnieval.core import Record

_NUM = re.compile(
    r"(?<![\w.])(?:(?P<neg>[-−])?(?P<cur>[$€£¥])[ \t]?(?P<neg2>[-−])?|(?P<neg3>[-−]))?"
    r"(?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.(?P<dec>\d+))?(?:[ \t]?/[ \t]?(?P<den>\d+))?"
)
_FRAC_TEX = re.compile(r"\\d?frac\{\s*(-?\d+)\s*\}\{\s*(\d+)\s*\}")
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_ANSWER = re.compile(r"(?i:\banswer\b)[^\n\d]{0,20}?(?:\bis\b|:|=)")


def _canonical(value: Decimal) -> str:
    with localcontext() as ctx:
        ctx.prec = 200  # normalize() rounds to the context precision; keep long integers exact
        text = format(value.normalize(), "f")
    return "0" if text in ("-0", "0") else text


def _to_string(m: re.Match[str]) -> str:
    negative = bool(m.group("neg") or m.group("neg2") or m.group("neg3"))
    digits = m.group("int").replace(",", "")
    if m.group("dec"):
        digits += "." + m.group("dec")
    value = Decimal(digits)
    if m.group("den") is not None:
        den = int(m.group("den"))
        exact = _exact_quotient(value, den)
        if exact is None:
            return ("-" if negative else "") + f"{_canonical(value)}/{den}"
        value = exact
    return _canonical(-value if negative else value)


def _exact_quotient(numerator: Decimal, den: int) -> Decimal | None:
    """numerator/den when its decimal expansion terminates (reduced denominator has only factors 2 and 5)."""
    if den == 0:
        return None
    q = Fraction(numerator) / den
    rest = q.denominator
    for p in (2, 5):
        while rest % p == 0:
            rest //= p
    if rest != 1:
        return None
    with localcontext() as ctx:
        ctx.prec = 200
        return Decimal(q.numerator) / Decimal(q.denominator)


def _first(text: str) -> str | None:
    m = _NUM.search(text)
    return _to_string(m) if m else None


def _last(text: str) -> str | None:
    matches = list(_NUM.finditer(text))
    return _to_string(matches[-1]) if matches else None


def number(text: str, record: Record | None = None) -> str | None:
    """The final numeric answer as a canonical string, or None; see the module docstring for the rules."""
    text = _FRAC_TEX.sub(r"\1/\2", text)
    if "####" in text:
        found = _first(text.rsplit("####", 1)[1])
        if found is not None:
            return found
    for boxed in reversed(_BOXED.findall(text)):
        found = _first(boxed)
        if found is not None:
            return found
    for m in reversed(list(_ANSWER.finditer(text))):
        line = text[m.end() :].split("\n", 1)[0]
        found = _first(line)
        if found is not None:
            return found
    return _last(text)
