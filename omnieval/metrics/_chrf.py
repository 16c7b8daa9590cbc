"""chrF via sacrebleu: corpus chrF for the aggregate, sentence chrF per sample."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, ClassVar

from sacrebleu.metrics import CHRF as _SacreCHRF

from omnieval.core import Record
from omnieval.metrics._base import Metric
from omnieval.metrics._references import as_text, reference_list, reference_streams


@lru_cache(maxsize=16)
def _scorer(char_order: int, word_order: int, beta: int, lowercase: bool) -> _SacreCHRF:
    return _SacreCHRF(char_order=char_order, word_order=word_order, beta=beta, lowercase=lowercase)


class CHRF(Metric):
    """sacrebleu chrF (``word_order=2`` gives chrF++); character n-grams make it robust to morphology.

    ``aggregate`` is sacrebleu's corpus chrF (statistics summed over all samples, 0–100); ``score`` is the sentence
    chrF / 100. sacrebleu's own preprocessing only (whitespace is ignored; ``lowercase`` optional). Multi-reference
    handling and None predictions are as in BLEU.
    """

    name: ClassVar[str] = "chrf"
    corpus_level: ClassVar[bool] = True
    scale: ClassVar[float] = 1.0

    def __init__(self, *, char_order: int = 6, word_order: int = 0, beta: int = 2, lowercase: bool = False) -> None:
        super().__init__(char_order=char_order, word_order=word_order, beta=beta, lowercase=lowercase)

    def _scorer(self) -> _SacreCHRF:
        s = self.settings
        return _scorer(s["char_order"], s["word_order"], s["beta"], s["lowercase"])

    def score(self, prediction: str | None, reference: Any, record: Record | None = None) -> float:
        return self._scorer().sentence_score(as_text(prediction), reference_list(reference) or [""]).score / 100.0

    def aggregate(self, records: list[Record], predictions: list[str | None], references: list[Any]) -> float:
        if not predictions:
            return float("nan")
        hyps = [as_text(p) for p in predictions]
        streams: Any = reference_streams(references)  # None pads: sacrebleu drops them, its stubs say str
        return float(self._scorer().corpus_score(hyps, streams).score)
