"""Replicas held inside the pool controller instead of a Serve application each: an external endpoint's, and an
engine server the driver pre-started (``is_inline``).

Why: an endpoint's replica owns no process and no weights; all it does is check the server and publish its ``Endpoint``,
and clients already send every request straight to that server over HTTP. As a Serve application it still cost a
Serve controller and a replica worker process to start (about 2 s of a run's start-up on 2 cores, the CPU lm-eval's
own preparation runs on) and their control loops for the whole run. Here the same ``EngineHost`` runs on one event
loop thread of the controller's process; a suite of endpoints only never starts Serve at all. An engine server the
driver started before Ray on this node is held the same way: its replica only owns that process, checks it and
publishes its ``Endpoint``; as a Serve replica, its worker and Serve's controller started on the 2 cores the engine
loaded on (a same-engine video run on a 2-core Xeon: 22.5 s held, 25.0-26.9 s as a Serve replica).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from omnieval.core import ModelConfig
from serving import EngineHost, EngineSpec, EngineStats

_T = TypeVar("_T")


def is_inline(cfg: ModelConfig) -> bool:
    """A model whose next replica the controller holds itself: an endpoint someone else runs, or an engine server
    (llama-server, vLLM's, an engine in a process of its own) that this run's driver pre-started on this node and
    still offers (``pool.prestart``). Either way clients send requests straight to the server over HTTP, and a Serve
    replica would only add a worker process and Serve's controller to start. A replacement (the offered server is
    taken or gone) is a Serve replica as usual, placed by the pool."""
    if cfg.source.kind == "endpoint":
        return True
    from serving import prestart_offered

    return prestart_offered(cfg.name)


def takes_resources(cfg: ModelConfig) -> bool:
    """Replicas that use this cluster's CPUs or GPUs (all but an external endpoint's), wherever they are held."""
    return cfg.source.kind != "endpoint"


class InlineReplicas:
    """The controller's endpoint replicas and the event loop their engines' HTTP clients live on."""

    def __init__(self) -> None:
        self._hosts: dict[str, EngineHost] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def _run(self, coro: Coroutine[Any, Any, _T], timeout_s: float) -> _T:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                threading.Thread(target=self._loop.run_forever, daemon=True, name="pool-inline").start()
            loop = self._loop
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout_s)

    def __contains__(self, replica_id: str) -> bool:
        return replica_id in self._hosts

    def start(self, spec: EngineSpec, timeout_s: float) -> EngineStats:
        """Build, start and first stats of the spec's replica (raises what the engine's start raises)."""
        host = EngineHost(spec)
        try:
            self._run(host.start(), timeout_s)
        except BaseException:
            try:
                self._run(host.engine.shutdown(), 30)  # its HTTP client, opened before the server refused
            except Exception:  # noqa: BLE001 - the start's own error is the one to raise
                pass
            raise
        self._hosts[spec.replica_id] = host
        return self.stats(spec.replica_id, timeout_s)

    def stats(self, replica_id: str, timeout_s: float) -> EngineStats:
        return self._run(self._hosts[replica_id].stats(), timeout_s)

    def remove(self, replica_id: str) -> None:
        host = self._hosts.pop(replica_id, None)
        if host is not None:
            self._run(host.engine.shutdown(), 30)
