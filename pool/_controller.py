"""The pool controller: one named Ray actor per cluster that owns replica lifecycle and health.

Suites running at the same time on one cluster get the same controller, so identical model specs share replicas
(their requests are batched together by the same engines). Replicas are released when their last user finishes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from typing import Any

import ray

from pool._types import ReplicaInfo

log = logging.getLogger("omnieval.pool")

CONTROLLER_NAME = "omnieval-pool"
NAMESPACE = "omnieval"


def fingerprint(model_cfg: dict[str, Any]) -> str:
    key = {k: model_cfg.get(k) for k in ("source", "engine", "engine_kwargs", "resources")}
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:12]


@ray.remote(num_cpus=0, max_concurrency=64)
class PoolController:
    """Threaded actor: deploys are blocking Serve calls, health checks run on their own thread."""

    def __init__(self, health_check_period_s: float = 5.0) -> None:
        self._lock = threading.RLock()
        self._replicas: dict[str, ReplicaInfo] = {}
        self._models: dict[str, dict[str, Any]] = {}  # model name -> config dict
        self._users: dict[str, set[str]] = {}  # model name -> run ids
        self._period = health_check_period_s
        self._stop = threading.Event()
        self._counter = 0
        threading.Thread(target=self._health_loop, daemon=True, name="pool-health").start()

    # ---- lifecycle -------------------------------------------------------------------------------------------
    def ensure_model(self, model_cfg: dict[str, Any], run_id: str) -> list[ReplicaInfo]:
        """Make sure ``model_cfg['replicas']`` healthy replicas of this exact spec exist; register the run."""
        name = model_cfg["name"]
        fp = fingerprint(model_cfg)
        with self._lock:
            old = self._models.get(name)
            if old is not None and fingerprint(old) != fp and self._users.get(name):
                raise ValueError(
                    f"model {name!r} is already served with a different spec by runs {sorted(self._users[name])}; "
                    "give this model another name"
                )
            self._models[name] = model_cfg
            self._users.setdefault(name, set()).add(run_id)
            have = [r for r in self._replicas.values() if r.model == name and r.fingerprint == fp and r.state != "dead"]
            missing = max(0, int(model_cfg.get("replicas", 1)) - len(have))
        for _ in range(missing):
            self.add_replica(name)
        return self.replicas(name)

    def add_replica(self, model: str, node_id: str | None = None) -> ReplicaInfo:
        from cluster import replica_actor_options
        from serving import ENGINES
        from serving._deployment import EngineReplica
        from ray import serve

        with self._lock:
            cfg = self._models[model]
            self._counter += 1
            rid = f"{model}-r{self._counter}-{fingerprint(cfg)[:6]}"
            info = ReplicaInfo(replica_id=rid, model=model, fingerprint=fingerprint(cfg), engine=cfg["engine"])
            self._replicas[rid] = info
        spec = {
            "replica_id": rid,
            "model": model,
            "engine": cfg["engine"],
            "engine_target": str(ENGINES.target(cfg["engine"])),
            "source": cfg["source"],
            "engine_kwargs": cfg.get("engine_kwargs", {}),
        }
        options = replica_actor_options(cfg.get("resources", {}), node_id=node_id)
        try:
            app = EngineReplica.options(name="EngineReplica", ray_actor_options=options).bind(spec)
            serve.run(app, name=rid, route_prefix=None)
            stats = serve.get_app_handle(rid).stats.remote().result(timeout_s=60)
        except Exception:
            with self._lock:
                self._replicas.pop(rid, None)
            try:
                serve.delete(rid, _blocking=False)
            except Exception:  # noqa: BLE001 - best-effort cleanup of a failed deploy
                pass
            raise
        with self._lock:
            info.state = "healthy"
            self._apply_stats(info, stats)
        log.info("replica %s healthy (node %s)", rid, info.node_id)
        return info

    def remove_replica(self, replica_id: str) -> None:
        from ray import serve

        with self._lock:
            info = self._replicas.pop(replica_id, None)
        if info is not None:
            serve.delete(replica_id)

    def release(self, run_id: str) -> list[str]:
        """Drop the run; replicas of models with no remaining user are deleted. Returns removed replica ids."""
        removed: list[str] = []
        with self._lock:
            idle = []
            for model, users in self._users.items():
                users.discard(run_id)
                if not users:
                    idle.append(model)
            for model in idle:
                self._users.pop(model, None)
                self._models.pop(model, None)
                removed += [rid for rid, r in self._replicas.items() if r.model == model]
        for rid in removed:
            self.remove_replica(rid)
        return removed

    # ---- queries ---------------------------------------------------------------------------------------------
    def replicas(self, model: str | None = None) -> list[ReplicaInfo]:
        with self._lock:
            return [r.model_copy() for r in self._replicas.values() if model is None or r.model == model]

    def users(self) -> dict[str, list[str]]:
        with self._lock:
            return {m: sorted(u) for m, u in self._users.items()}

    def report_failure(self, replica_id: str) -> None:
        """A client saw the replica die: stop routing to it until a health check passes again."""
        with self._lock:
            r = self._replicas.get(replica_id)
            if r is not None and r.state == "healthy":
                r.state = "unhealthy"

    def models(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return dict(self._models)

    # ---- health ----------------------------------------------------------------------------------------------
    def _apply_stats(self, info: ReplicaInfo, stats: Any) -> None:
        info.node_id = stats.node_id
        info.queue_depth = stats.queue_depth
        info.in_flight = stats.in_flight
        info.slots = stats.slots
        info.engine_version = stats.engine_version
        info.model_path = stats.model_path
        info.model_sha256 = stats.model_sha256

    def check_now(self) -> list[ReplicaInfo]:
        """One health pass over every replica (the loop calls it; tests and the driver may too)."""
        from ray import serve

        for info in self.replicas():
            if info.state in ("starting", "dead"):
                continue
            try:
                stats = serve.get_app_handle(info.replica_id).stats.remote().result(timeout_s=10)
                ok = bool(stats.healthy)
            except Exception as e:  # noqa: BLE001 - any failure to answer is a failed check
                log.warning("health check of %s failed: %r", info.replica_id, e)
                ok, stats = False, None
            with self._lock:
                cur = self._replicas.get(info.replica_id)
                if cur is None:
                    continue
                if ok:
                    cur.state, cur.failures = "healthy", 0
                    self._apply_stats(cur, stats)
                else:
                    cur.failures += 1
                    cur.state = "unhealthy"
        return self.replicas()

    def _health_loop(self) -> None:
        while not self._stop.wait(self._period):
            try:
                self.check_now()
            except Exception as e:  # noqa: BLE001 - the loop must survive a transient Serve error
                log.warning("health pass failed: %r", e)

    def shutdown(self) -> None:
        self._stop.set()
        for rid in list(self._replicas):
            self.remove_replica(rid)


def get_controller(health_check_period_s: float = 5.0, create: bool = True) -> Any:
    """The cluster's controller (detached, so concurrent suites from other drivers share it)."""
    if not create:
        return ray.get_actor(CONTROLLER_NAME, namespace=NAMESPACE)
    return PoolController.options(
        name=CONTROLLER_NAME, namespace=NAMESPACE, lifetime="detached", get_if_exists=True
    ).remote(health_check_period_s)
