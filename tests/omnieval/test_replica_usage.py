"""The replica timeline's summary over the inference phase: busy share, counters as differences, critical path."""

from __future__ import annotations

import pytest

from omnieval._replica_usage import UsageSample, read_timeline, summarize, write_timeline


def _s(t: float, rid: str, in_flight: int, prompt: int, out: int, done: int, queue: int = 0) -> UsageSample:
    return UsageSample(t=t, replica_id=rid, model="m", engine="vllm", in_flight=in_flight, queue_depth=queue,
                       slots=4, prompt_tokens=prompt, output_tokens=out, completed=done)  # fmt: skip


def test_summary_counts_only_the_phase_and_finds_the_last_busy_replica(tmp_path) -> None:  # type: ignore[no-untyped-def]
    samples = [
        _s(99.0, "a", 0, 500, 50, 5),  # before the phase: the baseline of a's counters
        _s(100.0, "a", 3, 600, 60, 6), _s(101.0, "a", 4, 900, 90, 9, queue=2), _s(102.0, "a", 0, 1000, 100, 10),
        _s(103.0, "a", 0, 1000, 100, 10),
        _s(100.5, "b", 1, 10, 1, 0), _s(101.5, "b", 1, 20, 2, 1), _s(102.5, "b", 1, 30, 3, 2), _s(103.5, "b", 1, 40, 4, 3),
        _s(110.0, "b", 1, 99, 9, 9),  # after the phase: ignored
    ]  # fmt: skip
    a, b = summarize(samples, 100.0, 104.0, {"b": (3.2, 4.0)})
    assert (a.replica_id, a.samples, a.busy_fraction, a.peak_queue) == ("a", 4, 0.5, 2)
    assert (a.prompt_tokens, a.output_tokens, a.requests) == (500, 50, 5)  # from the baseline before the phase
    assert a.mean_in_flight == pytest.approx(7 / 4) and a.last_busy_s == pytest.approx(1.0)
    assert (b.busy_fraction, b.prompt_tokens, b.output_tokens) == (1.0, 40, 4)  # started inside: from 0
    assert b.first_busy_s == pytest.approx(0.5) and b.last_busy_s == pytest.approx(3.5)  # b is the critical path
    assert (a.up_at_s, b.up_at_s) == (0.0, pytest.approx(0.5))  # b came up inside the phase
    assert (a.load_s, b.load_s, b.up_s) == (None, 3.2, 4.0)
    write_timeline(tmp_path, samples[:3])
    write_timeline(tmp_path, samples[3:])  # a resumed run appends
    assert read_timeline(tmp_path) == samples
