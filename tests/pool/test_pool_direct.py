"""Direct dispatch: requests go to the replica's own server over HTTP (no Serve call per request), the replica's
adaptive limit is shared by every client and climbs from its start, and a server that dies makes the replica
unroutable until Serve restarts it (then the new endpoint is used)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest
import ray
from ray import serve
from testlib.pool import stop_pool
from testlib.ray_head import wait_until

from omnieval.core import GenerationOptions, ModelConfig, PoolConfig
from pool import Dispatcher, get_controller
from schedulers import RoutingRequest
from serving import GenerationRequest
from serving._instant import INSTANT_TEXT

pytestmark = [pytest.mark.ray]
MODEL = ModelConfig(name="instant", engine="instant", resources={"num_cpus": 0}, source={"kind": "path", "path": "/dev/null"})


@pytest.fixture(scope="module")
def controller() -> Iterator[Any]:
    ray.init(num_cpus=2, namespace="omnieval", include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    ctl = get_controller(1.0)
    ray.get(ctl.ensure_model.remote(MODEL, "direct-test"))
    try:
        yield ctl
    finally:
        stop_pool(ctl)


def _request(i: int) -> tuple[GenerationRequest, RoutingRequest]:
    req = GenerationRequest(request_id=f"r{i}", messages=[{"role": "user", "content": f"item {i}"}],
                            options=GenerationOptions(max_tokens=3))  # fmt: skip
    return req, RoutingRequest(model="instant", prompt_text=f"item {i}", est_tokens=3)


async def _clients(ctl: Any, n_clients: int, per_client: int, cfg: PoolConfig) -> list[Dispatcher]:
    ds = [Dispatcher("instant", ctl, cfg, seed=i, client_id=f"test-{i}") for i in range(n_clients)]

    async def run(d: Dispatcher, k: int) -> None:
        results = await asyncio.gather(*(d.submit(*_request(k * per_client + i)) for i in range(per_client)))
        assert all(r.text == INSTANT_TEXT and r.completion_tokens == 3 for r, _, _ in results)
        await d.flush()
        await d.close()

    await asyncio.gather(*(run(d, k) for k, d in enumerate(ds)))
    return ds


def test_requests_bypass_serve_and_the_limit_is_shared_and_climbs(controller: Any) -> None:
    (info,) = ray.get(controller.replicas.remote("instant"))
    assert info.endpoint is not None and info.endpoint.api_key  # a managed server: published with its own token
    cfg = PoolConfig(initial_inflight_per_replica=2, max_inflight_per_replica=64)
    ds = asyncio.run(_clients(controller, 2, 4000, cfg))
    assert [d.stats["direct_http"] for d in ds] == [4000, 4000]
    assert all(d.stats["serve_handle"] == 0 and d.stats["failed"] == 0 for d in ds)
    lim = ray.get(controller.limits.remote())[info.replica_id]
    # both clients' reports reached the one shared limiter, which decided many times within its bounds (how it
    # climbs and backs off is tests/schedulers/test_sched_gradient.py)
    assert lim["updates"] >= 5 and 1 <= lim["limit"] <= 64 and lim["baseline_s_per_token"] > 0
    assert lim["peak_limit"] > lim["initial"] >= cfg.initial_inflight_per_replica, lim  # it climbed from its start
    (after,) = ray.get(controller.check_now.remote())
    assert after.in_flight == 0  # both clients reported their last requests done


def test_killed_server_fails_over_to_the_restarted_endpoint(controller: Any) -> None:
    (info,) = ray.get(controller.replicas.remote("instant"))
    pid = serve.get_app_handle(info.replica_id).pid.remote().result()
    cfg = PoolConfig(request_timeout_s=60, max_retries=3)

    async def go() -> tuple[list[str], list[int]]:
        d = Dispatcher("instant", controller, cfg, client_id="failover")
        await d.refresh()  # the client knows the live endpoint; then its server dies under it
        os.kill(pid, signal.SIGKILL)
        out, tries = [], []
        for i in range(20):  # the first request meets the dead port; retries wait for the restarted replica
            res, attempts, _ = await d.submit(*_request(i))
            out.append(res.text)
            tries.append(attempts)
        await d.close()
        return out, tries

    texts, tries = asyncio.run(go())
    assert texts == [INSTANT_TEXT] * 20
    # the first request was sent to the dead port and answered by a retry; once failed over, one attempt each
    assert tries[0] >= 2 and tries[-1] == 1, tries
    wait_until(lambda: ray.get(controller.replicas.remote("instant"))[0].endpoint != info.endpoint, 120,
               "the restarted replica's endpoint")  # fmt: skip
    # the failure is on record for drivers to log: which replica, where, and the engine's log kept on its node
    (ev, *_) = [e for e in ray.get(controller.events.remote(0, ["instant"])) if e.replica_id == info.replica_id]
    assert ev.kind == "unhealthy" and ev.engine == "instant" and ev.node_id == info.node_id and ev.detail, ev
    assert ev.log is not None and ev.log.split(":", 1)[1].endswith(".log"), ev
