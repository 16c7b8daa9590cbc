"""Kill a replica's engine mid-run: in-flight requests move to the other replica, every sample exactly once."""

from __future__ import annotations

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
from omnieval._config import SuiteConfig
from omnieval._defaults import DEFAULT_MODEL_SOURCE

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


def test_kill_replica_mid_run_every_sample_once_same_scores(local_ray: None, tmp_path: Path) -> None:
    baseline = run_suite(suite(8), output_dir=str(tmp_path / "base"), show_progress=False, keep_pool=True)
    result: dict[str, object] = {}

    def go() -> None:
        try:
            result["run"] = run_suite(suite(8), output_dir=str(tmp_path / "hit"), show_progress=False)
        except BaseException as e:  # noqa: BLE001 - surfaced by the assertion below
            result["error"] = e

    t = threading.Thread(target=go)
    t.start()
    wait_until(lambda: any((tmp_path / "hit").glob(f"*/{CHECKPOINT}")), 300, "the run's checkpoint")
    ckpt = next((tmp_path / "hit").glob(f"*/{CHECKPOINT}"))
    wait_until(lambda: len(ckpt.read_text().splitlines()) >= 2, 300, "first records")
    replicas = ray.get(ray.get_actor("omnieval-pool", namespace="omnieval").replicas.remote("smol"))
    victim = replicas[0].replica_id
    pid = serve.get_app_handle(victim).pid.remote().result()
    os.kill(pid, signal.SIGKILL)  # the engine process dies with requests in flight
    t.join(timeout=900)
    assert "error" not in result, result.get("error")
    run = result["run"]
    keys = [tuple(json.loads(x)[k] for k in ("model", "benchmark", "index")) for x in ckpt.read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 16
    recs = read_records(run.run_dir)  # type: ignore[attr-defined]
    assert all(r.error is None for r in recs), [r.error for r in recs if r.error]
    assert any(r.meta.get("attempts", 1) > 1 for r in recs) or any(r.output.replica != victim for r in recs)  # type: ignore[union-attr]
    assert {(s.benchmark, s.value) for s in run.manifest.scores} == {  # type: ignore[attr-defined]
        (s.benchmark, s.value) for s in baseline.manifest.scores
    }
