"""Requests waiting for a model's first replica start the moment it is healthy: the controller's ``wait_replica``
answers when a replica turns healthy, and a dispatcher's waiting requests share one such wait."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from omnieval.core import PoolConfig
from pool._controller import PoolController
from pool._dispatch import Dispatcher
from pool._types import ReplicaInfo
from schedulers import RoutingRequest


def _controller() -> Any:
    # the actor's own class, in process: its health and autoscale threads idle for an hour and find no replica
    return PoolController.__ray_metadata__.modified_class(3600.0)  # type: ignore[attr-defined]


def _info(rid: str, state: str) -> ReplicaInfo:
    return ReplicaInfo(replica_id=rid, model="m", fingerprint="f", engine="transformers", state=state, slots=8, limit=8)


def test_wait_replica_answers_when_a_replica_turns_healthy_and_times_out_otherwise() -> None:
    c = _controller()
    c._replicas["m-r1"] = _info("m-r1", "starting")
    c._replicas["x-r1"] = _info("x-r1", "healthy").model_copy(update={"model": "x"})  # another model's
    assert c.wait_replica("m", [], 0.05) is False

    def up() -> None:  # as ``_add_replica`` marks a started replica
        with c._capacity:
            c._capacity.notify_all()
            c._replicas["m-r1"].state = "healthy"

    t = threading.Timer(0.2, up)
    t.start()
    assert c.wait_replica("m", [], 600.0) is True  # the notification, not the timeout, ended the wait
    t.join()
    assert c.wait_replica("m", [], 0.0) is True  # already up
    assert c.wait_replica("m", ["m-r1"], 0.05) is False  # the caller knows it: waits for another
    c._stop.set()  # a controller shutting down ends every wait
    assert c.wait_replica("m", ["m-r1"], 600.0) is False


class _Remote:
    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def remote(self, *args: Any) -> Any:
        return self.fn(*args)


class _FakeController:
    """The two calls a dispatcher makes while it waits: ``sync`` returns the replica set, ``wait_replica`` blocks
    until the test brings a replica up."""

    def __init__(self) -> None:
        self.replicas: list[ReplicaInfo] = [_info("m-r1", "starting")]
        self.syncs = 0
        self.waits = 0
        self.up = asyncio.Event()
        self.sync = _Remote(self._sync)
        self.wait_replica = _Remote(self._wait)

    async def _sync(self, req: Any) -> list[ReplicaInfo]:
        self.syncs += 1
        return [r.model_copy() for r in self.replicas]

    async def _wait(self, model: str, known: list[str], timeout_s: float) -> bool:
        self.waits += 1
        await self.up.wait()
        return True


def test_waiting_requests_share_one_wait_and_go_when_the_replica_is_up() -> None:
    async def main() -> None:
        ctl = _FakeController()
        d = Dispatcher("m", ctl, PoolConfig())
        await d.refresh(force=True)
        routing = RoutingRequest(model="m", prompt_text="hi", est_tokens=1)
        loop = asyncio.get_running_loop()
        waiting = [asyncio.ensure_future(d._acquire(routing, set(), loop.time() + 600)) for _ in range(6)]
        await asyncio.sleep(0.05)
        assert not any(w.done() for w in waiting) and ctl.waits == 1  # one long-poll, however many requests
        syncs = ctl.syncs
        ctl.replicas = [_info("m-r1", "healthy")]
        ctl.up.set()
        got = await asyncio.wait_for(asyncio.gather(*waiting), timeout=0.5)  # before the 1 s re-sync
        assert got == ["m-r1"] * 6 and ctl.syncs == syncs + 1  # the one re-read the wait's answer asked for

    asyncio.run(main())


def test_a_dispatcher_imports_serve_off_the_request_path() -> None:
    """A Serve handle's first call imported ``ray.serve`` on the client's event loop (0.85 s on 2 cores) after the
    replica was up, holding back every first request; a dispatcher starts that import in the background when it is
    made, which is before its model's replicas are loaded. A fresh interpreter, as a client actor's process is."""
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys, threading\n"
        "from omnieval.core import PoolConfig\n"
        "from pool._dispatch import Dispatcher\n"
        "assert 'ray.serve' not in sys.modules, 'imported already: the test shows nothing'\n"
        "Dispatcher('m', None, PoolConfig())\n"
        "assert [t for t in threading.enumerate() if t.name == 'import-serve'], 'no background import'\n"
        "[t.join() for t in threading.enumerate() if t.name == 'import-serve']\n"
        "assert 'ray.serve' in sys.modules\n"
    )
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
