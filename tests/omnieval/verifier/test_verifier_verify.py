"""Retry loop, prompt fields, verdict storage and ScoreRows, with an injected judge (no Ray, no engine)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from omnieval.core import Message, Output, PathModelSource, Record, RecordError, TextOutput, VerifierConfig
from omnieval.verifier import (
    Triple,
    _verify,
    build_prompt,
    judge_with_retries,
    record_triple,
    reference_text,
    run_verifier,
    verifier_rows,
)


class ScriptedJudge:
    """Replies from a per-prompt script, one entry per attempt; records what it was asked."""

    def __init__(self, script: dict[str, list[Any]]) -> None:
        self.script = script
        self.calls: list[tuple[list[str], int]] = []

    def __call__(self, prompts: list[str], attempt: int) -> list[Any]:
        self.calls.append((list(prompts), attempt))
        return [self.script[p][min(attempt, len(self.script[p]) - 1)] for p in prompts]


def test_retry_resends_only_unparsable_then_records_error() -> None:
    judge = ScriptedJudge({
        "ok": ["Explanation: same.\nRating: 1"],
        "late": ["I think it is right", "Explanation: right\nRating: 1"],
        "never": ["no verdict", "still none", "Rating: 0 or 1"],
        "failing": [RuntimeError("HTTP 500"), None, "Explanation: wrong.\nRating: 0"],
    })  # fmt: skip
    out = judge_with_retries(["ok", "late", "never", "failing"], judge, max_retries=2)
    assert [c[0] for c in judge.calls] == [["ok", "late", "never", "failing"], ["late", "never", "failing"],
                                           ["never", "failing"]]  # fmt: skip
    assert [c[1] for c in judge.calls] == [0, 1, 2]
    ok, late, never, failing = out
    assert (ok.rating, ok.attempts, ok.error, ok.rationale) == (1, 1, None, "same.")
    assert (late.rating, late.attempts, late.error) == (1, 2, None)
    assert never.rating is None and never.attempts == 3 and "unparsable" in (never.error or "")
    assert never.raw == "Rating: 0 or 1"  # raw of the last attempt is kept for inspection
    assert (failing.rating, failing.attempts, failing.error) == (0, 3, None)


def test_retry_whole_batch_exception_counts_as_attempt() -> None:
    calls = []

    def flaky(prompts: list[str], attempt: int) -> Sequence[str]:
        calls.append(attempt)
        if attempt == 0:
            raise ConnectionError("worker died")
        return ["Rating: 1"] * len(prompts)

    out = judge_with_retries(["a", "b"], flaky, max_retries=1)
    assert calls == [0, 1] and [v.rating for v in out] == [1, 1] and all(v.attempts == 2 for v in out)
    out = judge_with_retries(["a"], lambda p, a: (_ for _ in ()).throw(ConnectionError("x")), max_retries=0)
    assert out[0].rating is None and "judge call failed" in (out[0].error or "") and out[0].attempts == 1


def test_retry_wrong_reply_count_is_a_failed_attempt() -> None:
    out = judge_with_retries(["a", "b"], lambda p, a: ["Rating: 1"], max_retries=0)
    assert all(v.rating is None and "2 prompts" in (v.error or "") for v in out)


def test_attempt_options_greedy_then_sampled() -> None:
    cfg = VerifierConfig(model=PathModelSource(path="/x.gguf"), max_tokens=99, retry_temperature=0.6)
    first, second = _verify.attempt_options(cfg, 0), _verify.attempt_options(cfg, 2)
    assert (first.temperature, first.max_tokens) == (0.0, 99)
    assert (second.temperature, second.seed) == (0.6, 2)


def _rec(bench: str, i: int, pred: str | None, label: Any, *, options: list[str] | None = None,
         model: str = "m", error: bool = False) -> Record:  # fmt: skip
    r = Record(
        benchmark=bench, index=i, model=model, label=label, options=options,
        messages=[Message.text("system", "be brief"), Message.text("user", f"question {i}?")],
    )  # fmt: skip
    if pred is not None:
        r.output = Output(text=TextOutput(prediction=[pred], prediction_postprocessed=["X"]))
    if error:
        r.error = RecordError(kind="timeout", message="t")
    return r


def test_reference_text_forms() -> None:
    assert reference_text("9") == "9"
    assert reference_text(["Paris", "paris, France"]) == "Paris / paris, France"
    assert reference_text("B", ["Rome", "Paris", "Oslo"]) == "B. Paris"
    assert reference_text(2, ["Rome", "Paris", "Oslo"]) == "C. Oslo"
    assert reference_text("Z", ["Rome", "Paris"]) == "Z"  # not a valid letter: left as is
    assert reference_text(None) == ""


def test_record_triple_uses_last_user_text_and_raw_prediction() -> None:
    r = _rec("mmlu_tiny", 0, "The answer is (B) Paris.", "B", options=["Rome", "Paris"])
    r.messages.append(Message.text("assistant", "earlier turn"))
    t = record_triple(r)
    assert t == Triple("question 0?", "B. Paris", "The answer is (B) Paris.")  # raw, not the postprocessed "X"
    assert record_triple(_rec("b", 1, None, "1")) is None
    assert record_triple(_rec("b", 2, "7", "1", error=True)) is None


def test_build_prompt_clips_long_prediction_keeping_the_tail() -> None:
    pred = "start " + "x" * 10_000 + " The answer is 42."
    p = build_prompt(Triple("q", "42", pred), max_prediction_chars=500)
    assert "The answer is 42." in p and "characters omitted" in p and len(p) < 3000
    assert "(empty)" in build_prompt(Triple("q", "42", "  "))


class FakePool:
    """Stands in for VerifierPool: judges '9' and 'B' correct, is unparsable for 'garbage'."""

    started = 0

    def __init__(self, cfg: VerifierConfig, *, pin: bool = True, judge: object = None) -> None:
        self.workers = [object()]

    def __enter__(self) -> FakePool:
        FakePool.started += 1
        return self

    def __exit__(self, *a: object) -> None:
        pass

    def generate(self, prompts: list[str], attempt: int) -> list[str]:
        out = []
        for p in prompts:
            pred = p.split("[Model Answer]\n", 1)[1].split("\n\n[Rules]", 1)[0]
            if pred == "garbage":
                out.append("I refuse to answer in the format.")
            else:
                out.append(f"Explanation: checked {pred}.\nRating: {int(pred in ('9', 'B', 'The answer is 9 apples'))}")
        return out


def test_run_verifier_stores_verdicts_and_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_verify, "VerifierPool", FakePool)
    recs = [
        _rec("asdiv_tiny", 0, "The answer is 9 apples", "9"),
        _rec("asdiv_tiny", 1, "7", "9"),
        _rec("asdiv_tiny", 2, "garbage", "9"),
        _rec("asdiv_tiny", 3, None, "9", error=True),
        _rec("mmlu_tiny", 0, "B", "B", options=["x", "y"]),
    ]
    cfg = VerifierConfig(model=PathModelSource(path="/x.gguf"), max_retries=1)
    run_verifier(recs, cfg)
    a0, a1, a2, a3, m0 = recs
    assert a0.metrics["verifier"] == 1.0 and a1.metrics["verifier"] == 0.0 and m0.metrics["verifier"] == 1.0
    assert a0.meta["verifier"] == {"rating": 1, "rationale": "checked The answer is 9 apples.",
                                   "raw": "Explanation: checked The answer is 9 apples.\nRating: 1",
                                   "attempts": 1, "error": None, "probability": None}  # fmt: skip
    assert "verifier" not in a2.metrics and a2.meta["verifier"]["rating"] is None
    assert a2.meta["verifier"]["attempts"] == 2 and "unparsable" in a2.meta["verifier"]["error"]
    assert a2.error is None  # judge failures never touch the inference error field
    assert "verifier" not in a3.meta and a3.error is not None
    rows = {(r.benchmark, r.metric): r for r in verifier_rows(recs, engine="llamacpp")}
    asdiv, mmlu = rows[("asdiv_tiny", "verifier")], rows[("mmlu_tiny", "verifier")]
    assert asdiv.value == 50.0 and asdiv.num_samples == 4 and asdiv.num_errors == 2 and asdiv.engine == "llamacpp"
    assert mmlu.value == 100.0 and mmlu.num_errors == 0 and mmlu.modality == "text"
    # the mean verdict's error over the judged samples (verdicts 1 and 0): sd 0.707 / sqrt 2, on 0-100
    assert asdiv.stderr == pytest.approx(50.0) and asdiv.stderr_method == "mean" and mmlu.stderr is None


def test_run_verifier_disabled_and_nothing_to_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_verify, "VerifierPool", FakePool)
    FakePool.started = 0
    recs = [_rec("b", 0, "9", "9")]
    run_verifier(recs, VerifierConfig(model=PathModelSource(path="/x.gguf"), enabled=False))
    run_verifier([_rec("b", 1, None, "9", error=True)], VerifierConfig(model=PathModelSource(path="/x.gguf")))
    assert FakePool.started == 0 and "verifier" not in recs[0].meta
    rows = verifier_rows([_rec("b", 1, None, "9", error=True)], engine="e")
    assert rows[0].value is None and rows[0].num_errors == 1


def test_unstartable_verifier_records_errors_without_raising(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken(FakePool):
        def __enter__(self) -> FakePool:
            raise TimeoutError("no free CPUs")

    monkeypatch.setattr(_verify, "VerifierPool", Broken)
    recs = [_rec("b", 0, "9", "9"), _rec("b", 1, "8", "9")]
    run_verifier(recs, VerifierConfig(model=PathModelSource(path="/x.gguf")))
    assert all(r.meta["verifier"]["rating"] is None and "no free CPUs" in r.meta["verifier"]["error"] for r in recs)
    assert verifier_rows(recs, engine="e")[0].value is None
