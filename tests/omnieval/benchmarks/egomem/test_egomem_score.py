"""EgoMem scoring: one judge prompt per session, retry then error, -1 never counted, aggregation."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from omnieval.benchmarks.egomem import SAMPLE_DIR, aggregate, load_records, score_records
from omnieval.core import Output, Record, RecordError, TextOutput


@pytest.fixture(scope="module")
def predicted(tmp_path_factory: pytest.TempPathFactory) -> list[Record]:
    rs = load_records(SAMPLE_DIR, split="original", model="m", cache_dir=tmp_path_factory.mktemp("wav"))
    return [r.model_copy(update={"output": Output(text=TextOutput(prediction=[f"回复{r.index}"]))}) for r in rs]


def _keys(prompt: str) -> list[str]:
    return list(json.loads(prompt.split("待评分数据：", 1)[1])["dialog"])


def good_judge(pairs: dict[str, list[float]] | None = None):
    def judge(prompts: list[str]) -> list[str]:
        return [
            "思考。\n```json\n" + json.dumps({k: (pairs or {}).get(k, [1, 9]) for k in _keys(p)}) + "\n```"
            for p in prompts
        ]

    return judge


def test_one_prompt_per_session(predicted: list[Record]) -> None:
    seen: list[list[str]] = []

    def judge(prompts: list[str]) -> list[str]:
        seen.extend(prompts)
        return good_judge()(prompts)

    out = score_records(predicted, judge)
    assert len(seen) == 3 and [_keys(p) for p in seen] == [["1", "2"], ["1", "2"], ["1"]]
    assert "回复3" in seen[1] and "小红下周六生日。" in seen[1]  # model response and ground truth of session 0/1
    assert all(r.metrics == {"answer_score": 9.0, "fact_applicable": 1.0, "fact_score": 1.0} for r in out)
    assert all(r.meta["judge"]["attempts"] == 1 and r.meta["judge"]["scores"] == [1, 9.0] for r in out)
    assert predicted[0].metrics == {}  # inputs are not mutated


def test_retry_then_valid(predicted: list[Record]) -> None:
    calls: list[int] = []

    def judge(prompts: list[str]) -> list[str]:
        calls.append(len(prompts))
        if len(calls) == 1:
            return ["I cannot decide." for _ in prompts]
        return good_judge()(prompts)

    out = score_records(predicted, judge)
    assert calls == [3, 3]
    assert all(r.error is None and r.meta["judge"]["attempts"] == 2 for r in out)


def test_only_failed_sessions_are_retried(predicted: list[Record]) -> None:
    calls: list[int] = []

    def judge(prompts: list[str]) -> list[str]:
        calls.append(len(prompts))
        return ["garbage" if len(_keys(p)) == 1 else good_judge()([p])[0] for p in prompts]

    out = score_records(predicted, judge, max_retries=2)
    assert calls == [3, 1, 1]
    assert [r.error is None for r in out] == [True, True, True, True, False]
    bad = out[4]
    assert bad.error == RecordError(kind="judge", message=bad.error.message, attempts=3)
    assert "unparsable" in bad.error.message and bad.metrics == {}
    assert bad.meta["judge"] == {"raw": "garbage", "attempts": 3, "session_key": "1/0"}
    agg = aggregate(out)
    assert agg["n_scored"] == 4 and agg["n_judge_errors"] == 1 and agg["answer_score"] == 9.0


@pytest.mark.parametrize("max_retries", [0, 1, 3])
def test_judge_exceptions_and_wrong_lengths_are_failed_attempts(predicted: list[Record], max_retries: int) -> None:
    n = 0

    def judge(prompts: list[str]) -> list[str]:
        nonlocal n
        n += 1
        if n % 2:
            raise TimeoutError("judge replica down")
        return ["x"]  # wrong length

    out = score_records(predicted, judge, max_retries=max_retries)
    assert n == max_retries + 1
    assert all(r.error is not None and r.error.kind == "judge" and r.error.attempts == n for r in out)
    assert not any(r.metrics for r in out)
    assert math.isnan(aggregate(out)["answer_score"])


def test_not_applicable_fact_score(predicted: list[Record]) -> None:
    out = score_records(predicted, good_judge({"1": [-1, 8], "2": [0, 6]}))
    first = out[0]
    assert "fact_score" not in first.metrics and first.metrics["fact_applicable"] == 0.0
    assert first.meta["judge"]["scores"] == [-1, 8.0]
    agg = aggregate(out)
    # fact_score over the 2 applicable turns only (both 0) -> 0 %, not diluted by the three -1 turns
    assert agg["fact_score"] == 0.0 and agg["n_fact_applicable"] == 2 and agg["fact_applicable"] == 40.0
    assert agg["answer_score"] == pytest.approx((8 * 3 + 6 * 2) / 5)
    assert agg["answer_score_100"] == pytest.approx(10 * agg["answer_score"])


def test_aggregate_ignores_raw_minus_one_metric() -> None:
    base = {"benchmark": "egomem_original", "messages": [], "meta": {}}
    rs = [
        Record(index=0, metrics={"answer_score": 9, "fact_score": 1}, **base),
        Record(index=1, metrics={"answer_score": 7, "fact_score": -1}, **base),
        Record(index=2, metrics={"answer_score": 5, "fact_score": 0}, **base),
        Record(index=3, error=RecordError(kind="judge", message="x"), **base),
    ]
    agg = aggregate(rs)
    assert agg["fact_score"] == 50.0 and agg["answer_score"] == 7.0 and agg["n_judge_errors"] == 1
    assert agg["n_turns"] == 4 and agg["n_scored"] == 3


def test_failed_inference_is_left_out_of_the_prompt(predicted: list[Record], tmp_path: Path) -> None:
    rs = list(predicted)
    rs[3] = rs[3].model_copy(update={"output": None, "error": RecordError(kind="timeout", message="slow")})
    seen: list[str] = []

    def judge(prompts: list[str]) -> list[str]:
        seen.extend(prompts)
        return good_judge()(prompts)

    out = score_records(rs, judge)
    assert [_keys(p) for p in seen] == [["1", "2"], ["1"], ["1"]]
    assert out[3].error.kind == "timeout" and out[3].metrics == {}
    assert aggregate(out)["n_scored"] == 4


def test_constrained_judge_gets_one_grammar_per_session_naming_its_turns(predicted: list[Record]) -> None:
    """With ``judge_constrained`` each session's prompt travels with a grammar whose only words are that session's
    turn keys with [fact, answer] pairs, so whatever the judge writes under it parses."""
    import re

    from omnieval.benchmarks.egomem._score import session_grammar

    sent: list[tuple[str, str]] = []

    def judge(prompts: list[str], grammars: list[str] | None = None) -> list[str]:
        assert grammars is not None and len(grammars) == len(prompts)
        sent.extend(zip(prompts, grammars, strict=True))
        return ["{" + ", ".join(f'"{k}": [0, 7]' for k in _keys(p)) + "}" for p in prompts]  # a grammar-shaped reply

    out = score_records(predicted, judge, constrained=True)
    assert [re.findall(r'\\"(\d+)\\"', g) for _, g in sent] == [_keys(p) for p, _ in sent] == [["1", "2"], ["1", "2"], ["1"]]
    assert all(g == session_grammar(_keys(p)) for p, g in sent)
    assert all(r.metrics == {"answer_score": 7.0, "fact_applicable": 1.0, "fact_score": 0.0} for r in out)
    assert score_records(predicted, good_judge())[0].metrics["answer_score"] == 9.0  # unconstrained: no grammars sent
