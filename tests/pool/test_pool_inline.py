"""An external endpoint's replica is held by the pool controller itself (``pool._inline``): no Serve application
and no Serve controller, requests straight to the server, health checks that see the server go and come back, and a
start that fails on an unreachable server with the replica named."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
import ray
from testlib.pool import stop_pool

from omnieval.core import GenerationOptions, ModelConfig, PoolConfig, ReplicaDead
from omnieval.perf._alone import spawn_instant, wait_ready
from pool import Dispatcher, get_controller
from schedulers import RoutingRequest
from serving import GenerationRequest, free_port
from serving._instant import INSTANT_TEXT

pytestmark = [pytest.mark.ray]


def _model(name: str, base: str, replicas: int = 1) -> ModelConfig:
    return ModelConfig(name=name, engine="openai", replicas=replicas, source={"kind": "endpoint", "base_url": base})


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    port = free_port()
    proc = spawn_instant(port)
    wait_ready(f"http://127.0.0.1:{port}/v1")
    yield proc, port
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def controller() -> Iterator[Any]:
    ray.init(num_cpus=2, namespace="omnieval", include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    ctl = get_controller(1.0)
    try:
        yield ctl
    finally:
        stop_pool(ctl)


def _serve_running() -> bool:
    return any(a["name"] == "SERVE_CONTROLLER_ACTOR" for a in ray.util.list_named_actors(all_namespaces=True))


def test_endpoint_replica_needs_no_serve_and_requests_go_direct(controller: Any, server: Any) -> None:
    _, port = server
    # 3 replicas of 1 CPU each on a 2-CPU Ray: an endpoint's replicas reserve nothing
    ray.get(controller.ensure_model.remote(_model("ext", f"http://127.0.0.1:{port}/v1", replicas=3), "inline-test"))
    infos = ray.get(controller.replicas.remote("ext"))
    assert len(infos) == 3 and all(i.inline and i.state == "healthy" and i.endpoint is not None for i in infos)
    info = infos[0]
    assert info.endpoint is not None and info.endpoint.base_url == f"http://127.0.0.1:{port}/v1"
    assert not _serve_running(), "an endpoint-only pool started Ray Serve"

    async def go() -> Dispatcher:
        d = Dispatcher("ext", controller, PoolConfig(), seed=0, client_id="inline-0")
        reqs = [(GenerationRequest(request_id=f"r{i}", messages=[{"role": "user", "content": f"item {i}"}],
                                   options=GenerationOptions(max_tokens=3)),
                 RoutingRequest(model="ext", prompt_text=f"item {i}", est_tokens=3)) for i in range(40)]  # fmt: skip
        results = await asyncio.gather(*(d.submit(*r) for r in reqs))
        assert all(r.text == INSTANT_TEXT for r, _, _ in results)
        await d.flush()
        await d.close()
        return d

    d = asyncio.run(go())
    assert d.stats["direct_http"] == 40 and d.stats["serve_handle"] == 0
    stats = ray.get(controller.inline_stats.remote([info.replica_id, "no-such-replica"]))
    assert list(stats) == [info.replica_id] and stats[info.replica_id].healthy
    assert not _serve_running()


def test_health_follows_the_server_and_release_retires_the_replica(controller: Any) -> None:
    port = free_port()
    proc = spawn_instant(port)
    wait_ready(f"http://127.0.0.1:{port}/v1")
    try:
        ray.get(controller.ensure_model.remote(_model("ext2", f"http://127.0.0.1:{port}/v1"), "inline-health"))
        (info,) = ray.get(controller.replicas.remote("ext2"))
        proc.terminate()
        proc.wait(timeout=10)
        (after,) = [i for i in ray.get(controller.check_now.remote()) if i.replica_id == info.replica_id]
        assert after.state == "unhealthy"
        events = ray.get(controller.events.remote(0, ["ext2"]))
        assert [(e.kind, e.replica_id) for e in events] == [("unhealthy", info.replica_id)]
        proc = spawn_instant(port)  # the same server back on its port
        wait_ready(f"http://127.0.0.1:{port}/v1")
        (back,) = [i for i in ray.get(controller.check_now.remote()) if i.replica_id == info.replica_id]
        assert back.state == "healthy"
        ray.get(controller.release.remote("inline-health"))
        assert ray.get(controller.replicas.remote("ext2")) == []
        assert info.replica_id in ray.get(controller.retired.remote())
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_unreachable_endpoint_fails_its_start_with_the_replica_named(controller: Any) -> None:
    base = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    t0 = time.monotonic()
    with pytest.raises(ReplicaDead, match=r"replica ext3-r\d+-\w+ failed to start: .*unreachable"):
        ray.get(controller.ensure_model.remote(_model("ext3", base), "inline-dead"))
    assert time.monotonic() - t0 < 30
    assert ray.get(controller.replicas.remote("ext3")) == []
    events = ray.get(controller.events.remote(0, ["ext3"]))
    assert events and events[0].kind == "start_failed"


def test_held_are_endpoints_and_servers_the_driver_still_offers(tmp_path: Any,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A pre-started engine server (here an engine in a process of its own) is held by the controller only while
    this run's driver still offers it (a replacement, once it is taken or gone, is a Serve replica); an endpoint
    always; a model the driver pre-started nothing for never. Only the endpoint takes no cluster resources."""
    import socket

    from pool._inline import is_inline, takes_resources
    from serving._prestart import ENV_DIR, _slot, supported

    def tf(name: str, **kw: Any) -> ModelConfig:
        return ModelConfig(name=name, engine="transformers", source={"kind": "path", "path": str(tmp_path)},
                           engine_kwargs=kw)  # fmt: skip

    own, inproc, ep = tf("vlm", process="own"), tf("plain"), _model("judge", "http://127.0.0.1:9/v1")
    monkeypatch.setenv(ENV_DIR, str(tmp_path))
    assert is_inline(ep) and not is_inline(own) and not is_inline(inproc)  # nothing offered yet
    if not supported():
        pytest.skip("pre-start needs pidfds (Linux 5.3+)")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp_path / _slot("vlm", 0)))  # what the driver's PrestartSet offers
    try:
        assert is_inline(own) and not is_inline(inproc) and not is_inline(tf("other", process="own"))  # by model
    finally:
        listener.close()
        (tmp_path / _slot("vlm", 0)).unlink()  # taken
    assert not is_inline(own)
    assert takes_resources(own) and takes_resources(inproc) and not takes_resources(ep)
