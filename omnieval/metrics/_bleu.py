"""BLEU via sacrebleu: corpus BLEU for the aggregate, sentence BLEU per sample."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, ClassVar

from sacrebleu.metrics import BLEU as _SacreBLEU

from omnieval.core import Record
from omnieval.metrics._base import Metric
from omnieval.metrics._references import as_text, reference_list, reference_streams


@lru_cache(maxsize=16)
def _scorer(tokenize: str, lowercase: bool, effective_order: bool) -> _SacreBLEU:
    # Built once per setting and shared: constructing the tokenizer per sample is wasted work, and keeping the
    # scorer out of the Metric instance keeps the instance trivially picklable for Ray.
    return _SacreBLEU(tokenize=tokenize, lowercase=lowercase, effective_order=effective_order)


class BLEU(Metric):
    """sacrebleu BLEU with its standard signature settings (``tokenize``, ``lowercase``); no other normalisation.

    ``aggregate`` is ``corpus_bleu`` over every sample (0–100), not a mean of sentence scores. ``score`` is
    ``sentence_bleu`` (effective order on, as sacrebleu does for sentences) divided by 100 so per-sample values sit
    on 0–1 like every other metric's. References may be a string or a list of strings per sample; lists are
    transposed into sacrebleu's reference streams with None padding (see ``reference_streams``). A None
    prediction is scored as the empty string.
    """

    name: ClassVar[str] = "bleu"
    corpus_level: ClassVar[bool] = True
    scale: ClassVar[float] = 1.0

    def __init__(self, *, tokenize: str = "13a", lowercase: bool = False) -> None:
        super().__init__(tokenize=tokenize, lowercase=lowercase)
        try:
            _scorer(tokenize, lowercase, False)  # fail at construction, not mid-benchmark
        except KeyError:
            raise ValueError(f"unknown sacrebleu tokenizer {tokenize!r}") from None

    def score(self, prediction: str | None, reference: Any, record: Record | None = None) -> float:
        scorer = _scorer(self.settings["tokenize"], self.settings["lowercase"], True)
        return scorer.sentence_score(as_text(prediction), reference_list(reference) or [""]).score / 100.0

    def aggregate(self, records: list[Record], predictions: list[str | None], references: list[Any]) -> float:
        if not predictions:
            return float("nan")
        scorer = _scorer(self.settings["tokenize"], self.settings["lowercase"], False)
        streams: Any = reference_streams(references)  # None pads: sacrebleu drops them, its stubs say str
        return float(scorer.corpus_score([as_text(p) for p in predictions], streams).score)
