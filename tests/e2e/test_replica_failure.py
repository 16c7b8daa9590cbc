"""Kill a replica's engine with requests in flight: those requests are retried on the other replica, every sample
lands exactly once, and the records equal an undisturbed run's."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from pathlib import Path

import pytest
import ray
from ray import serve
from testlib.ray_head import wait_until

from omnieval import read_records, run_suite
from omnieval._artifacts import CHECKPOINT
from omnieval._defaults import DEFAULT_MODEL_SOURCE
from omnieval.core import Record, SuiteConfig

pytestmark = [pytest.mark.slow, pytest.mark.ray]


def suite(limit: int) -> SuiteConfig:
    return SuiteConfig.model_validate({
        "name": "failover",
        "models": [{"name": "smol", "source": DEFAULT_MODEL_SOURCE.model_dump(), "replicas": 2,
                    "resources": {"num_cpus": 1}, "engine_kwargs": {"parallel": 2, "ctx_per_slot": 1024, "threads": 1}}],
        "benchmarks": [{"name": "mmlu_tiny", "limit": limit, "generation": {"max_tokens": 24}},
                       {"name": "asdiv_tiny", "limit": limit, "generation": {"max_tokens": 24}}],
        "pool": {"clients": 2, "max_inflight_per_replica": 2, "chunk_size": 2, "max_retries": 3,
                 "health_check_period_s": 1},
        "cache": {"enabled": False},
    })  # fmt: skip


def _by_key(records: list[Record]) -> dict[tuple[str, str, int], Record]:
    out = {r.key: r for r in records}
    assert len(out) == len(records), "duplicate sample keys in the records"
    return out


def test_kill_replica_mid_run_in_flight_requests_fail_over(local_ray: None, tmp_path: Path) -> None:
    baseline = run_suite(suite(8), output_dir=str(tmp_path / "base"), show_progress=False, keep_pool=True)
    base = _by_key(read_records(baseline.run_dir))
    assert len(base) == 16 and all(r.error is None and r.prediction is not None for r in base.values())
    controller = ray.get_actor("omnieval-pool", namespace="omnieval")
    victim, survivor = (r.replica_id for r in ray.get(controller.replicas.remote("smol")))
    result: dict[str, object] = {}

    def go() -> None:
        try:
            result["run"] = run_suite(suite(8), output_dir=str(tmp_path / "hit"), show_progress=False)
        except BaseException as e:  # noqa: BLE001 - surfaced by the assertion below
            result["error"] = e

    t = threading.Thread(target=go)
    t.start()
    pid = serve.get_app_handle(victim).pid.remote().result()
    assert pid is not None
    try:
        wait_until(lambda: any((tmp_path / "hit").glob(f"*/{CHECKPOINT}")), 300, "the run's checkpoint")
        ckpt = next((tmp_path / "hit").glob(f"*/{CHECKPOINT}"))
        # the first record, polled finely: the freeze must land while the run still has most of its 16 to do
        wait_until(lambda: len(ckpt.read_text().splitlines()) >= 1, 300, "the first record", interval=0.05)
        # Freeze the victim's engine: what is dispatched to it from now on cannot complete. It keeps receiving
        # requests until the pool's health check sees it unresponsive; then it holds the in-flight set, and dies.
        os.kill(pid, signal.SIGSTOP)
        assert len(ckpt.read_text().splitlines()) < 16, "the run finished before the freeze: nothing was in flight"

        def victim_out_of_rotation() -> bool:
            states = {r.replica_id: r.state for r in ray.get(controller.replicas.remote("smol"))}
            return states.get(victim) != "healthy"

        wait_until(victim_out_of_rotation, 120, "the pool to mark the frozen replica unhealthy")
    finally:
        with contextlib.suppress(ProcessLookupError):  # Serve's own health check may have replaced it already
            os.kill(pid, signal.SIGKILL)  # the engine dies with requests in flight
    t.join(timeout=900)
    assert not t.is_alive(), "the run did not finish after the replica died"
    assert "error" not in result, result.get("error")
    run = result["run"]

    lines = [json.loads(x) for x in ckpt.read_text().splitlines()]
    keys = [(x["model"], x["benchmark"], x["index"]) for x in lines]
    assert len(keys) == len(set(keys)) == 16, "a sample was lost or written twice"
    recs = _by_key(read_records(run.run_dir))  # type: ignore[attr-defined]
    assert recs.keys() == base.keys()
    assert all(r.error is None for r in recs.values()), [r.error for r in recs.values() if r.error]
    # Only the kill makes a request fail, so the retried records are exactly those in flight on the victim: there
    # must be some (the frozen replica was routed to until the health check), each tried once there and answered
    # by the other replica on the retry.
    retried = {k: r for k, r in recs.items() if r.meta.get("attempts", 1) > 1}
    assert retried, "no request was in flight on the killed replica, or its failure was not retried"
    assert {k: (r.meta["attempts"], r.output.replica) for k, r in retried.items()} == {  # type: ignore[union-attr]
        k: (2, survivor) for k in retried
    }
    # The run says what happened to which replica, and keeps the dead engine's log (copied from its node).
    events = [json.loads(x) for x in (run.run_dir / "replica-events.jsonl").read_text().splitlines()]  # type: ignore[attr-defined]
    assert any(e["replica_id"] == victim and e["kind"] == "unhealthy" for e in events), events
    kept = run.run_dir / "engine-logs" / f"{victim}.log"  # type: ignore[attr-defined]
    assert kept.stat().st_size > 0 and b"llama" in kept.read_bytes().lower()
    # Greedy decoding on the same weights: fail-over changes where a sample ran, not what it produced.
    assert {k: r.prediction for k, r in recs.items()} == {k: r.prediction for k, r in base.items()}
    assert {k: r.metrics for k, r in recs.items()} == {k: r.metrics for k, r in base.items()}
    assert {(s.benchmark, s.metric, s.value) for s in run.manifest.scores} == {  # type: ignore[attr-defined]
        (s.benchmark, s.metric, s.value) for s in baseline.manifest.scores
    }
