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


VERDICT_PROMPT = """\
Question:
{question}

Reference answer:
{reference}

Model answer:
{prediction}

Is the model's final answer correct?"""
"""The compact prompt of a judge trained for it (the shipped SmolLM2 adapter, ``scripts/train_verifier.py``): no
rubric, and the reply is the verdict alone. A fine-tuned judge learns the rules from its data, and a short prompt
keeps both its training and its judging cheap on a CPU."""

RUBRIC_GRAMMAR = 'root ::= "Explanation: " [^\\n]{1,400} "\\n" "Rating: " [01]'
"""GBNF: one explanation line, then the verdict; the judge cannot reply in any other shape (issue 16 item 2)."""
VERDICT_GRAMMAR = 'root ::= "Rating: " [01]'
"""GBNF for the verdict-only reply."""

PROMPT_STYLES: dict[str, tuple[str, str]] = {"rubric": (VERIFIER_PROMPT, RUBRIC_GRAMMAR),
                                             "verdict": (VERDICT_PROMPT, VERDICT_GRAMMAR)}  # fmt: skip
"""style -> (prompt template, grammar that constrains the reply)."""


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


STYLE_LIMITS: dict[str, tuple[int, int, int]] = {"rubric": (1500, 600, 3000), "verdict": (800, 300, 600)}
"""style -> character limits of (question, reference, prediction). The compact prompt is clipped harder: its judge
is a 135M model trained on prompts of this size, and the tail of a prediction (its final answer) is what it reads."""


def build_prompt(
    t: Triple,
    *,
    max_question_chars: int | None = None,
    max_reference_chars: int | None = None,
    max_prediction_chars: int = 3000,
    style: str = "rubric",
) -> str:
    """The judge prompt for ``t`` in ``style`` (``rubric`` or ``verdict``, see ``PROMPT_STYLES``); limits default to
    the style's (``STYLE_LIMITS``), the prediction's is also capped by ``max_prediction_chars``."""
    if style not in PROMPT_STYLES:
        raise ValueError(f"unknown verifier prompt style {style!r}; expected one of {sorted(PROMPT_STYLES)}")
    q_lim, r_lim, p_lim = STYLE_LIMITS[style]
    max_question_chars = max_question_chars or q_lim
    max_reference_chars = max_reference_chars or r_lim
    max_prediction_chars = min(max_prediction_chars, p_lim)
    return PROMPT_STYLES[style][0].format(
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
