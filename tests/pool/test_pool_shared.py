"""Two suites running at the same time share one pool: same replica, requests batched together, released after both.

Each suite has one client actor; the replica's ``peak_clients`` (how many clients had requests in it at once, from
what the clients report to the controller) at 2 means requests of both suites were in its batch together. Requests
go straight to llama-server's port, so what it served is counted by the clients, and must add up exactly.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray
from cluster_testlib import PidTracker, kill_pids, require_engine, teardown_pool, tiny_model

from omnieval._runner import RunResult, run_suite
from omnieval.core import SuiteConfig
from pool import get_controller

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture
def ray_local() -> Iterator[PidTracker]:
    require_engine()
    ray.init(num_cpus=2, namespace="omnieval", include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    tracker = PidTracker()
    try:
        yield tracker
    finally:
        pids = teardown_pool(tracker)
        ray.shutdown()
        kill_pids(pids)


def _suite(name: str, limit: int) -> SuiteConfig:
    return SuiteConfig.model_validate(
        {
            "name": name,
            "models": [tiny_model("shared-smollm", parallel=4)],
            "benchmarks": [{"name": "asdiv_tiny", "limit": limit, "generation": {"max_tokens": 8}}],
            "pool": {"clients": 1, "max_inflight_per_replica": 2, "chunk_size": 2, "health_check_period_s": 1.0},
        }
    )


@pytest.mark.timeout(300)
def test_concurrent_suites_share_replicas(ray_local: PidTracker, tmp_path: Path) -> None:
    suites = [_suite("suite-a", 6), _suite("suite-b", 12)]
    start = threading.Barrier(len(suites))
    results: dict[str, RunResult] = {}
    failures: list[BaseException] = []

    def run(s: SuiteConfig) -> None:
        start.wait()
        try:
            results[s.name] = run_suite(s, output_dir=str(tmp_path), show_progress=False)
        except BaseException as e:  # noqa: BLE001 - re-raised in the test thread below
            failures.append(e)

    threads = [threading.Thread(target=run, args=(s,)) for s in suites]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(280)
    wall = time.monotonic() - t0
    assert not failures, failures
    assert set(results) == {"suite-a", "suite-b"}
    a, b = results["suite-a"], results["suite-b"]
    assert a.manifest.run_id != b.manifest.run_id
    assert all(r.error is None and r.output is not None for r in a.records + b.records)

    used = {s: {r.output.replica for r in res.records if r.output} for s, res in results.items()}
    assert used["suite-a"] == used["suite-b"] and len(used["suite-a"]) == 1, used
    (rid,) = used["suite-a"]

    controller = get_controller(create=False)
    assert ray.get(controller.replicas.remote()) == [] and ray.get(controller.users.remote()) == {}
    final = ray.get(controller.retired.remote())[rid]
    assert final.stats is not None
    # it served every request of both suites, so it outlived the first suite's release
    assert final.stats.completed == len(a.records) + len(b.records)
    assert final.stats.peak_clients == 2, final.stats
    # busy while requests were outstanding, as the clients saw it (they went straight to llama-server, past the
    # replica process): at least most of the slowest request (the first sync window of a client is not counted),
    # never more than the two suites' wall time
    slowest = max(r.latency or 0.0 for r in a.records + b.records)
    assert 0.5 * slowest <= final.stats.busy_s <= wall, (final.stats.busy_s, slowest, wall)
