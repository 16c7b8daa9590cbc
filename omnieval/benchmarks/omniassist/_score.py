"""Judge scoring of OmniAssistBench turns on Table 4's 0–5 rubric, normalised to 0–100.

One judge prompt per turn. A ``[KEEP QUIET]`` ground truth answered with exactly ``[KEEP QUIET]`` (whitespace
stripped) is rubric level 5 by definition ("Exact Match ... outputs the exact required token"), so it is scored by
rule without a judge call (``meta["judge"]["rule"]``); every other answer, including an exact silence token where
an answer was due, goes to the judge. Per-turn metrics: ``rubric`` (0–5) and ``score`` = rubric × 20 (0–100, the
paper's normalisation). Turns whose inference failed or that have no prediction are left untouched; output that
stays unparsable after ``max_retries`` retries gives ``RecordError(kind="judge")`` and no metrics.
"""

from __future__ import annotations

from omnieval.benchmarks.omniassist._parse import JudgeFn, judge_with_retries, parse_rubric_score
from omnieval.benchmarks.omniassist._prompt import build_judge_prompt
from omnieval.benchmarks.omniassist._schema import KEEP_QUIET, SUB_TASK_NAMES
from omnieval.core import Record, RecordError


def answer_text(record: Record) -> str | None:
    """The model's answer: the postprocessed prediction when there is one, else the raw prediction."""
    post = record.prediction_postprocessed
    return post if post is not None else record.prediction


def normalise(rubric: float) -> float:
    """Rubric level 0–5 -> 0–100 (the paper: "All original 0-5 scores have been normalized to 0-100 point")."""
    return rubric * 20.0


def judge_prompt(record: Record) -> str:
    m = record.meta
    return build_judge_prompt(
        task=f"{m['major_task']} / {SUB_TASK_NAMES.get(m['sub_task'], m['sub_task'])} ({m['sub_task']})",
        instruction=m.get("instruction"),
        query=m.get("query"),
        key_points=m.get("key_points") or [],
        ground_truth=str(record.label),
        response=answer_text(record) or "",
    )


def _scored(r: Record, rubric: int, info: dict) -> Record:
    metrics = {"rubric": float(rubric), "score": normalise(rubric)}
    return r.model_copy(update={"metrics": metrics, "meta": {**r.meta, "judge": info}})


RUBRIC_GRAMMAR = 'root ::= "{\\"score\\": " [0-5] "}"\n'
"""GBNF for a constrained judge's verdict: ``{"score": N}``, N a rubric level 0-5."""


def score_records(
    records: list[Record], judge: JudgeFn, *, max_retries: int = 2, constrained: bool = False
) -> list[Record]:
    """Copies of ``records`` with rubric metrics (or a judge error) filled in, same order; ``constrained``: each
    reply is held to ``RUBRIC_GRAMMAR``."""
    out = list(records)
    to_judge: list[int] = []
    for i, r in enumerate(records):
        answer = answer_text(r)
        if r.error is not None or answer is None:
            continue
        if str(r.label).strip() == KEEP_QUIET and answer.strip() == KEEP_QUIET:
            out[i] = _scored(r, 5, {"raw": None, "attempts": 0, "rule": "exact [KEEP QUIET]"})
        else:
            to_judge.append(i)
    outcomes = judge_with_retries(
        [judge_prompt(records[i]) for i in to_judge],
        judge,
        lambda _, raw: parse_rubric_score(raw),
        max_retries=max_retries,
        grammars=[RUBRIC_GRAMMAR] * len(to_judge) if constrained else None,
    )
    for i, o in zip(to_judge, outcomes, strict=True):
        r = records[i]
        info = {"raw": o.raw, "attempts": o.attempts}
        if o.value is None:
            err = RecordError(kind="judge", message=o.error or "judge failed", attempts=o.attempts)
            out[i] = r.model_copy(update={"metrics": {}, "error": err, "meta": {**r.meta, "judge": info}})
        else:
            out[i] = _scored(r, o.value, info)
    return out
