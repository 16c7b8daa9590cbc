"""Exact match with configurable normalisation."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any, ClassVar

from omnieval.core import Record
from omnieval.metrics._base import Metric
from omnieval.metrics._references import as_text, reference_list

# A '.' or ',' between two digits and a '-' starting a number survive punctuation removal so "3.5" != "35" and
# "-5" != "5"; thousands commas are then dropped so "1,000" == "1000".
_NUMERIC_PUNCT = re.compile(r"(?<=\d)[.,](?=\d)|(?<![\w])-(?=\d)")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


def _remove_punctuation(text: str) -> str:
    kept = {m.start() for m in _NUMERIC_PUNCT.finditer(text)}
    out = "".join(ch for i, ch in enumerate(text) if i in kept or not unicodedata.category(ch).startswith("P"))
    return _THOUSANDS.sub("", out)


class ExactMatch(Metric):
    """1.0 when the normalised prediction equals any normalised reference, else 0.0.

    Normalisation, applied identically to prediction and references, in this order:

    1. numbers become text (``15.0`` → ``"15"``, ``7`` → ``"7"``), then
    2. every pattern in ``regexes_to_ignore`` is removed (``re.sub`` with "", in list order);
    3. ``ignore_case``: lowercase (``str.lower``);
    4. ``ignore_punctuation``: drop every Unicode ``P*`` character, except a ``.``/``,`` between digits and a ``-``
       starting a number; then thousands commas (``1,000``) are dropped;
    5. ``strip``: trim leading/trailing whitespace and collapse inner whitespace runs to one space.

    The reference may be a string, a number, or a list of acceptable answers (any match scores 1). A None
    prediction (extraction found nothing) and a None/empty-list reference score 0.
    """

    name: ClassVar[str] = "exact_match"

    def __init__(
        self,
        *,
        ignore_case: bool = True,
        ignore_punctuation: bool = True,
        strip: bool = True,
        regexes_to_ignore: Sequence[str] = (),
    ) -> None:
        super().__init__(
            ignore_case=ignore_case,
            ignore_punctuation=ignore_punctuation,
            strip=strip,
            regexes_to_ignore=list(regexes_to_ignore),
        )
        self._ignore = [re.compile(p) for p in regexes_to_ignore]

    def normalize(self, value: Any) -> str:
        """The comparison form of a prediction or one reference (steps in the class docstring)."""
        text = as_text(value)
        for pattern in self._ignore:
            text = pattern.sub("", text)
        if self.settings["ignore_case"]:
            text = text.lower()
        if self.settings["ignore_punctuation"]:
            text = _remove_punctuation(text)
        if self.settings["strip"]:
            text = " ".join(text.split())
        return text

    def score(self, prediction: str | None, reference: Any, record: Record | None = None) -> float:
        if prediction is None:
            return 0.0
        pred = self.normalize(prediction)
        return float(any(pred == self.normalize(ref) for ref in reference_list(reference)))
