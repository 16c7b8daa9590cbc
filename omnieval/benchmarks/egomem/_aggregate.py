"""EgoMem aggregate numbers.

The card defines the per-turn scores, not their aggregation; we report fact consistency as a percentage, as the
EgoMem paper does: ``fact_score`` is 100 × the mean ``fact_score`` over the turns where it applies
(-1 = "the response does not touch the user's name, history or profile" is excluded, not counted as 0).
``answer_score`` is the mean over scored turns on the card's own 0–10 scale ("满分10分"); ``answer_score_100`` is the
same ×10 for the framework's 0–100 convention. ``fact_applicable`` is the share (0–100) of scored turns where
``fact_score`` applies. Judge errors are never scores: they are only counted, in ``n_judge_errors``.
"""

from __future__ import annotations

import math

from omnieval.core import Record


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else math.nan


def aggregate(records: list[Record]) -> dict[str, float]:
    """Benchmark-level EgoMem numbers over ``records`` (one split)."""
    scored = [r for r in records if "answer_score" in r.metrics]
    facts = [r.metrics["fact_score"] for r in scored if r.metrics.get("fact_score", -1.0) != -1.0]
    answers = [r.metrics["answer_score"] for r in scored]
    return {
        "fact_score": 100.0 * _mean(facts),
        "answer_score": _mean(answers),
        "answer_score_100": 10.0 * _mean(answers),
        "fact_applicable": 100.0 * len(facts) / len(scored) if scored else math.nan,
        "n_turns": float(len(records)),
        "n_scored": float(len(scored)),
        "n_fact_applicable": float(len(facts)),
        "n_judge_errors": float(sum(1 for r in records if r.error is not None and r.error.kind == "judge")),
    }
