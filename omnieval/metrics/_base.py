"""The ``Metric`` seam: per-sample scores plus an aggregate, every aggregate on a 0–100 scale."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from omnieval.core import Record


class Metric(ABC):
    """A metric shared by every framework that defines a benchmark of its task type.

    ``score`` gives a per-sample value stored in ``Record.metrics``; ``aggregate`` turns a benchmark's samples into
    one number on a 0–100 scale (``corpus_level`` metrics recompute it from all samples rather than averaging
    per-sample values). ``settings`` are recorded in the run manifest so a rerun uses the same ones.
    """

    name: ClassVar[str]
    higher_is_better: ClassVar[bool] = True
    corpus_level: ClassVar[bool] = False
    """True when ``aggregate`` recomputes from every sample's prediction and reference (BLEU, chrF, WER) instead of
    averaging per-sample values; the scorer then keeps those strings and gives a failed sample an empty prediction,
    so it counts as wrong rather than vanishing from the corpus."""
    scale: ClassVar[float] = 100.0
    """``aggregate`` is this times the metric's own convention (100: a 0–1 metric shown on 0–100; 1: sacrebleu's
    BLEU and chrF, already 0–100); exports to other tools divide by it."""

    def __init__(self, **settings: Any) -> None:
        self.settings = settings

    @abstractmethod
    def score(self, prediction: str | None, reference: Any, record: Record | None = None) -> float:
        """Per-sample value; ``prediction`` is None when postprocessing extracted nothing."""

    def aggregate(self, records: list[Record], predictions: list[str | None], references: list[Any]) -> float:
        """Benchmark-level value on 0–100; the default is the mean per-sample score × 100."""
        if not predictions:
            return float("nan")
        return (
            100.0
            * sum(self.score(p, r, rec) for p, r, rec in zip(predictions, references, records, strict=True))
            / len(predictions)
        )

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "settings": self.settings, "higher_is_better": self.higher_is_better}
