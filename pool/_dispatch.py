"""Per-client request dispatch: health filter → circuit breaker → routing policy → adaptive limit → direct call.

A request goes straight to the replica's own OpenAI-compatible server over pooled HTTP connections (the replica
publishes its ``Endpoint``); replicas whose engine has no server are called through their Serve handle. How many
requests one replica may hold is decided by the controller from what every client observes (``GradientLimiter``);
this client takes an equal share and refills a slot the moment it frees. Recoverable failures retry on another
replica; a dead replica is reported to the controller and skipped until a health check passes again.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import math
import sys
import threading
import time
import uuid
from collections import deque
from typing import Any, overload

from omnieval.core import PoolConfig, ReplicaDead, RequestFailed, clip
from pool._http import HttpTransport
from pool._types import ReplicaInfo, ReplicaLoad, SyncRequest
from schedulers import CircuitBreaker, LimitWindow, ReplicaView, RoutingRequest, make_policy
from serving import (
    GenerationRequest,
    GenerationResult,
    ScoreRequest,
    ScoreResult,
    TokenizeRequest,
    TokenizeResult,
    ray_node_ip,
)

PoolRequest = GenerationRequest | ScoreRequest | TokenizeRequest
"""What a client sends a replica: generation, log-likelihood scoring, or tokenization with the served tokenizer."""

log = logging.getLogger("omnieval.pool")

SYNC_PERIOD_S = 0.2
"""How often an active client reports its load and fetches replica states and limits (off the request path)."""


UP_POLL_S = 30.0
"""Longest single wait on the controller for a replica to come up (the wait is renewed while requests wait)."""


def import_serve_soon() -> None:
    """Import Ray Serve's client side on a background thread of this process, once. A Serve handle's first call
    imported it on the event loop: 0.85 s on a 2-core node, after the replica was up, holding back every first
    request of a client (clients start seconds before the engines are loaded, so the import is done by then)."""
    if "ray.serve" not in sys.modules:
        threading.Thread(target=importlib.import_module, args=("ray.serve",), daemon=True, name="import-serve").start()


class NoReplicaAvailable(ReplicaDead):
    """Every replica of the model is dead or tripped for longer than the request timeout."""


class Dispatcher:
    def __init__(self, model: str, controller: Any, cfg: PoolConfig, *, seed: int = 0,
                 client_id: str | None = None, siblings: int = 1) -> None:  # fmt: skip
        import_serve_soon()  # the first Serve handle call must not import it on the request path
        self.model = model
        self.controller = controller
        self.cfg = cfg
        self.client_id = client_id or uuid.uuid4().hex[:12]
        self.siblings = siblings
        self.policy = make_policy(cfg.routing, seed=seed)
        self.breaker = CircuitBreaker(failure_threshold=3, initial_backoff_s=1.0, max_backoff_s=30.0)
        self.transport = HttpTransport(cfg.request_timeout_s, ray_node_ip())
        self._replicas: dict[str, ReplicaInfo] = {}
        self._handles: dict[str, Any] = {}
        self._outstanding: dict[str, int] = {}
        self._windows: dict[str, LimitWindow] = {}
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._refresh_lock = asyncio.Lock()
        self._bg: asyncio.Task[None] | None = None
        self._up_poll: asyncio.Task[None] | None = None
        self._last_refresh = 0.0
        self.stats = {"sent": 0, "retries": 0, "failed": 0, "direct_http": 0, "serve_handle": 0}

    # ---- replica set and limits ------------------------------------------------------------------------------
    async def refresh(self, force: bool = False) -> None:
        """Report load and re-read the replica set (scale-out, health, limits); at most every ``SYNC_PERIOD_S``."""
        async with self._refresh_lock:  # concurrent callers wait for the one sync instead of seeing no replicas
            if not force and self._replicas and time.monotonic() - self._last_refresh < SYNC_PERIOD_S:
                return
            await self._sync(active=True)

    def _sync_soon(self) -> None:
        """A sync in the background when one is due: the request path never waits on the controller."""
        if time.monotonic() - self._last_refresh >= SYNC_PERIOD_S and (self._bg is None or self._bg.done()):
            self._bg = asyncio.get_running_loop().create_task(self._background_sync())

    async def _background_sync(self) -> None:
        try:
            await self.refresh()
        except Exception as e:  # noqa: BLE001 - the next sync retries; requests keep the last known replica set
            log.warning("pool sync for %s failed: %r", self.model, e)

    async def _sync(self, active: bool) -> None:
        loads = []
        for rid, w in self._windows.items():
            n = self._outstanding.get(rid, 0)
            loads.append(ReplicaLoad(replica_id=rid, in_flight=n, peak_in_flight=max(w.peak_in_flight, n), ok=w.ok,
                                     failed=w.failed, latency_sum=w.latency_sum, output_tokens=w.output_tokens))  # fmt: skip
        self._windows = {rid: LimitWindow(peak_in_flight=self._outstanding.get(rid, 0)) for rid in self._windows}
        req = SyncRequest(model=self.model, client=self.client_id, active=active, loads=loads, siblings=self.siblings,
                          initial_limit=self.cfg.initial_inflight_per_replica,
                          max_limit=self.cfg.max_inflight_per_replica)  # fmt: skip
        infos: list[ReplicaInfo] = await self.controller.sync.remote(req)
        self._last_refresh = time.monotonic()
        self._apply(infos)

    def _watch_up(self, timeout_s: float) -> asyncio.Task[None]:
        """One long-poll on the controller per dispatcher, however many requests wait: when a replica this client
        has not seen turns healthy, the replica set is re-read and every request waiting for a slot re-checks."""
        if self._up_poll is None or self._up_poll.done():
            known = sorted(r for r, i in self._replicas.items() if i.state == "healthy")
            self._up_poll = asyncio.get_running_loop().create_task(self._poll_up(known, timeout_s))
        return self._up_poll

    async def _poll_up(self, known: list[str], timeout_s: float) -> None:
        try:
            if not await self.controller.wait_replica.remote(self.model, known, timeout_s):
                return
            await self.refresh(force=True)
        except Exception as e:  # noqa: BLE001 - the waits' own timeouts and periodic syncs still find the replica
            log.warning("waiting for a replica of %s failed: %r", self.model, e)
            return
        self._wake(len(self._waiters))

    async def replica_up(self, timeout_s: float) -> None:
        """Until a replica this client has not seen is healthy (and the replica set re-read), or ``timeout_s``
        (at most ``UP_POLL_S``: a caller waiting longer asks again)."""
        await asyncio.shield(self._watch_up(min(timeout_s, UP_POLL_S)))

    def _apply(self, infos: list[ReplicaInfo]) -> None:
        self._replicas = {r.replica_id: r for r in infos}
        for rid in self._replicas:
            self._outstanding.setdefault(rid, 0)
            self._windows.setdefault(rid, LimitWindow())
        for rid in [r for r in self._windows if r not in self._replicas]:
            self._windows.pop(rid)
            self._handles.pop(rid, None)
            self.policy.remove_replica(rid)
        self._wake(sum(max(0, self._cap(r) - self._outstanding[r]) for r in self._replicas) or 1)

    async def flush(self) -> None:
        """Report what is left and leave the model's client set (call when this client's work is done)."""
        async with self._refresh_lock:
            await self._sync(active=any(self._outstanding.values()))

    @property
    def idle(self) -> bool:
        """Nothing of this client's in flight."""
        return not any(self._outstanding.values())

    def _cap(self, rid: str) -> int:
        info = self._replicas[rid]
        return max(1, math.ceil(info.limit / max(1, info.clients)))

    def model_identity(self) -> dict[str, str | None] | None:
        """What a cached response is keyed on; None until a replica has reported its weights and version."""
        for info in self._replicas.values():
            if info.state == "healthy":
                return {"fingerprint": info.fingerprint, "sha256": info.model_sha256, "engine": info.engine,
                        "engine_version": info.engine_version}  # fmt: skip
        return None

    def prefix_token_id(self) -> int | None:
        """BOS (else EOS) of the served tokenizer, from a healthy replica; None when none reports one."""
        return next((i.prefix_token_id for i in self._replicas.values()
                     if i.state == "healthy" and i.prefix_token_id is not None), None)  # fmt: skip

    def tokenizer_dir(self) -> str | None:
        """The served tokenizer's checkpoint folder, from a healthy replica; None when none publishes one."""
        return next((i.tokenizer_dir for i in self._replicas.values()
                     if i.state == "healthy" and i.tokenizer_dir is not None), None)  # fmt: skip

    # ---- slots -----------------------------------------------------------------------------------------------
    def _candidates(self, exclude: set[str]) -> list[ReplicaView]:
        out = []
        for rid, info in self._replicas.items():
            if info.state != "healthy" or rid in exclude or not self.breaker.allow(rid):
                continue
            n = self._outstanding[rid]
            if n >= self._cap(rid):
                continue
            out.append(ReplicaView(rid, n, info.queue_depth, True))
        return out

    def _wake(self, n: int) -> None:
        while n > 0 and self._waiters:
            f = self._waiters.popleft()
            if not f.done():
                f.set_result(None)
                n -= 1

    async def _acquire(self, routing: RoutingRequest, exclude: set[str], deadline: float) -> str:
        loop = asyncio.get_running_loop()
        while True:
            cands = self._candidates(exclude)
            if not cands and exclude:
                cands = self._candidates(set())  # every replica tried once: allow a repeat rather than fail
            if cands:
                rid = self.policy.choose(cands, routing)[0]
                n = self._outstanding[rid] = self._outstanding[rid] + 1
                w = self._windows[rid]
                w.peak_in_flight = max(w.peak_in_flight, n)
                self.policy.on_dispatch(rid, routing)
                return rid
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                states = {r: i.state for r, i in self._replicas.items()}
                raise NoReplicaAvailable(f"no routable replica of {self.model!r} (states {states})")
            fut: asyncio.Future[None] = loop.create_future()
            self._waiters.append(fut)
            if not any(i.state == "healthy" for i in self._replicas.values()):
                self._watch_up(min(remaining, UP_POLL_S))  # the first replica up wakes this wait at once
            try:  # woken by a finished request, a sync or a replica up; the timeout re-checks breakers and health
                await asyncio.wait_for(fut, timeout=min(remaining, 1.0))
            except asyncio.TimeoutError:
                await self.refresh()

    def _release(self, rid: str) -> None:
        self._outstanding[rid] = max(0, self._outstanding.get(rid, 1) - 1)
        self._wake(1)

    def _handle(self, rid: str) -> Any:
        h = self._handles.get(rid)
        if h is None:
            from ray import serve

            h = self._handles[rid] = serve.get_app_handle(rid)
        return h

    # ---- requests --------------------------------------------------------------------------------------------
    async def _call(self, rid: str, request: Any) -> Any:
        info = self._replicas.get(rid)
        if info is not None and info.endpoint is not None:
            self.stats["direct_http"] += 1
            if isinstance(request, ScoreRequest):
                return await self.transport.score(info.endpoint, request, rid)
            if isinstance(request, TokenizeRequest):
                return await self.transport.tokenize(info.endpoint, request, rid)
            return await self.transport.chat(info.endpoint, request, rid)
        self.stats["serve_handle"] += 1
        h = self._handle(rid)
        method = (
            h.score
            if isinstance(request, ScoreRequest)
            else h.tokenize
            if isinstance(request, TokenizeRequest)
            else h.generate
        )
        return await asyncio.wait_for(method.remote(request), timeout=self.cfg.request_timeout_s)

    @overload
    async def submit(
        self, request: GenerationRequest, routing: RoutingRequest
    ) -> tuple[GenerationResult, int, float]: ...
    @overload
    async def submit(self, request: ScoreRequest, routing: RoutingRequest) -> tuple[ScoreResult, int, float]: ...
    @overload
    async def submit(self, request: TokenizeRequest, routing: RoutingRequest) -> tuple[TokenizeResult, int, float]: ...

    async def submit(self, request: PoolRequest, routing: RoutingRequest) -> tuple[Any, int, float]:
        """Result, number of attempts and when the first attempt was sent (monotonic; the wait for a slot before
        it is queueing, not latency); raises the last error when retries are exhausted."""
        if not self._replicas:
            await self.refresh()
        else:
            self._sync_soon()
        tried: set[str] = set()
        attempts = 0
        last: Exception | None = None
        deadline = time.monotonic() + self.cfg.request_timeout_s * (self.cfg.max_retries + 1)
        first = 0.0
        while attempts <= self.cfg.max_retries:
            attempts += 1
            rid = await self._acquire(routing, tried, deadline)
            tried.add(rid)
            t0 = time.monotonic()
            first = first or t0
            try:
                result = await self._call(rid, request)
            except (RequestFailed, asyncio.TimeoutError) as e:
                last = e if isinstance(e, RequestFailed) else RequestFailed("timeout", timeout=True)
                self._failed(rid, routing, t0)
                continue
            except Exception as e:  # noqa: BLE001 - ReplicaDead, RayActorError, Serve errors: replica unusable
                last = e
                log.warning("replica %s failed for %s: %r", rid, request.request_id, e)
                self._failed(rid, routing, t0)
                if rid in self._replicas:
                    self._replicas[rid].state = "unhealthy"
                await self.controller.report_failure.remote(rid, clip(repr(e), 500))
                continue
            finally:
                self._release(rid)
            lat = time.monotonic() - t0
            self.breaker.record_success(rid)
            self.policy.on_complete(rid, routing, True, lat)
            w = self._windows.get(rid)
            if w is not None:
                w.ok += 1
                w.latency_sum += lat / (1 + result.completion_tokens)
                w.output_tokens += result.completion_tokens
            self.stats["sent"] += 1
            return result, attempts, first
        self.stats["failed"] += 1
        assert last is not None
        raise last

    def _failed(self, rid: str, routing: RoutingRequest, t0: float) -> None:
        self.breaker.record_failure(rid)
        self.policy.on_complete(rid, routing, False, time.monotonic() - t0)
        w = self._windows.get(rid)
        if w is not None:
            w.failed += 1
        self.stats["retries"] += 1

    async def close(self) -> None:
        await self.transport.close()
