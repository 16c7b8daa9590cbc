"""The replica timeline's summary over the inference phase: busy share, counters as differences, critical path."""

from __future__ import annotations

import pytest

from omnieval._replica_usage import Startup, UsageSample, read_timeline, summarize, write_timeline


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
    a, b = summarize(samples, 100.0, 104.0, {"b": Startup(3.2, 4.0, deployed_at=96.3, healthy_at=100.3)})
    assert (a.replica_id, a.samples, a.busy_fraction, a.peak_queue) == ("a", 4, 0.5, 2)
    assert (a.prompt_tokens, a.output_tokens, a.requests) == (500, 50, 5)  # from the baseline before the phase
    assert a.mean_in_flight == pytest.approx(7 / 4) and a.last_busy_s == pytest.approx(1.0)
    assert (b.busy_fraction, b.prompt_tokens, b.output_tokens) == (1.0, 40, 4)  # started inside: from 0
    assert b.first_busy_s == pytest.approx(0.5) and b.last_busy_s == pytest.approx(3.5)  # b is the critical path
    assert (a.up_at_s, b.up_at_s) == (0.0, pytest.approx(0.5))  # b came up inside the phase
    assert (a.load_s, b.load_s, b.up_s) == (None, 3.2, 4.0)
    assert (b.deployed_at_s, b.healthy_at_s) == (pytest.approx(-3.7), pytest.approx(0.3))  # the controller's moments
    assert a.deployed_at_s is None and a.healthy_at_s is None  # no controller view of a's start
    write_timeline(tmp_path, samples[:3])
    write_timeline(tmp_path, samples[3:])  # a resumed run appends
    assert read_timeline(tmp_path) == samples


def test_cpu_cores_over_the_window_from_the_replicas_first_sample() -> None:
    """CPU seconds count from the process's start (its load too): a replica up inside the phase is measured from
    its first sample, one up before from the baseline."""

    def s(t: float, rid: str, cpu: float, node: float) -> UsageSample:
        return _s(t, rid, 1, 0, 0, 0).model_copy(update={"cpu_s": cpu, "node_cpu_s": node, "node_cpus": 2})

    samples = [s(99.0, "a", 50.0, 500.0), s(101.0, "a", 53.0, 503.6), s(104.0, "a", 57.5, 508.0),
               s(102.0, "b", 30.0, 504.0), s(104.0, "b", 30.5, 508.0)]  # fmt: skip
    a, b = summarize(samples, 100.0, 104.0)
    assert a.cpu_cores == pytest.approx(7.5 / 5) and a.node_busy_cores == pytest.approx(8.0 / 5)
    assert b.cpu_cores == pytest.approx(0.25) and b.node_busy_cores == pytest.approx(2.0)  # not its 30 s of load
    assert a.node_cpus == 2
    (c,) = summarize([_s(100.5, "c", 1, 0, 0, 0), _s(101.5, "c", 1, 0, 0, 0)], 100.0, 104.0)
    assert c.cpu_cores is None and c.node_busy_cores is None  # an external server: no CPU of its own to count
    # the node's counter read a hair after the clock: 4.0016 core-s over 2 s on 2 CPUs is a node busy on both
    (d,) = summarize([s(101.0, "d", 0.0, 600.0), s(103.0, "d", 1.0, 604.0016)], 100.0, 104.0)
    assert d.node_busy_cores == 2.0
