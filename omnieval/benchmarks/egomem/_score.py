"""Judge scoring of EgoMem turns: one card prompt per dialogue session, scores written back per turn.

The card's prompt scores a whole session at once (turn numbers as JSON keys), so records are grouped by
(benchmark, model, session). Turns whose inference already failed (``record.error``) or that have no prediction are
left out of the session's prompt and untouched — the judge never sees an empty answer it might score.

Per-turn metrics: ``answer_score`` (0–10, the card's scale), ``fact_applicable`` (1/0) and ``fact_score`` (1/0) only
when applicable; the judge's ``-1`` is kept verbatim in ``meta["judge"]["scores"]`` but never stored as a metric
value, so no mean can count it. A session whose output stays unparsable after ``max_retries`` retries gives each of
its turns ``RecordError(kind="judge")`` and no metrics.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from omnieval.benchmarks.egomem._parse import JudgeFn, judge_with_retries, parse_session_scores
from omnieval.benchmarks.egomem._prompt import build_scoring_prompt
from omnieval.core import Record, RecordError


def answer_text(record: Record) -> str | None:
    """The model's answer: the postprocessed prediction when there is one, else the raw prediction."""
    post = record.prediction_postprocessed
    return post if post is not None else record.prediction


def session_grammar(turn_keys: Sequence[str]) -> str:
    """GBNF for the card's verdict with exactly these turns: ``{"1": [fact, answer], ...}``, fact in {-1, 0, 1},
    answer an integer 0-10. A constrained judge always answers in a shape ``parse_session_scores`` accepts, so even a
    small model's verdicts are its own rather than parse failures (its reasoning before the JSON is given up)."""
    pairs = ' ", " '.join(f'"\\"{int(k)}\\": " pair' for k in turn_keys)
    return (f'root ::= "{{" {pairs} "}}"\n'
            'pair ::= "[" fact ", " answer "]"\n'
            'fact ::= "-1" | "0" | "1"\n'
            'answer ::= "10" | [0-9]\n')  # fmt: skip


def score_records(
    records: list[Record], judge: JudgeFn, *, max_retries: int = 2, constrained: bool = False
) -> list[Record]:
    """Copies of ``records`` with judge metrics (or a judge error) filled in, same order; ``constrained``: each
    session's reply is held to :func:`session_grammar`."""
    groups: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        if r.error is None and answer_text(r) is not None:
            groups[(r.benchmark, r.model, str(r.meta["session_key"]))].append(i)
    keys = list(groups)
    prompts: list[str] = []
    turn_keys: list[list[str]] = []
    for key in keys:
        idxs = sorted(groups[key], key=lambda i: int(records[i].meta["turn"]))
        groups[key] = idxs
        first = records[idxs[0]]
        turns = [
            (
                str(records[i].meta["turn_key"]),
                str(records[i].meta["user_txt"]),
                str(records[i].label),
                answer_text(records[i]) or "",
            )
            for i in idxs
        ]
        prompts.append(build_scoring_prompt(str(first.meta["person"]), str(first.meta["person_summary"]), turns))
        turn_keys.append([t[0] for t in turns])
    outcomes = judge_with_retries(
        prompts, judge, lambda g, raw: parse_session_scores(raw, turn_keys[g]), max_retries=max_retries,
        grammars=[session_grammar(k) for k in turn_keys] if constrained else None,
    )
    out = list(records)
    for key, outcome in zip(keys, outcomes, strict=True):
        for i in groups[key]:
            r = records[i]
            info: dict[str, Any] = {"raw": outcome.raw, "attempts": outcome.attempts, "session_key": key[2]}
            if outcome.value is None:
                err = RecordError(kind="judge", message=outcome.error or "judge failed", attempts=outcome.attempts)
                out[i] = r.model_copy(update={"metrics": {}, "error": err, "meta": {**r.meta, "judge": info}})
                continue
            fact, answer = outcome.value[str(r.meta["turn_key"])]
            metrics = {"answer_score": answer, "fact_applicable": float(fact != -1)}
            if fact != -1:
                metrics["fact_score"] = float(fact)
            info["scores"] = [fact, answer]
            out[i] = r.model_copy(update={"metrics": metrics, "meta": {**r.meta, "judge": info}})
    return out
