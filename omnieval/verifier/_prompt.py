"""The verifier prompt: a (question, reference, prediction) text triple -> ``Explanation: ...`` + ``Rating: 0|1``.

The reply contract (rationale first, then a final ``Rating:`` line) is the one OmniEval Verifier is trained on
(paper App. C), so the default online judge and any instruct model read the same prompt. The instruction text never
puts a digit right after ``Rating:``, so a weak judge that echoes the prompt cannot produce a parsable fake
verdict (the parser also rejects echoes such as ``Rating: 0 or 1`` and ``Rating: 1 if correct``).

Fields are clipped by characters (no tokenizer is needed on the driver) so a runaway prediction cannot overflow
the judge's context slot: the prediction keeps more tail than head because the final answer is usually at the end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omnieval.core import Record

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

VERIFIER_PROMPT = """\
You are grading an answer against a reference. Decide whether the model's FINAL answer to the question is correct.

[Question]
{question}

[Reference Answer]
{reference}

[Model Answer]
{prediction}

[Rules]
- Correct (1) when the final answer means the same as the reference: the same number in another notation or with \
a unit (9 = 9.0 = "9 apples"), the same option given by its letter or by its text, or the same answer wrapped in a \
sentence, other casing or punctuation.
- Incorrect (0) when the final answer differs from the reference, is missing, is only partly right, contradicts \
itself, picks several options, refuses, or only restates the question.
- Judge the answer, not the reasoning style; ignore whether the format matches what the question asked for.

Reply with one short explanation line, then the verdict on the last line, exactly in this shape:
Explanation: <compare the reference with the model's final answer>
Rating: <digit>
where <digit> is 1 if the model's final answer is correct and 0 if it is not."""


@dataclass(frozen=True)
class Triple:
    question: str
    """Task text the model saw (last user message)."""
    reference: str
    """Reference answer(s) as text."""
    prediction: str
    """Raw model output."""


def clip(text: str, limit: int, head_ratio: float = 0.3) -> str:
    """``text`` cut to about ``limit`` characters, keeping head and tail around a visible marker."""
    if len(text) <= limit:
        return text
    head = int(limit * head_ratio)
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} characters omitted ...]\n{text[-tail:]}"


def build_prompt(
    t: Triple, *, max_question_chars: int = 1500, max_reference_chars: int = 600, max_prediction_chars: int = 3000
) -> str:
    return VERIFIER_PROMPT.format(
        question=clip(t.question.strip(), max_question_chars, 0.5),
        reference=clip(t.reference.strip(), max_reference_chars, 0.5),
        prediction=clip(t.prediction.strip(), max_prediction_chars, 0.3) or "(empty)",
    )  # fmt: skip


def reference_text(label: Any, options: list[str] | None = None) -> str:
    """The label as text; a list joins with `` / `` (alternatives), an MC letter gains its option text ("B. Paris").

    Giving the option text lets the judge accept a prediction that names the option instead of its letter.
    """
    if isinstance(label, (list, tuple)):
        return " / ".join(reference_text(x, options) for x in label)
    if label is None:
        return ""
    if options:
        idx: int | None = None
        if isinstance(label, bool):
            idx = None
        elif isinstance(label, int) and 0 <= label < len(options):
            idx = label
        elif isinstance(label, str) and len(label.strip()) == 1 and label.strip().upper() in LETTERS[: len(options)]:
            idx = LETTERS.index(label.strip().upper())
        if idx is not None:
            return f"{LETTERS[idx]}. {options[idx]}"
    return str(label)


def question_text(record: Record) -> str:
    """The last user message's text: the task exactly as the model saw it (options and instructions included)."""
    for m in reversed(record.messages):
        if m.role == "user":
            return m.text_value()
    return ""


def record_triple(record: Record) -> Triple | None:
    """The record's triple, or None when there is nothing to judge (no prediction, or inference failed).

    The *raw* prediction is judged, not ``prediction_postprocessed``: the verifier's point is to be robust to format
    mismatch ("The answer is 9 apples" vs "9"), and a postprocessor written for one format can destroy a correct
    answer in another (extract the wrong number, no letter found). Judging the raw text keeps the verifier score
    independent of the benchmark's parser, which is what makes it comparable across engines and prompts.
    """
    if record.error is not None or record.prediction is None:
        return None
    return Triple(question_text(record), reference_text(record.label, record.options), record.prediction)
