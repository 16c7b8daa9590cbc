"""One engine and what a replica reports of it, whoever hosts it: a Serve replica (``EngineReplica``) or, for an
external endpoint, the pool controller itself (``pool._inline``)."""

from __future__ import annotations

import logging
import os
import time

from serving._cpu import node_cpu_s, process_tree_cpu_s
from serving._types import EngineSpec, EngineStats

log = logging.getLogger("omnieval.serving")


class EngineHost:
    """Builds and starts the spec's engine; ``stats`` is what the pool's health checks and samplers read."""

    def __init__(self, spec: EngineSpec) -> None:
        from serving._factory import build_engine

        self.spec = spec
        self._t0 = time.monotonic()
        self.engine, path = build_engine(spec.engine_target, replica_id=spec.replica_id, model=spec.model,
                                         source=spec.source, engine_kwargs=spec.engine_kwargs)  # fmt: skip
        self._weights = path
        self._path = str(path) if path else None
        self._sha: str | None = None
        self._load_s: float | None = None
        self._prestarted = False
        self._node_id: str | None = None

    async def start(self) -> None:
        import ray

        from omnieval.core import path_sha256

        await self.engine.start()
        self._load_s = time.monotonic() - self._t0
        self._prestarted = bool(getattr(self.engine, "prestarted", False))
        spawned = getattr(self.engine, "spawned_at", None)
        if self._prestarted and spawned is not None:  # its load began before this replica: count it from there
            self._load_s = max(self._load_s, time.time() - spawned)
        self._node_id = ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
        self._sha = path_sha256(self._weights) if self._weights and self._weights.exists() else None
        log.info("replica %s ready on node %s", self.spec.replica_id, self._node_id)

    async def stats(self) -> EngineStats:
        s = await self.engine.poll_stats()
        s.node_id = self._node_id
        s.load_s = self._load_s
        s.prestarted = self._prestarted
        s.engine_version = self.engine.version()
        s.model_path = self._path
        s.model_sha256 = self._sha
        s.healthy = await self.engine.check_health()
        s.endpoint = self.engine.endpoint()
        s.log = self.engine.log_location()  # after the health check: a dead server's log has been kept by then
        pid = getattr(self.engine, "pid", None)
        if pid is None and s.endpoint is None:  # an in-process engine: this replica's process is the engine
            pid = os.getpid()
        s.cpu_s = process_tree_cpu_s(pid) if pid is not None else None
        s.node_cpu_s, s.node_cpus = node_cpu_s(), os.cpu_count()
        if not s.healthy:
            s.health_detail = self.engine.log_tail(5) or None
        return s
