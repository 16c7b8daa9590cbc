"""Per-client request dispatch: health filter → circuit breaker → routing policy → capped, retried call.

Refill-style: a request is sent the moment a slot frees (callers await ``submit`` concurrently, the cap is enforced
here), so replicas stay saturated without batching on the client side. Recoverable failures retry on another
replica; a dead replica is reported to the controller and skipped until it is healthy again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from omnieval._config import PoolConfig
from omnieval.errors import ReplicaDead, RequestFailed
from pool._types import ReplicaInfo
from schedulers import AIMDLimiter, CircuitBreaker, ReplicaView, RoutingRequest, make_policy
from serving._types import GenerationRequest, GenerationResult

log = logging.getLogger("omnieval.pool")


class NoReplicaAvailable(ReplicaDead):
    """Every replica of the model is dead or tripped for longer than the request timeout."""


class Dispatcher:
    def __init__(self, model: str, controller: Any, cfg: PoolConfig, *, seed: int = 0) -> None:
        self.model = model
        self.controller = controller
        self.cfg = cfg
        self.policy = make_policy(cfg.routing, seed=seed)
        self.breaker = CircuitBreaker(failure_threshold=3, initial_backoff_s=1.0, max_backoff_s=30.0)
        self._replicas: dict[str, ReplicaInfo] = {}
        self._handles: dict[str, Any] = {}
        self._outstanding: dict[str, int] = {}
        self._limiters: dict[str, AIMDLimiter] = {}
        self._cond = asyncio.Condition()
        self._refresh_lock = asyncio.Lock()
        self._last_refresh = 0.0
        self.stats = {"sent": 0, "retries": 0, "failed": 0}

    async def refresh(self, force: bool = False) -> None:
        """Re-read the replica set (new replicas from scale-out, health changes)."""
        async with self._refresh_lock:  # concurrent callers wait for the one refresh instead of seeing no replicas
            now = time.monotonic()
            if not force and now - self._last_refresh < 1.0 and self._replicas:
                return
            self._last_refresh = now
            infos: list[ReplicaInfo] = await self.controller.replicas.remote(self.model)
            await self._apply(infos)

    async def _apply(self, infos: list[ReplicaInfo]) -> None:
        from ray import serve

        async with self._cond:
            self._replicas = {r.replica_id: r for r in infos}
            for rid in self._replicas:
                if rid not in self._handles:
                    self._handles[rid] = serve.get_app_handle(rid)
                    self._outstanding.setdefault(rid, 0)
                    cap = self.cfg.max_inflight_per_replica
                    self._limiters[rid] = AIMDLimiter(initial=cap, min_limit=1, max_limit=cap)
            for rid in list(self._handles):
                if rid not in self._replicas:
                    self._handles.pop(rid)
                    self.policy.remove_replica(rid)
            self._cond.notify_all()

    def model_identity(self) -> dict[str, str | None] | None:
        """What a cached response is keyed on; None until a replica has reported its weights and version."""
        for info in self._replicas.values():
            if info.state == "healthy":
                return {"fingerprint": info.fingerprint, "sha256": info.model_sha256, "engine": info.engine,
                        "engine_version": info.engine_version}  # fmt: skip
        return None

    def _candidates(self, exclude: set[str]) -> list[ReplicaView]:
        out = []
        for rid, info in self._replicas.items():
            if info.state != "healthy" or rid in exclude or not self.breaker.allow(rid):
                continue
            if self._outstanding[rid] >= self._limiters[rid].limit:
                continue
            out.append(ReplicaView(rid, self._outstanding[rid], info.queue_depth, True))
        return out

    async def _acquire(self, routing: RoutingRequest, exclude: set[str], deadline: float) -> str:
        while True:
            async with self._cond:
                cands = self._candidates(exclude)
                if not cands and exclude:
                    cands = self._candidates(set())  # every replica tried once: allow a repeat rather than fail
                if cands:
                    rid = self.policy.choose(cands, routing)[0]
                    self._outstanding[rid] += 1
                    self.policy.on_dispatch(rid, routing)
                    return rid
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    states = {r: i.state for r, i in self._replicas.items()}
                    raise NoReplicaAvailable(f"no routable replica of {self.model!r} (states {states})")
                try:  # woken by a finished request or a refresh; the timeout re-checks breakers and health
                    await asyncio.wait_for(self._cond.wait(), timeout=min(remaining, 1.0))
                except asyncio.TimeoutError:
                    pass
            await self.refresh()

    async def _release(self, rid: str) -> None:
        async with self._cond:
            self._outstanding[rid] = max(0, self._outstanding.get(rid, 1) - 1)
            self._cond.notify_all()

    async def submit(self, request: GenerationRequest, routing: RoutingRequest) -> tuple[GenerationResult, int]:
        """Result and number of attempts; raises the last error when retries are exhausted."""
        await self.refresh()
        tried: set[str] = set()
        attempts = 0
        last: Exception | None = None
        deadline = time.monotonic() + self.cfg.request_timeout_s * (self.cfg.max_retries + 1)
        while attempts <= self.cfg.max_retries:
            attempts += 1
            rid = await self._acquire(routing, tried, deadline)
            tried.add(rid)
            t0 = time.monotonic()
            try:
                resp = self._handles[rid].generate.remote(request)
                result: GenerationResult = await asyncio.wait_for(resp, timeout=self.cfg.request_timeout_s)
            except (RequestFailed, asyncio.TimeoutError) as e:
                last = e if isinstance(e, RequestFailed) else RequestFailed("timeout", timeout=True)
                self.breaker.record_failure(rid)
                self._limiters[rid].on_failure()
                self.policy.on_complete(rid, routing, False, time.monotonic() - t0)
                self.stats["retries"] += 1
                continue
            except Exception as e:  # noqa: BLE001 - ReplicaDead, RayActorError, Serve errors: replica unusable
                last = e
                log.warning("replica %s failed for %s: %r", rid, request.request_id, e)
                self.breaker.record_failure(rid)
                self._limiters[rid].on_failure()
                self.policy.on_complete(rid, routing, False, time.monotonic() - t0)
                await self.controller.report_failure.remote(rid)
                async with self._cond:
                    if rid in self._replicas:
                        self._replicas[rid].state = "unhealthy"
                self.stats["retries"] += 1
                continue
            finally:
                await self._release(rid)
            lat = time.monotonic() - t0
            self.breaker.record_success(rid)
            self._limiters[rid].on_success(lat)
            self.policy.on_complete(rid, routing, True, lat)
            self.stats["sent"] += 1
            return result, attempts
        self.stats["failed"] += 1
        assert last is not None
        raise last
