"""The pool controller: one named Ray actor per cluster that owns replica lifecycle, placement, health and scaling.

Suites running at the same time on one cluster get the same controller, so identical model specs share replicas
(their requests are batched together by the same engines). Replicas are released when their last user finishes.
Placement is checked before deploying (an impossible replica fails at once with each node's reason, a feasible one
waits a bounded time for room), and an autoscale thread adds replicas onto nodes with free capacity — including
nodes that join during a run — while the model's replicas are saturated (see ``pool._autoscaler``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections import deque
from typing import Any, Literal

import ray
from pydantic import BaseModel, ConfigDict

from omnieval.core import ModelConfig, PlacementError, ReplicaDead, clip
from pool._autoscaler import ScaleResult, plan_scaling
from pool._burst import StartBurst
from pool._inline import InlineReplicas, is_inline, takes_resources
from pool._types import ReplicaEvent, ReplicaInfo, ReplicaLoad, SyncRequest
from schedulers import GradientLimiter, LimitWindow
from serving import EngineSpec, EngineStats

log = logging.getLogger("omnieval.pool")

CONTROLLER_NAME = "omnieval-pool"
NAMESPACE = "omnieval"
MAX_RETIRED = 256
"""Final stats of this many removed replicas are kept for inspection (tests, run provenance)."""
MAX_EVENTS = 512
"""Replica failure events kept for drivers to read (``events``)."""
CLIENT_TTL_S = 3.0
"""A client that has not synced for this long no longer takes a share of a model's replicas (nor counts in flight)."""
SIBLING_HINT_S = 1.0
"""How long a model's limit is split among all the run's clients (``SyncRequest.siblings``) before only those that
reported work for it count: long enough for every client handed its first chunks to sync (every 0.2 s), short enough
that a model whose few Records went to one client (11 audio samples in one chunk of 16) gets the replica's whole
limit, not half of it for the whole run."""


def fingerprint(model: ModelConfig) -> str:
    """What makes two replicas interchangeable: the same weights, engine, engine options and resources."""
    key = model.model_dump(mode="json", include={"source", "engine", "engine_kwargs", "resources"})
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:12]


class RetiredReplica(BaseModel):
    """A removed replica with its last engine stats (what it served, peak concurrency) and when it went."""

    model_config = ConfigDict(extra="forbid")
    info: ReplicaInfo
    """Registry entry at removal."""
    stats: EngineStats | None
    """Engine stats fetched just before deletion (None if it no longer answered)."""
    removed_at: float
    """Epoch seconds of deletion."""


@ray.remote(num_cpus=0, max_concurrency=64, concurrency_groups={"waits": 256})  # type: ignore[call-overload]  # ray.remote is overloaded for functions
class PoolController:
    """Threaded actor: deploys are blocking Serve calls; health checks and autoscaling run on their own threads;
    clients waiting for a replica block in the ``waits`` group, never on the threads syncs and deploys need."""

    def __init__(
        self,
        health_check_period_s: float = 5.0,
        *,
        autoscale_period_s: float | None = None,
        scale_in_idle_s: float = 60.0,
        placement_wait_s: float = 30.0,
        deploy_timeout_s: float = 900.0,
    ) -> None:
        self._lock = threading.RLock()
        self._capacity = threading.Condition(self._lock)  # notified when a replica's resources are freed
        self._replicas: dict[str, ReplicaInfo] = {}
        self._models: dict[str, ModelConfig] = {}
        self._users: dict[str, set[str]] = {}  # model name -> run ids
        self._model_locks: dict[str, threading.Lock] = {}  # serialises scaling of one model
        self._reservations: dict[str, tuple[str, dict[str, float]]] = {}  # starting rid -> (node id, resources)
        self._idle_since: dict[str, float] = {}
        self._drained_at: dict[str, float] = {}
        self._retired: dict[str, RetiredReplica] = {}
        self._limiters: dict[str, GradientLimiter] = {}  # replica id -> its concurrency limit, shared by all clients
        self._client_seen: dict[str, dict[str, float]] = {}  # model -> client -> last active sync
        self._siblings: dict[str, int] = {}  # client -> how many clients its run started
        self._sibling_hint_until: dict[str, float] = {}  # model -> until when ``_siblings`` splits its limit
        self._client_inflight: dict[str, dict[str, int]] = {}  # replica id -> client -> in flight at its last sync
        self._engine_inflight: dict[str, int] = {}  # replica id -> in flight as the engine reported it
        self._served: dict[str, EngineStats] = {}  # replica id -> what clients observed it serve (direct HTTP too)
        self._last_report: dict[tuple[str, str], float] = {}  # (client, replica) -> time of that client's last sync
        self._busy_until: dict[str, float] = {}  # replica id -> end of the busy time already counted
        self._leases: dict[str, tuple[float, float]] = {}  # run id -> (last heartbeat, grace s), runs that send them
        self._events: deque[ReplicaEvent] = deque(maxlen=MAX_EVENTS)
        self._runtime_envs: dict[str, dict[str, Any]] = {}  # model -> runtime env of its replicas
        self._event_seq = 0
        self._period = health_check_period_s
        self._autoscale_period = autoscale_period_s or health_check_period_s
        self._idle_s = scale_in_idle_s
        self._placement_wait_s = placement_wait_s
        self._deploy_timeout_s = deploy_timeout_s
        self._stop = threading.Event()
        self._counter = 0
        self._serve_started = False
        self._serve_lock = threading.Lock()
        self._inline = InlineReplicas()  # endpoint replicas: no Serve application (``pool._inline``)
        self._ended_starts: dict[str, None] = {}  # start ids of ensure_model calls that have returned (insertion order)
        self._bursts: dict[str, StartBurst] = {}  # model -> its replicas starting together (``pool._burst``)
        threading.Thread(target=self._health_loop, daemon=True, name="pool-health").start()
        threading.Thread(target=self._autoscale_loop, daemon=True, name="pool-autoscale").start()

    # ---- lifecycle -------------------------------------------------------------------------------------------
    def ensure_model(
        self,
        model_cfg: ModelConfig,
        run_id: str,
        runtime_env: dict[str, Any] | None = None,
        parallel: bool = True,
        start_id: str | None = None,
    ) -> list[ReplicaInfo]:
        """Make sure ``model_cfg.replicas`` healthy replicas of this exact spec exist; register the run.

        ``runtime_env`` (the run's env vars, working_dir, py_modules) goes to the replicas this call starts, and to
        later scale-outs of the model: Serve deployments do not inherit the driver's job env. A spec no node fits, or
        more replicas than the cluster could ever hold, raises ``PlacementError`` before any replica is deployed.
        The missing replicas start at once (``parallel``; one after another for a node too small to load two
        engines together); the first failure is raised after the others settle (those that came up stay).
        ``wait_healthy(start_id=...)`` says when the first one is up, or that this call ended without one.
        """
        try:
            return self._ensure_model(model_cfg, run_id, runtime_env, parallel)
        finally:
            if start_id is not None:
                with self._capacity:
                    self._ended_starts[start_id] = None
                    while len(self._ended_starts) > MAX_EVENTS:
                        del self._ended_starts[next(iter(self._ended_starts))]
                    self._capacity.notify_all()

    def _ensure_model(
        self, model_cfg: ModelConfig, run_id: str, runtime_env: dict[str, Any] | None, parallel: bool
    ) -> list[ReplicaInfo]:
        from cluster import check_replicas, demand_of

        if not isinstance(model_cfg, ModelConfig):  # the typed config crosses the actor boundary, not a dict
            raise TypeError(f"ensure_model takes a ModelConfig, got {type(model_cfg).__name__}")
        name = model_cfg.name
        if takes_resources(model_cfg):  # an endpoint's replicas take no cluster resources
            check_replicas(demand_of(model_cfg), model_cfg.replicas, name)
        if runtime_env:
            with self._lock:
                self._runtime_envs[name] = dict(runtime_env)
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
            model_lock = self._model_locks.setdefault(name, threading.Lock())
        with model_lock:  # two suites ensuring the same model at once must not both add the missing replicas
            with self._lock:
                have = [
                    r for r in self._replicas.values() if r.model == name and r.fingerprint == fp and r.state != "dead"
                ]
                missing = max(0, model_cfg.replicas - len(have))
            self._start_replicas(name, missing, parallel)
        return self.replicas(name)

    def _start_replicas(self, model: str, n: int, parallel: bool) -> None:
        """``n`` replicas of ``model``, each deploy on its own thread when ``parallel`` (a deploy is mostly waiting
        for the engine to load: N replicas one after another took N loads before the last served)."""
        if n <= 1 or not parallel:
            for _ in range(n):
                self._add_replica(model, None, self._placement_wait_s)
            return
        with self._lock:
            burst = self._bursts[model] = StartBurst(started_at=time.monotonic())
        try:
            self._start_burst(model, n)
        finally:
            with self._lock:
                if self._bursts.get(model) is burst:
                    del self._bursts[model]

    def _start_burst(self, model: str, n: int) -> None:
        errors: list[BaseException] = []

        def one() -> None:
            try:
                self._add_replica(model, None, self._placement_wait_s)
            except BaseException as e:  # noqa: BLE001 - raised below, after the other deploys settle
                errors.append(e)

        threads = [threading.Thread(target=one, daemon=True, name=f"pool-start-{model}-{i}") for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    def wait_healthy(self, model: str, start_id: str, n: int = 1, timeout_s: float = 900.0) -> int:
        """Block until ``n`` replicas of ``model`` are healthy, or the ``ensure_model`` call of ``start_id`` has
        ended (either may come first: the two calls race); returns how many are healthy. A run dispatches from
        the first healthy replica while the others load."""
        deadline = time.monotonic() + timeout_s

        def healthy() -> int:
            return sum(1 for r in self._replicas.values() if r.model == model and r.state == "healthy")

        with self._capacity:
            while (h := healthy()) < n and start_id not in self._ended_starts:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._capacity.wait(timeout=remaining)  # notified when a replica comes up, fails or is removed
            return h

    def add_replica(self, model: str, node_id: str | None = None) -> ReplicaInfo:
        """Start one more replica of a registered model (on ``node_id``, or wherever it fits now)."""
        with self._model_locks.setdefault(model, threading.Lock()):
            return self._add_replica(model, node_id, self._placement_wait_s)

    def _reserve(self, rid: str, model: str, node_id: str | None, wait_s: float) -> tuple[str, dict[str, Any]]:
        """Pick a node with room and reserve the replica's resources there until it runs (or fails)."""
        from cluster import busy_reasons, consumed, demand_of, inventory, place

        with self._lock:
            d = demand_of(self._models[model])
        deadline = time.monotonic() + wait_s
        with self._capacity:
            while True:
                reserved = self._reserved_by_node()
                spot = place(d, node_id, reserved)  # raises PlacementError at once when no node could ever fit
                if spot is not None:
                    node, opts = spot
                    self._reservations[rid] = (node.node_id, consumed(d, node))
                    return node.node_id, opts
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    where = f"node {node_id}" if node_id else "every node that fits"
                    raise PlacementError(
                        f"cannot place a replica of {model!r} ({d.describe()}): {where} is busy after waiting "
                        f"{wait_s:g}s ({busy_reasons(d, inventory(), reserved)}); free capacity (fewer replicas, "
                        "smaller resources) or add a node"
                    )
                self._capacity.wait(timeout=min(remaining, 1.0))  # woken by a removal; re-checks joined nodes

    def _reserved_by_node(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for node_id, res in self._reservations.values():
            acc = out.setdefault(node_id, {})
            for k, v in res.items():
                acc[k] = acc.get(k, 0.0) + v
        return out

    def _ensure_serve(self) -> None:
        with self._serve_lock:  # replicas of one model deploy from parallel threads
            if not self._serve_started:
                try:
                    start_serve()
                except Exception as e:  # noqa: BLE001 - an already running Serve with other options is fine
                    log.debug("serve.start: %r", e)
                self._serve_started = True

    def _add_replica(self, model: str, node_id: str | None, wait_s: float) -> ReplicaInfo:
        from ray import serve

        from serving import ENGINES, EngineSpec

        with self._lock:
            cfg = self._models[model]
            self._counter += 1
            fp = fingerprint(cfg)
            rid = f"{model}-r{self._counter}-{fp[:6]}"
        inline = is_inline(cfg)
        held = inline and takes_resources(cfg)  # a pre-started engine process on this node: Ray does not count it
        opts: dict[str, Any] = {}
        target_node: str | None = None  # an endpoint's replica takes no cluster resources: it lives in this process
        if held or not inline:
            here = ray.get_runtime_context().get_node_id() if held else node_id
            target_node, opts = self._reserve(rid, model, here, wait_s)
        info = ReplicaInfo(replica_id=rid, model=model, fingerprint=fp, engine=cfg.engine, node_id=target_node,
                           inline=inline)  # fmt: skip
        with self._lock:
            self._replicas[rid] = info
        spec = EngineSpec(
            replica_id=rid,
            model=model,
            engine=cfg.engine,
            engine_target=str(ENGINES.target(cfg.engine)),
            source=cfg.source,
            engine_kwargs=engine_kwargs_with_tp(cfg),
        )
        t_deploy, info.deployed_at = time.monotonic(), time.time()
        try:
            if inline:
                stats = self._start_inline(spec, cfg.deploy_timeout_s or self._deploy_timeout_s)
            else:
                stats = self._deploy(spec, opts, cfg.deploy_timeout_s or self._deploy_timeout_s)
        except BaseException as e:
            with self._capacity:
                if not isinstance(e, KeyboardInterrupt):
                    self._event(info, "start_failed", f"{type(e).__name__}: {e}", None)
                self._replicas.pop(rid, None)
                self._reservations.pop(rid, None)
                self._capacity.notify_all()
            try:
                if inline:
                    self._inline.remove(rid)
                else:
                    serve.delete(rid, _blocking=False)
            except Exception:  # noqa: BLE001 - best-effort cleanup of a failed deploy
                pass
            raise
        with self._capacity:
            if not held:  # Ray's own accounting now shows the running replica; a held one stays reserved here
                self._reservations.pop(rid, None)
            self._capacity.notify_all()
            info.state = "healthy"
            info.up_s, info.healthy_at = time.monotonic() - t_deploy, time.time()
            burst = self._bursts.get(model)
            if burst is not None and burst.first_up_at is None:
                burst.first_up_at = time.monotonic()
            self._apply_stats(info, stats)
            orphan = model not in self._models or fingerprint(self._models[model]) != fp
        if orphan:  # released while it was starting (e.g. a scale-out racing the run's end)
            self.remove_replica(rid)
            raise ReplicaDead(f"model {model!r} was released while replica {rid} started", replica_id=rid)
        log.info("replica %s healthy (node %s)", rid, info.node_id)
        return info.model_copy()

    def _deploy(self, spec: EngineSpec, opts: dict[str, Any], timeout_s: float) -> EngineStats:
        """The replica as a Serve application of its own; its first stats once Serve says it runs."""
        from ray import serve

        from serving import EngineReplica

        rid = spec.replica_id
        self._ensure_serve()
        if env := self._runtime_envs.get(spec.model):
            opts = {**opts, "ray_actor_options": {**opts["ray_actor_options"], "runtime_env": env}}
        app = EngineReplica.options(name="EngineReplica", **opts).bind(spec)
        serve.run_many([serve.RunTarget(target=app, name=rid, route_prefix=None)], wait_for_applications_running=False)
        self._wait_running(rid, timeout_s)
        stats: EngineStats = serve.get_app_handle(rid).stats.remote().result(timeout_s=60)
        return stats

    def _start_inline(self, spec: EngineSpec, timeout_s: float) -> EngineStats:
        """The replica in this process (an endpoint: ``pool._inline``); an engine's refusal is the replica's death,
        as a Serve replica's failed constructor is."""
        try:
            return self._inline.start(spec, timeout_s)
        except Exception as e:  # noqa: BLE001 - whatever the engine raised, with the replica named
            raise ReplicaDead(f"replica {spec.replica_id} failed to start: {clip(f'{type(e).__name__}: {e}')}",
                              replica_id=spec.replica_id) from e  # fmt: skip

    def _stats_of(self, info: ReplicaInfo, timeout_s: float) -> EngineStats:
        from ray import serve

        if info.inline:
            return self._inline.stats(info.replica_id, timeout_s)
        stats: EngineStats = serve.get_app_handle(info.replica_id).stats.remote().result(timeout_s=timeout_s)
        return stats

    def inline_stats(self, replica_ids: list[str]) -> dict[str, EngineStats]:
        """Stats of the controller's own (endpoint) replicas among ``replica_ids``, for samplers outside it."""
        out = {}
        for rid in replica_ids:
            if rid in self._inline:
                try:
                    out[rid] = self._inline.stats(rid, 5)
                except Exception as e:  # noqa: BLE001 - a sample missed; the health check judges the replica
                    log.debug("stats of %s: %r", rid, e)
        return out

    def _wait_running(self, rid: str, timeout_s: float) -> None:
        """Until Serve reports the app RUNNING; its failure message (constructor error) is raised at once."""
        deadline = time.monotonic() + timeout_s
        while True:
            status, msg = app_status(rid)
            if status == "RUNNING":
                return
            if status in ("DEPLOY_FAILED", "UNHEALTHY"):
                raise ReplicaDead(f"replica {rid} failed to start: {clip(msg)}", replica_id=rid)
            if time.monotonic() > deadline:
                raise PlacementError(f"replica {rid} not running after {timeout_s:g}s: {clip(msg)}; raise the model's "
                                     "deploy_timeout_s if it is still downloading or loading")  # fmt: skip
            if self._stop.wait(0.25):  # Serve has no completion event to await; bounded by the deadline above
                raise ReplicaDead(f"pool controller shut down while {rid} started", replica_id=rid)

    def remove_replica(self, replica_id: str, wait: bool = True) -> None:
        from ray import serve

        with self._lock:
            info = self._replicas.pop(replica_id, None)
            self._idle_since.pop(replica_id, None)
            self._drained_at.pop(replica_id, None)
            self._limiters.pop(replica_id, None)
            self._client_inflight.pop(replica_id, None)
            self._engine_inflight.pop(replica_id, None)
            served = self._served.pop(replica_id, None)
            self._busy_until.pop(replica_id, None)
            for key in [k for k in self._last_report if k[1] == replica_id]:
                self._last_report.pop(key)
        if info is None:
            return
        stats = None
        if wait and info.state in ("healthy", "draining"):  # final stats are informational: not worth a wait
            try:
                stats = self._stats_of(info, 5)
            except Exception:  # noqa: BLE001 - final stats are informational
                stats = None
        if stats is not None and served is not None:
            stats = merge_served(stats, served)
        if info.inline:
            self._inline.remove(replica_id)
        else:
            serve.delete(replica_id, _blocking=wait)
        with self._capacity:
            self._reservations.pop(replica_id, None)  # a held engine process's, kept while it ran
            self._retired[replica_id] = RetiredReplica(info=info, stats=stats, removed_at=time.time())
            while len(self._retired) > MAX_RETIRED:
                self._retired.pop(next(iter(self._retired)))
            self._capacity.notify_all()

    def release(self, run_id: str, wait: bool = True) -> list[str]:
        """Drop the run; replicas of models with no remaining user are deleted. Returns removed replica ids.

        ``wait=False`` (a cancelled run: ``ray job stop`` SIGKILLs the driver 3 s after its SIGTERM) only starts the
        deletions; Serve finishes them, engines included, after the driver is gone."""
        removed: list[str] = []
        with self._lock:
            self._leases.pop(run_id, None)
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
            self.remove_replica(rid, wait=wait)
        return removed

    def heartbeat(self, run_id: str, grace_s: float) -> None:
        """The run is alive. A run that has sent one holds its replicas only while it keeps sending them: silent
        for ``grace_s`` (its driver SIGKILLed, its node lost), it is released, so nobody's GPUs stay held for a
        dead driver. Runs that never send one (``--keep-pool``, the job server's, tests') are held until released."""
        with self._lock:
            self._leases[run_id] = (time.monotonic(), grace_s)

    def end_lease(self, run_id: str) -> None:
        """The run keeps its replicas without heartbeats from now on (``--keep-pool``)."""
        with self._lock:
            self._leases.pop(run_id, None)

    def expire_leases(self) -> list[str]:
        """Release every run whose heartbeats stopped for longer than its grace; returns those run ids."""
        now = time.monotonic()
        with self._lock:
            dead = [r for r, (t, grace) in self._leases.items() if now - t > grace]
            for r in dead:
                self._leases.pop(r)
        for r in dead:
            removed = self.release(r, wait=False)
            log.warning("run %s sent no heartbeat for its grace period: released (replicas removed: %s)", r, removed)
        return dead

    # ---- queries ---------------------------------------------------------------------------------------------
    def replicas(self, model: str | None = None) -> list[ReplicaInfo]:
        with self._lock:
            return [r.model_copy() for r in self._replicas.values() if model is None or r.model == model]

    def users(self) -> dict[str, list[str]]:
        with self._lock:
            return {m: sorted(u) for m, u in self._users.items()}

    def leases(self) -> dict[str, tuple[float, float]]:
        """Runs holding replicas by heartbeat: (seconds since the last beat, grace). A user absent here is kept
        without one (``--keep-pool``) until ``release``."""
        now = time.monotonic()
        with self._lock:
            return {r: (now - t, grace) for r, (t, grace) in self._leases.items()}

    def retired(self) -> dict[str, RetiredReplica]:
        """Removed replicas (most recent ``MAX_RETIRED``) with their final stats."""
        with self._lock:
            return {k: v.model_copy() for k, v in self._retired.items()}

    @ray.method(concurrency_group="waits")
    def wait_replica(self, model: str, known: list[str], timeout_s: float) -> bool:
        """Block until ``model`` has a healthy replica outside ``known`` (True) or ``timeout_s`` has passed (False):
        a client whose requests have no replica to go to learns of the first one the moment it is up, instead of
        at its next periodic sync."""
        deadline = time.monotonic() + timeout_s
        with self._capacity:  # notified when a replica turns healthy (and when resources are freed)
            while True:
                if any(r.model == model and r.state == "healthy" and r.replica_id not in known
                       for r in self._replicas.values()):  # fmt: skip
                    return True
                left = deadline - time.monotonic()
                if left <= 0 or self._stop.is_set():
                    return False
                self._capacity.wait(left)

    def report_failure(self, replica_id: str, detail: str = "") -> None:
        """A client saw the replica die: stop routing to it until a health check passes again."""
        with self._lock:
            r = self._replicas.get(replica_id)
            if r is not None and r.state == "healthy":
                r.state = "unhealthy"
                self._event(r, "unhealthy", f"a client's request failed: {detail or 'replica unusable'}", r.log)

    def _count_busy(self, served: EngineStats, client: str, load: ReplicaLoad, now: float) -> None:
        """Busy time as clients see it: the union of the sync windows in which some client had a request
        outstanding there (the replica process no longer sees requests sent straight to its engine's server)."""
        rid = load.replica_id
        start = self._last_report.get((client, rid), now)
        self._last_report[(client, rid)] = now
        if load.peak_in_flight > 0 or load.in_flight > 0:
            served.busy_s += max(0.0, now - max(start, self._busy_until.get(rid, 0.0)))
            self._busy_until[rid] = now

    def sync(self, req: SyncRequest) -> list[ReplicaInfo]:
        """A client's periodic report: its load on each replica feeds that replica's shared concurrency limit; the
        reply is the model's replica set, each with its current limit and the number of clients sharing it."""
        now = time.monotonic()
        with self._lock:
            seen = self._client_seen.setdefault(req.model, {})
            if req.active:
                if not any(now - t <= CLIENT_TTL_S for t in seen.values()):  # the model's work (re)starts
                    self._sibling_hint_until[req.model] = now + SIBLING_HINT_S
                seen[req.client] = now
                self._siblings[req.client] = req.siblings
            else:
                seen.pop(req.client, None)
                self._siblings.pop(req.client, None)
            for cid in [c for c, t in seen.items() if now - t > CLIENT_TTL_S]:
                seen.pop(cid)
                self._siblings.pop(cid, None)
            for load in req.loads:
                info = self._replicas.get(load.replica_id)
                if info is None:
                    continue
                per_client = self._client_inflight.setdefault(load.replica_id, {})
                per_client[req.client] = load.in_flight
                others = sum(v for c, v in per_client.items() if c != req.client and c in seen)
                served = self._served.setdefault(
                    load.replica_id, EngineStats(replica_id=info.replica_id, engine=info.engine, model=info.model)
                )
                served.completed += load.ok
                served.failed += load.failed
                served.output_tokens += load.output_tokens
                served.peak_in_flight = max(served.peak_in_flight, load.peak_in_flight + others)
                self._count_busy(served, req.client, load, now)
                busy = {c for c, v in per_client.items() if v > 0 and c in seen}
                if load.peak_in_flight > 0:
                    busy.add(req.client)
                served.peak_clients = max(served.peak_clients, len(busy))
                window = LimitWindow(ok=load.ok, failed=load.failed, latency_sum=load.latency_sum,
                                     peak_in_flight=load.peak_in_flight + others)  # fmt: skip
                self._limiter(load.replica_id, info, req).observe(window)
                info.in_flight = self._in_flight(load.replica_id)
            hint = now < self._sibling_hint_until.get(req.model, 0.0)
            n_clients = max(1, len(seen), *(self._siblings.get(c, 1) if hint else 1 for c in seen))
            burst = self._bursts.get(req.model)
            states = [r.state for r in self._replicas.values() if r.model == req.model] if burst is not None else []
            out = []
            for r in self._replicas.values():
                if r.model != req.model:
                    continue
                r.limit = self._limiter(r.replica_id, r, req).limit
                r.clients = n_clients
                c = r.model_copy()
                if burst is not None:  # siblings still loading get their share of the first requests
                    c.limit = burst.share(r.limit, states.count("healthy"), states.count("starting"), now)
                out.append(c)
            return out

    def _limiter(self, rid: str, info: ReplicaInfo, req: SyncRequest) -> GradientLimiter:
        """Starts at the engine's own batch slots (llama-server ``--parallel``, vLLM ``max_num_seqs``: fewer would
        idle slots by construction) or the configured start, whichever is larger, then probes upward."""
        lim = self._limiters.get(rid)
        if lim is None:
            ceiling = max(1, req.max_limit)
            start = max(1, min(max(req.initial_limit, info.slots), ceiling))
            lim = GradientLimiter(initial=start, max_limit=ceiling)
            self._limiters[rid] = lim
        return lim

    def _in_flight(self, rid: str) -> int:
        """Requests in the replica: what the engine counts, or what clients that synced within ``CLIENT_TTL_S``
        report when that is more (a server reached directly that exposes no load metrics). A client that stopped
        syncing (its run ended, its actor died) stops counting."""
        return max(self._engine_inflight.get(rid, 0), self._clients_in_flight(rid, self._live_clients()))

    def _live_clients(self) -> set[str]:
        now = time.monotonic()
        return {c for seen in self._client_seen.values() for c, t in seen.items() if now - t <= CLIENT_TTL_S}

    def _clients_in_flight(self, rid: str, live: set[str]) -> int:
        return sum(v for c, v in self._client_inflight.get(rid, {}).items() if c in live)

    def client_in_flight(self) -> dict[str, int]:
        """Per replica: requests its live clients have outstanding there (sent, not yet answered), whatever the
        engine counts; the gap to the engine's own count is work in its server's front end."""
        with self._lock:
            live = self._live_clients()
            return {rid: self._clients_in_flight(rid, live) for rid in self._replicas}

    def served_requests(self) -> dict[str, int]:
        """Per replica: requests its clients saw it answer (sent straight to its engine's server too, which the
        replica's own counters never see)."""
        with self._lock:
            return {rid: st.completed for rid, st in self._served.items()}

    def limits(self) -> dict[str, dict[str, float | None]]:
        """Per replica: its concurrency limit now, where it started and the highest it reached, how many decisions
        fed it, its no-queue latency baseline."""
        with self._lock:
            return {rid: {"limit": lim.limit, "initial": lim.initial, "peak_limit": lim.peak_limit, "updates": lim.updates,
                          "baseline_s_per_token": lim.baseline}
                    for rid, lim in self._limiters.items() if rid in self._replicas}  # fmt: skip

    def models(self) -> dict[str, ModelConfig]:
        with self._lock:
            return dict(self._models)

    # ---- health ----------------------------------------------------------------------------------------------
    def _apply_stats(self, info: ReplicaInfo, stats: Any) -> None:
        info.node_id = stats.node_id
        info.queue_depth = stats.queue_depth
        info.slots = stats.slots
        info.engine_version = stats.engine_version
        info.model_path = stats.model_path
        info.model_sha256 = stats.model_sha256
        info.endpoint = stats.endpoint
        info.prefix_token_id = stats.prefix_token_id
        info.tokenizer_dir = stats.tokenizer_dir
        info.log = stats.log or info.log
        info.load_s = stats.load_s
        info.prestarted = stats.prestarted
        lim = self._limiters.get(info.replica_id)
        if lim is not None:  # a client synced before the replica's first stats said how many slots it batches
            lim.start_at_least(int(stats.slots))
        self._engine_inflight[info.replica_id] = stats.in_flight
        info.in_flight = self._in_flight(info.replica_id)
        if info.in_flight == 0:
            self._idle_since.setdefault(info.replica_id, time.monotonic())
        else:
            self._idle_since.pop(info.replica_id, None)

    def check_now(self) -> list[ReplicaInfo]:
        """One health pass over every replica (the loop calls it; tests and the driver may too)."""
        for info in self.replicas():
            if info.state in ("starting", "dead"):
                continue
            err: Exception | None = None
            try:
                stats = self._stats_of(info, 10)
                ok = bool(stats.healthy)
            except Exception as e:  # noqa: BLE001 - any failure to answer is a failed check
                log.warning("health check of %s failed: %r", info.replica_id, e)
                ok, stats, err = False, None, e
            with self._lock:
                cur = self._replicas.get(info.replica_id)
                if cur is None:
                    continue
                if ok:
                    if cur.state not in ("draining", "healthy"):  # a drained replica stays out of rotation
                        cur.state = "healthy"
                        self._capacity.notify_all()  # back in rotation: clients in ``wait_replica`` go on
                    cur.failures = 0
                    self._apply_stats(cur, stats)
                else:
                    cur.failures += 1
                    if cur.state == "healthy":  # the transition, once: what a driver logs and keeps the log of
                        detail = (stats.health_detail if stats is not None else None) or f"no answer: {err}"
                        self._event(cur, "unhealthy", detail, (stats.log if stats is not None else None) or cur.log)
                    if cur.state != "draining":
                        cur.state = "unhealthy"
        return self.replicas()

    def _event(self, info: ReplicaInfo, kind: Literal["unhealthy", "start_failed"], detail: str,
               log_at: str | None) -> None:  # fmt: skip
        """Record (and log) a replica failure; the caller holds the lock."""
        self._event_seq += 1
        ev = ReplicaEvent(seq=self._event_seq, at=time.time(), replica_id=info.replica_id, model=info.model,
                          engine=info.engine, node_id=info.node_id, kind=kind, detail=clip(detail, 2000), log=log_at)  # fmt: skip
        self._events.append(ev)
        log.warning("replica %s (%s, node %s) %s: %s; engine log: %s", ev.replica_id, ev.engine, ev.node_id, kind,
                    ev.detail, ev.log)  # fmt: skip

    def events(self, since: int = 0, models: list[str] | None = None) -> list[ReplicaEvent]:
        """Replica failures after event ``since`` (of ``models`` only, when given)."""
        with self._lock:
            return [e for e in self._events if e.seq > since and (models is None or e.model in models)]

    def _health_loop(self) -> None:
        while not self._stop.wait(self._period):
            try:
                self.expire_leases()
                self.check_now()
            except Exception as e:  # noqa: BLE001 - the loop must survive a transient Serve error
                log.warning("health pass failed: %r", e)

    # ---- elasticity ------------------------------------------------------------------------------------------
    def autoscale_once(self) -> ScaleResult:
        """One scaling pass on the last health snapshot: drain/remove idle surplus, add where saturated and room."""
        now = time.monotonic()
        with self._lock:
            plan = plan_scaling(
                self._models, self._replicas.values(), self._idle_since, self._drained_at, now, self._idle_s
            )
            for rid in plan.drain:
                self._replicas[rid].state = "draining"
                self._drained_at[rid] = now
        result = ScaleResult(drained=list(plan.drain))
        for rid in plan.remove:
            self.remove_replica(rid)
            result.removed.append(rid)
        for model in plan.scale_out:
            lock = self._model_locks.get(model)
            if lock is None or not lock.acquire(blocking=False):
                continue  # ensure_model or another scale step is working on it
            try:
                info = self._add_replica(model, None, 0.0)
                result.added.append(info.replica_id)
                log.info("scaled %s out to node %s (%s)", model, info.node_id, info.replica_id)
            except PlacementError as e:  # saturated but no node has room now: retried next pass
                result.waiting[model] = str(e)
            except Exception as e:  # noqa: BLE001 - a failed scale step must not stop the loop
                log.warning("scale-out of %s failed: %r", model, e)
                result.waiting[model] = repr(e)
            finally:
                lock.release()
        return result

    def _autoscale_loop(self) -> None:
        while not self._stop.wait(self._autoscale_period):
            try:
                self.autoscale_once()
            except Exception as e:  # noqa: BLE001 - the loop must survive a transient error
                log.warning("autoscale pass failed: %r", e)

    def shutdown(self) -> None:
        self._stop.set()
        for rid in list(self._replicas):
            self.remove_replica(rid)


def merge_served(engine: EngineStats, served: EngineStats) -> EngineStats:
    """Engine stats completed with what clients saw the replica serve: requests sent straight to the engine's server
    never pass through the replica process, so its own counters miss them."""
    out = engine.model_copy()
    out.completed = max(engine.completed, served.completed)
    out.failed = max(engine.failed, served.failed)
    out.output_tokens = max(engine.output_tokens, served.output_tokens)
    out.prompt_tokens = max(engine.prompt_tokens, served.prompt_tokens)
    out.peak_in_flight = max(engine.peak_in_flight, served.peak_in_flight)
    out.peak_clients = max(engine.peak_clients, served.peak_clients)
    out.busy_s = max(engine.busy_s, served.busy_s)
    return out


def engine_kwargs_with_tp(cfg: ModelConfig) -> dict[str, Any]:
    """The model's engine_kwargs with its tensor-parallel degree under the engine's own key (the replica's bundle
    holds that many GPUs; the engine must also be told to shard over them)."""
    from cluster import Demand
    from serving import ENGINES

    kw = dict(cfg.engine_kwargs)
    tp = Demand.of(cfg.resources.model_dump(), kw).tensor_parallel_size
    key = ENGINES.get(cfg.engine).tp_kwarg
    if tp > 1 and key is not None:
        if kw.get(key) not in (None, tp):
            raise PlacementError(f"model {cfg.name!r}: engine_kwargs.{key}={kw[key]} but resources ask for "
                                 f"tensor_parallel_size {tp}; set one of them")  # fmt: skip
        kw[key] = tp
    return kw


def start_serve() -> None:
    """Ray Serve's controller, started or joined. The pool calls replicas through handles only: no HTTP proxies."""
    from ray import serve

    serve.start(proxy_location="Disabled")


def app_status(name: str) -> tuple[str, str]:
    """One Serve application's status and its messages (its own and its deployments': a constructor's error).

    Why not ``serve.status()``: it fetches every application's full details and rebuilds them as pydantic models,
    cloudpickling each deployment's request-router class on the way: 12 ms of CPU a call against 0.6 ms here, and a
    start-up poll makes four calls a second for as long as an engine loads, on the same cores as that load. This is
    the controller call ``serve.status()`` itself is built beside (``ray.serve`` is pinned in pyproject.toml)."""
    from ray.serve.context import _get_global_client

    client = _get_global_client(raise_if_no_controller_running=False)
    if client is None:
        return "NOT_STARTED", ""
    st = client.get_serve_status(name)
    parts = [st.app_status.message, *(d.message for d in st.deployment_statuses)]
    return str(getattr(st.app_status.status, "value", st.app_status.status)), "; ".join(p for p in parts if p)


def start_serve_early() -> threading.Thread:
    """Start Serve's controller from the driver while the pool controller's own worker starts: each is a fresh
    worker process (about a second each here), and the first deploy waits for both. A failure is only logged: the
    pool controller starts Serve itself on its first deploy and raises there."""

    def run() -> None:
        try:
            start_serve()
        except Exception as e:  # noqa: BLE001 - the controller's own start reports it
            log.debug("early serve.start: %r", e)

    t = threading.Thread(target=run, daemon=True, name="serve-start")
    t.start()
    return t


def get_controller(health_check_period_s: float = 5.0, create: bool = True, **options: Any) -> Any:
    """The cluster's controller (detached, so concurrent suites from other drivers share it).

    ``options`` (``scale_in_idle_s``, ``placement_wait_s``, ...) apply only when this call creates it.
    """
    if not create:
        return ray.get_actor(CONTROLLER_NAME, namespace=NAMESPACE)
    return PoolController.options(  # type: ignore[attr-defined]  # added by @ray.remote
        name=CONTROLLER_NAME, namespace=NAMESPACE, lifetime="detached", get_if_exists=True
    ).remote(health_check_period_s, **options)
