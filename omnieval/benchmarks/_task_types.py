"""Task type → default postprocessor + metrics, so every benchmark of a type is scored the same way.

A built-in benchmark takes its scoring from here (``**task_defaults("asr")``) instead of repeating it, and a test
checks that each built-in of a registered type still matches. A benchmark may still deviate on purpose (pass its
own ``postprocessor``/``metrics``), and a suite may replace metrics per benchmark (``benchmarks[].metrics``).

==========  ===============  ==========================  ==============================================================
task type   postprocessor    metrics (first = headline)  why
==========  ===============  ==========================  ==============================================================
mc          mc_letter        exact_match                 extract the chosen letter from free text, compare to the key
math        number           exact_match                 extract the final number in canonical form (``15.0`` = ``15``)
asr         asr_normalize    wer                         corpus WER over jiwer-normalised words (lowercase, no
                                                         punctuation, collapsed spaces; see ``postprocess._asr``)
st          strip            bleu, chrf                  corpus BLEU (sacrebleu 13a, case-sensitive) + chrF; no text
                                                         normalisation beyond sacrebleu's own, as in WMT/IWSLT
open_qa     first_line       exact_match, anls           short answers: chatty models explain on later lines; EM
                                                         (case/punct-insensitive) against any alias, ANLS gives
                                                         partial credit for near misses ("Guy Henry's" vs "Guy Henry")
==========  ===============  ==========================  ==============================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omnieval.benchmarks._spec import MetricSpec
from omnieval.core import Registry


@dataclass(frozen=True)
class TaskType:
    """Default scoring of one task type."""

    name: str
    postprocessor: str
    metrics: tuple[MetricSpec, ...]
    description: str


TASK_TYPES: Registry[TaskType] = Registry("task type")
for _t in (
    TaskType("mc", "mc_letter", (MetricSpec(name="exact_match"),), "multiple choice, answer is an option letter"),
    TaskType("math", "number", (MetricSpec(name="exact_match"),), "math word problem, answer is a number"),
    TaskType("asr", "asr_normalize", (MetricSpec(name="wer"),), "speech recognition, answer is the transcript"),
    TaskType(
        "st",
        "strip",
        (MetricSpec(name="bleu"), MetricSpec(name="chrf")),
        "speech translation, answer is the translation",
    ),
    TaskType(
        "open_qa",
        "first_line",
        (MetricSpec(name="exact_match"), MetricSpec(name="anls")),
        "open-domain QA, answer is a short phrase (any alias counts)",
    ),  # fmt: skip
):
    TASK_TYPES.register(_t.name, _t)
del _t


def task_defaults(task_type: str) -> dict[str, Any]:
    """``task_type``, ``postprocessor`` and ``metrics`` keyword arguments for a ``BenchmarkSpec`` of this type."""
    t = TASK_TYPES.get(task_type)
    return {"task_type": t.name, "postprocessor": t.postprocessor, "metrics": t.metrics}
