"""OmniAssistBench scoring: KEEP QUIET, 0-5 -> 0-100, retry then error, hierarchical averages."""

from __future__ import annotations

import math

import pytest

from omnieval.benchmarks.omniassist import (
    KEEP_QUIET,
    SAMPLE_DIR,
    SUB_TASK_PARENT,
    aggregate,
    load_records,
    normalise,
    score_records,
)
from omnieval.core import Output, Record, RecordError, TextOutput


def _with(r: Record, prediction: str) -> Record:
    return r.model_copy(update={"output": Output(text=TextOutput(prediction=[prediction]))})


def constant_judge(level: int):
    return lambda prompts: [f'thinking\n{{"score": {level}}}' for _ in prompts]


@pytest.fixture(scope="module")
def ser() -> list[Record]:
    return load_records(SAMPLE_DIR, mode="teacher_forcing", sub_tasks=["SER"])  # KQ, KQ, plate


def test_exact_keep_quiet_is_five_without_judge(ser: list[Record]) -> None:
    calls: list[str] = []

    def judge(prompts: list[str]) -> list[str]:
        calls.extend(prompts)
        return constant_judge(1)(prompts)

    out = score_records(
        [_with(ser[0], f"  {KEEP_QUIET}\n"), _with(ser[1], "Nothing yet, still waiting."), _with(ser[2], KEEP_QUIET)],
        judge,
    )
    assert out[0].metrics == {"rubric": 5.0, "score": 100.0}
    assert out[0].meta["judge"] == {"raw": None, "attempts": 0, "rule": "exact [KEEP QUIET]"}
    assert len(calls) == 2  # descriptive silence and a silence token where an answer was due both go to the judge
    assert "[Ground Truth] [KEEP QUIET]" in calls[0] and "Nothing yet, still waiting." in calls[0]
    assert "[Ground Truth] The taxi's license plate is AB 123." in calls[1]
    assert "When the next taxi comes" in calls[1]  # the standing request from turn 0
    assert out[1].metrics == {"rubric": 1.0, "score": 20.0} and out[2].metrics["score"] == 20.0


@pytest.mark.parametrize(("level", "score"), [(0, 0.0), (1, 20.0), (2, 40.0), (3, 60.0), (4, 80.0), (5, 100.0)])
def test_normalisation(ser: list[Record], level: int, score: float) -> None:
    assert normalise(level) == score
    (out,) = score_records([_with(ser[2], "Plate AB 123.")], constant_judge(level))
    assert out.metrics == {"rubric": float(level), "score": score} and out.meta["judge"]["attempts"] == 1


def test_retry_then_valid_and_retry_then_error(ser: list[Record]) -> None:
    answers = iter(["no idea", "Score: 9", '{"score": 4}'])
    (ok,) = score_records([_with(ser[2], "AB 123")], lambda ps: [next(answers) for _ in ps], max_retries=2)
    assert ok.metrics["score"] == 80.0 and ok.meta["judge"]["attempts"] == 3 and ok.error is None
    (bad,) = score_records([_with(ser[2], "AB 123")], lambda ps: ["meh" for _ in ps], max_retries=1)
    assert bad.metrics == {} and bad.error is not None and bad.error.kind == "judge" and bad.error.attempts == 2
    assert bad.meta["judge"] == {"raw": "meh", "attempts": 2}


def test_failed_inference_untouched(ser: list[Record]) -> None:
    failed = ser[2].model_copy(update={"error": RecordError(kind="replica_dead", message="x")})
    (out,) = score_records([failed], constant_judge(5))
    assert out.error.kind == "replica_dead" and out.metrics == {}
    (out,) = score_records([ser[1]], constant_judge(5))  # no prediction at all
    assert out.metrics == {}


def _rec(i: int, sub: str, score: float | None) -> Record:
    tier, major = SUB_TASK_PARENT[sub]
    metrics = {} if score is None else {"rubric": score / 20, "score": score}
    err = RecordError(kind="judge", message="x") if score is None else None
    return Record(
        benchmark="omniassist",
        index=i,
        messages=[],
        metrics=metrics,
        error=err,
        meta={"sub_task": sub, "tier": tier, "major_task": major},
    )


def test_hierarchical_averages_are_turn_weighted() -> None:
    spec = [("GPF", 40.0)] * 3 + [("OPF", 80.0)] + [("II", 100.0)] + [("SER", 20.0), ("MER", 60.0)] + [("Ms", 0.0)]
    rs = [_rec(i, s, v) for i, (s, v) in enumerate(spec)] + [_rec(99, "II", None)]
    agg = aggregate(rs)
    assert agg["sub/GPF"] == 40.0 and agg["sub/OPF"] == 80.0
    assert agg["major/non_audio_prompt_following"] == 50.0  # (3*40 + 80) / 4, not (40 + 80) / 2
    assert agg["major/social_perception"] == 100.0
    assert agg["tier/basic"] == pytest.approx((3 * 40 + 80 + 100) / 5)
    assert agg["tier/advanced"] == 40.0 and agg["major/proactive_response"] == 40.0
    assert agg["tier/real_world"] == 0.0
    assert agg["overall"] == pytest.approx(sum(v for _, v in spec) / len(spec))
    assert math.isnan(agg["sub/CE"]) and math.isnan(agg["major/process_tracking"])
    assert agg["n_records"] == 9 and agg["n_scored"] == 8 and agg["n_judge_errors"] == 1 and agg["n_unscored"] == 1
    macro = aggregate(rs, weighting="macro")
    assert macro["major/non_audio_prompt_following"] == 60.0
    assert macro["tier/basic"] == pytest.approx((60.0 + 100.0) / 2)
    assert macro["overall"] == pytest.approx((80.0 + 40.0 + 0.0) / 3)


def test_papers_non_audio_example() -> None:
    """Table 2, Gemini-3-Pro: GPF 55.0 and OPF 66.6 average to 57.4 only with GPF ~4x as many turns (76 QA)."""
    rs = [_rec(i, "GPF", 55.0) for i in range(60)] + [_rec(60 + i, "OPF", 66.6) for i in range(16)]
    assert round(aggregate(rs)["major/non_audio_prompt_following"], 1) == 57.4
    assert round(aggregate(rs, weighting="macro")["major/non_audio_prompt_following"], 1) == 60.8


def test_end_to_end_on_sample() -> None:
    rs = load_records(SAMPLE_DIR, mode="teacher_forcing")
    preds = [_with(r, KEEP_QUIET if r.meta["keep_quiet"] else "An answer.") for r in rs]

    def judge(prompts: list[str]) -> list[str]:
        return [f'{{"score": {3 if "Social" in p else 4}}}' for p in prompts]

    agg = aggregate(score_records(preds, judge))
    assert {k for k in agg if k.startswith("sub/")} == {f"sub/{s}" for s in SUB_TASK_PARENT}
    assert len([k for k in agg if k.startswith("major/")]) == 7
    assert agg["sub/II"] == 60.0 and agg["sub/SER"] == pytest.approx((100 + 100 + 80) / 3)
    assert agg["n_scored"] == 35 and not any(math.isnan(v) for v in agg.values())
