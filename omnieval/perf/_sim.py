"""Discrete-event simulation of the pool at scale with the SIMULATED engine model (no real replicas or actors).

What is real: the routing policies (``schedulers.make_policy``, one instance per client as each ``EvalClient``'s
Dispatcher has), the per-client per-replica in-flight cap, the stale replica-reported queue depth (refreshed every
health period), chunked work with longest-first shards plus stealing (as the runner's feeder), and a client's chunk
slot staying busy until its slowest request returns. What is modelled: each replica is a continuous-batching engine
whose decode step costs ``step_s(batch, kv)`` and whose admissions stall decoding for their uncached prefill, with
an LRU block prefix cache (``serving._simulated.EngineProfile``, calibrated from llama-server).

Decoding is advanced analytically between events (admission / completion), not token by token, so 256 replicas ×
tens of thousands of requests simulate in seconds.
"""

from __future__ import annotations

import heapq
import itertools
import random
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from omnieval.perf._common import pct
from omnieval.perf._workloads import SimRequest
from schedulers import ReplicaView, RoutingRequest, estimate_cost, make_policy, plan_shards
from serving import EngineProfile, PrefixCache

_ARRIVE, _STEP, _RETURN, _SNAPSHOT = 0, 1, 2, 3
_EPS = 1e-9


@dataclass
class SimConfig:
    replicas: int = 256
    clients: int = 64
    policy: str = "p2c"
    max_inflight_per_replica: int = 8
    chunk_size: int = 16
    chunks_per_client: int | None = None
    """Default: the runner's formula ``max(2, ceil(slots / (clients * chunk_size)) + 1)``."""
    health_period_s: float = 5.0
    rpc_s: float = 0.002
    """One-way client↔replica hop (Serve handle call); measured by ``omnieval bench pool``."""
    rpc_jitter: float = 0.5
    """Each hop takes ``rpc_s × U(1 - j, 1 + j)``: real hops jitter, and without it clients stay in lock-step."""
    seed: int = 0


class _Replica:
    __slots__ = ("idx", "p", "active", "waiting", "v", "t", "stall_until", "version", "kv", "cache", "busy_s",
                 "tokens", "completed", "_seq")  # fmt: skip

    def __init__(self, idx: int, p: EngineProfile) -> None:
        self.idx, self.p = idx, p
        self.active: list[tuple[float, int, SimRequest]] = []  # heap of (finish at virtual step, seq, request)
        self.waiting: deque[SimRequest] = deque()
        self.v = 0.0  # decode steps completed by every running sequence so far (virtual clock)
        self.t = 0.0
        self.stall_until = 0.0
        self.version = 0
        self.kv = 0.0
        self.cache = PrefixCache(p.slots * p.ctx_per_slot // p.block_tokens)
        self.busy_s = 0.0
        self.tokens = 0
        self.completed = 0
        self._seq = itertools.count()

    def step_s(self) -> float:
        return self.p.step_s(len(self.active), self.kv)

    def advance(self, t: float) -> None:
        if self.active:
            start = max(self.t, self.stall_until)
            if t > start:
                self.v += (t - start) / self.step_s()
            self.busy_s += t - self.t
        self.t = t

    def admit(self, t: float) -> None:
        p = self.p
        while self.waiting and len(self.active) < p.slots:
            r = self.waiting.popleft()
            hit = self.cache.lookup_insert(r.blocks)
            r.cached_tokens = min(r.n_prompt, hit * p.block_tokens)
            self.stall_until = max(self.stall_until, t) + p.prefill_s(r.n_prompt - r.cached_tokens)
            heapq.heappush(self.active, (self.v + r.n_out, next(self._seq), r))
            self.kv += r.n_prompt + r.n_out / 2

    def next_finish(self) -> float | None:
        if not self.active:
            return None
        remaining = max(0.0, self.active[0][0] - self.v)
        return max(self.t, self.stall_until) + remaining * self.step_s()

    def pop_finished(self) -> list[SimRequest]:
        out = []
        while self.active and self.active[0][0] <= self.v + 1e-6:
            _, _, r = heapq.heappop(self.active)
            self.kv -= r.n_prompt + r.n_out / 2
            self.tokens += r.n_out
            self.completed += 1
            out.append(r)
        return out


@dataclass
class _Client:
    idx: int
    policy: Any
    outstanding: list[int]
    pending: deque[SimRequest] = field(default_factory=deque)
    chunks: deque[list[SimRequest]] = field(default_factory=deque)
    left: dict[int, int] = field(default_factory=dict)  # chunk id -> requests not yet returned
    chunk_of: dict[int, int] = field(default_factory=dict)  # request id -> chunk id
    views: list[ReplicaView] = field(default_factory=list)  # cached per replica; rebuilt when its inputs change
    snapshot: int = -1  # which health snapshot ``views`` reflect


class PoolSim:
    """One run: ``PoolSim(cfg, profile, requests).run()`` → metrics dict."""

    def __init__(self, cfg: SimConfig, profile: EngineProfile | list[EngineProfile], requests: list[SimRequest],
                 model: str = "m") -> None:  # fmt: skip
        """``profile``: one for every replica, or one per replica (GPUs of different kinds)."""
        profiles = profile if isinstance(profile, list) else [profile] * cfg.replicas
        if len(profiles) != cfg.replicas:
            raise ValueError(f"{len(profiles)} profiles for {cfg.replicas} replicas")
        self.cfg, self.p, self.model = cfg, profiles[0], model
        self.requests = requests
        self.replicas = [_Replica(i, p) for i, p in enumerate(profiles)]
        self.ids = [f"r{i:04d}" for i in range(cfg.replicas)]
        self.index = {rid: i for i, rid in enumerate(self.ids)}
        self.reported = [0] * cfg.replicas  # queue depth as last seen by health checks (stale by design)
        self.snapshot = 0
        self.clients = [
            _Client(c, make_policy(cfg.policy, seed=cfg.seed * 1000 + c), [0] * cfg.replicas)
            for c in range(cfg.clients)
        ]
        self.events: list[tuple[float, int, int, int, int]] = []
        self._seq = itertools.count()
        self.now = 0.0
        self._chunk_ids = itertools.count()
        self.routing_s = 0.0
        self._rng = random.Random(cfg.seed)

    def _hop(self) -> float:
        j = self.cfg.rpc_jitter
        return self.cfg.rpc_s * (1 + j * (2 * self._rng.random() - 1)) if j else self.cfg.rpc_s

    # ---- event plumbing ----------------------------------------------------------------------------------------
    def _push(self, t: float, kind: int, a: int, b: int = 0) -> None:
        heapq.heappush(self.events, (t, next(self._seq), kind, a, b))

    def _reschedule(self, rep: _Replica) -> None:
        rep.version += 1
        t = rep.next_finish()
        if t is not None:
            self._push(t, _STEP, rep.idx, rep.version)

    # ---- clients -----------------------------------------------------------------------------------------------
    def _plan(self) -> None:
        groups: dict[str, list[SimRequest]] = {}
        for r in self.requests:
            groups.setdefault(r.group, []).append(r)
        cs = self.cfg.chunk_size
        chunks = [g[i : i + cs] for g in groups.values() for i in range(0, len(g), cs)]

        def cost(ch: list[SimRequest]) -> float:
            return sum(estimate_cost(len(r.prompt), r.max_tokens, self.p.chars_per_token) for r in ch)

        for client, shard in zip(self.clients, plan_shards(chunks, len(self.clients), cost), strict=True):
            client.chunks = deque(shard)

    def _next_chunk(self, c: _Client) -> list[SimRequest] | None:
        if c.chunks:
            return c.chunks.popleft()
        donor = max(self.clients, key=lambda d: len(d.chunks))  # work stealing, as the runner's feeder
        return donor.chunks.pop() if donor.chunks else None

    def _start_chunk(self, c: _Client) -> bool:
        chunk = self._next_chunk(c)
        if chunk is None:
            return False
        cid = next(self._chunk_ids)
        c.left[cid] = len(chunk)
        for r in chunk:
            r.client, r.t_submit = c.idx, self.now
            c.chunk_of[r.rid] = cid
            c.pending.append(r)
        return True

    def _route_pending(self, c: _Client) -> None:
        cap = self.cfg.max_inflight_per_replica
        out = c.outstanding
        while c.pending:
            t0 = time.perf_counter()
            if c.snapshot != self.snapshot:
                c.views = [ReplicaView(self.ids[i], out[i], self.reported[i]) for i in range(len(out))]
                c.snapshot = self.snapshot
            cands = [v for v, o in zip(c.views, out, strict=True) if o < cap]
            if not cands:
                self.routing_s += time.perf_counter() - t0
                return
            r = c.pending.popleft()
            req = RoutingRequest(model=self.model, prompt_text=r.prompt, est_tokens=r.max_tokens)
            rid = c.policy.choose(cands, req)[0]
            c.policy.on_dispatch(rid, req)
            i = self.index[rid]
            out[i] += 1
            c.views[i] = ReplicaView(rid, out[i], self.reported[i])
            r.replica = i
            self.routing_s += time.perf_counter() - t0
            self._push(self.now + self._hop(), _ARRIVE, r.rid, i)

    def _on_return(self, r: SimRequest) -> None:
        c = self.clients[r.client]
        i = r.replica
        c.outstanding[i] -= 1
        if c.snapshot == self.snapshot:
            c.views[i] = ReplicaView(self.ids[i], c.outstanding[i], self.reported[i])
        req = RoutingRequest(model=self.model, prompt_text=r.prompt, est_tokens=r.max_tokens)
        c.policy.on_complete(self.ids[r.replica], req, True, r.t_done - r.t_submit)
        cid = c.chunk_of.pop(r.rid)
        c.left[cid] -= 1
        if c.left[cid] == 0:
            del c.left[cid]
            self._start_chunk(c)
        self._route_pending(c)

    # ---- main loop ---------------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        wall0 = time.perf_counter()
        cfg = self.cfg
        self._plan()
        per_client = cfg.chunks_per_client or max(
            2, -(-cfg.replicas * self.p.slots // (cfg.clients * cfg.chunk_size)) + 1
        )
        for c in self.clients:
            for _ in range(per_client):
                if not self._start_chunk(c):
                    break
            self._route_pending(c)
        self._push(cfg.health_period_s, _SNAPSHOT, 0)
        by_id = {r.rid: r for r in self.requests}
        done = 0
        while self.events and done < len(self.requests):
            t, _, kind, a, b = heapq.heappop(self.events)
            self.now = t
            if kind == _ARRIVE:
                rep = self.replicas[b]
                rep.advance(t)
                rep.waiting.append(by_id[a])
                rep.admit(t)
                self._reschedule(rep)
            elif kind == _STEP:
                rep = self.replicas[a]
                if b != rep.version:
                    continue  # superseded by a later admission/completion
                rep.advance(t)
                for r in rep.pop_finished():
                    r.t_done = t + self._hop()
                    self._push(r.t_done, _RETURN, r.rid)
                rep.admit(t)
                self._reschedule(rep)
            elif kind == _RETURN:
                done += 1
                self._on_return(by_id[a])
            else:
                self.reported = [len(r.waiting) for r in self.replicas]
                self.snapshot += 1
                self._push(t + cfg.health_period_s, _SNAPSHOT, 0)
        return self._metrics(time.perf_counter() - wall0)

    def _metrics(self, sim_wall_s: float) -> dict[str, Any]:
        reqs = self.requests
        makespan = max(r.t_done for r in reqs)
        lat = [r.t_done - r.t_submit for r in reqs]
        tokens = sum(r.n_out for r in reqs)
        prompt = sum(r.n_prompt for r in reqs)
        cached = sum(r.cached_tokens for r in reqs)
        per_rep = [rep.tokens for rep in self.replicas]
        mean_tok = tokens / len(self.replicas)
        return {
            "policy": self.cfg.policy,
            "replicas": self.cfg.replicas,
            "clients": self.cfg.clients,
            "requests": len(reqs),
            "makespan_s": makespan,
            "output_tokens_per_s": tokens / makespan,
            "requests_per_s": len(reqs) / makespan,
            "latency_p50_s": pct(lat, 50),
            "latency_p99_s": pct(lat, 99),
            "prefix_cache_hit_rate": cached / prompt if prompt else 0.0,
            "replica_busy_mean": sum(r.busy_s for r in self.replicas) / (len(self.replicas) * makespan),
            "load_imbalance_max_over_mean": max(per_rep) / mean_tok if mean_tok else 0.0,
            "sim_wall_s": sim_wall_s,
            "routing_us_per_request": 1e6 * self.routing_s / len(reqs),
        }


def simulate(cfg: SimConfig, profile: EngineProfile, requests: list[SimRequest]) -> dict[str, Any]:
    """Run one simulation on a fresh copy of ``requests`` (their timing fields are written in place)."""
    fresh = [SimRequest(r.rid, r.group, r.prompt, r.blocks, r.n_prompt, r.n_out, r.max_tokens) for r in requests]
    return PoolSim(cfg, profile, fresh).run()
