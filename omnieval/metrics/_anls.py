"""ANLS: Average Normalized Levenshtein Similarity (DocVQA / InfographicVQA / ST-VQA)."""

from __future__ import annotations

from typing import Any, ClassVar

from rapidfuzz.distance import Levenshtein

from omnieval.core import Record
from omnieval.metrics._base import Metric
from omnieval.metrics._references import as_text, reference_list


def _norm(text: str) -> str:
    # The official DocVQA scorer: lowercase, strip, and collapse inner whitespace.
    return " ".join(text.lower().split())


def nls(prediction: str, reference: str) -> float:
    """1 − Levenshtein(p, r) / max(|p|, |r|) on normalised strings; two empty strings are identical (1.0)."""
    p, r = _norm(prediction), _norm(reference)
    longest = max(len(p), len(r))
    return 1.0 if longest == 0 else 1.0 - Levenshtein.distance(p, r) / longest


class ANLS(Metric):
    """Per sample: max over references of NLS, zeroed when the normalised distance 1 − NLS is ≥ ``tau``.

    The threshold keeps OCR-style near misses ("Lond0n") from counting while not rewarding an unrelated answer with
    partial credit. Strings are lowercased, stripped and whitespace-collapsed first. Values lie in [0, 1]; a None
    prediction or a sample without references scores 0. The aggregate is the mean × 100.
    """

    name: ClassVar[str] = "anls"

    def __init__(self, *, tau: float = 0.5) -> None:
        if not 0.0 < tau <= 1.0:
            raise ValueError(f"tau must be in (0, 1], got {tau}")
        super().__init__(tau=tau)
        self.tau = tau

    def score(self, prediction: str | None, reference: Any, record: Record | None = None) -> float:
        if prediction is None:
            return 0.0
        pred = as_text(prediction)
        best = 0.0
        for ref in reference_list(reference):
            similarity = nls(pred, ref)
            if 1.0 - similarity < self.tau:
                best = max(best, similarity)
        return best
