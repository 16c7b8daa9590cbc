"""Word error rate via jiwer, corpus-level."""

from __future__ import annotations

from typing import Any, ClassVar

import jiwer

from omnieval.core import Record
from omnieval.metrics._base import Metric
from omnieval.metrics._references import as_text, reference_list
from omnieval.postprocess._asr import ASR_STEPS

_NORMALIZED = jiwer.Compose([*ASR_STEPS, jiwer.ReduceToListOfListOfWords()])
_RAW = jiwer.Compose([jiwer.RemoveMultipleSpaces(), jiwer.Strip(), jiwer.ReduceToListOfListOfWords()])


def _reference(reference: Any) -> str:
    refs = reference_list(reference)
    return refs[0] if refs else ""


class WER(Metric):
    """(substitutions + deletions + insertions) / reference words; lower is better and it can exceed 1.

    ``normalize=True`` runs the jiwer chain lowercase → remove punctuation → whitespace to spaces → remove multiple
    spaces → strip → split into words (the shared :data:`omnieval.postprocess._asr.ASR_STEPS`, also the ``asr_normalize``
    postprocessor); ``normalize=False`` only collapses spaces, strips and splits on spaces (jiwer's default).

    ``aggregate`` is the corpus WER — total errors over total reference words, × 100 — not the mean of per-sample
    WERs, which would let a two-word utterance weigh as much as a fifty-word one. A None or empty prediction counts
    as all deletions. A list reference uses its first entry (WER has no multi-reference form).
    """

    name: ClassVar[str] = "wer"
    higher_is_better: ClassVar[bool] = False
    corpus_level: ClassVar[bool] = True

    def __init__(self, *, normalize: bool = True) -> None:
        super().__init__(normalize=normalize)
        self._transform = _NORMALIZED if normalize else _RAW

    def _process(self, references: list[str], hypotheses: list[str]) -> float:
        out = jiwer.process_words(
            references, hypotheses, reference_transform=self._transform, hypothesis_transform=self._transform
        )
        return float(out.wer)

    def score(self, prediction: str | None, reference: Any, record: Record | None = None) -> float:
        return self._process([_reference(reference)], [as_text(prediction)])

    def aggregate(self, records: list[Record], predictions: list[str | None], references: list[Any]) -> float:
        if not predictions:
            return float("nan")
        return 100.0 * self._process([_reference(r) for r in references], [as_text(p) for p in predictions])
