"""What each replica's engine did during the run, as the engine itself counts it: a timeline and a summary.

Why: a run's throughput alone cannot say whether an engine was saturated or starved. A driver thread asks each of
the run's replicas for its stats every ``period_s`` (the replica reads its server's own ``/metrics`` — vLLM's
running/waiting requests, prompt and generation tokens, KV usage; llama-server's processing/deferred requests and
tokens — or its in-process counters: transformers' batches and in-flight requests). The samples go to
``replica-timeline.jsonl`` in the run; the manifest keeps per replica, over the inference phase: the busy share
(samples with a request in flight), mean in flight, peak queue, prefilled and generated tokens, and when it was
last busy (the critical path is the replica busy last).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict

log = logging.getLogger("omnieval")

TIMELINE = "replica-timeline.jsonl"


class UsageSample(BaseModel):
    model_config = ConfigDict(extra="forbid")
    t: float
    """Unix time of the sample."""
    replica_id: str
    model: str
    engine: str
    in_flight: int
    queue_depth: int
    slots: int
    prompt_tokens: int
    output_tokens: int
    completed: int
    batches: int = 0
    batch_rows: int = 0
    media_items: int = 0
    cached_prompt_tokens: int = 0
    kv_usage: float | None = None
    pool_in_flight: int | None = None
    """Requests the pool's clients had outstanding at the replica (sent, unanswered): above ``in_flight``, the rest
    were in the server's front end (tokenising, media preprocessing) before its scheduler counted them."""
    limit: int | None = None
    """The pool's adaptive concurrency limit for the replica then."""
    cpu_s: float | None = None
    """CPU seconds the engine's processes had used by then (``EngineStats.cpu_s``)."""
    node_cpu_s: float | None = None
    """Busy CPU seconds of the replica's node by then, all its CPUs together."""
    node_cpus: int | None = None


class ReplicaUsage(BaseModel):
    """One replica over the inference phase (``manifest.replica_usage``)."""

    model_config = ConfigDict(extra="forbid")
    replica_id: str
    model: str
    engine: str
    samples: int
    """Samples taken inside the inference phase."""
    busy_fraction: float | None
    """Share of those samples with at least one request in flight."""
    mean_in_flight: float | None
    peak_queue: int
    """Most requests waiting for a slot at once."""
    slots: int
    prompt_tokens: int
    """Prompt tokens prefilled during the phase (the engine's count)."""
    cached_prompt_tokens: int = 0
    """Of those, served from the engine's prefix cache (vLLM counts them): not computed."""
    output_tokens: int
    """Tokens generated during the phase."""
    requests: int
    """Requests answered during the phase: the engine's count, or what clients saw it answer where they reach its
    server directly (the replica's own counters never see those)."""
    batches: int
    """Batched forward calls (transformers: prefills and decode steps, or ``generate`` calls under static batching)."""
    batch_rows: int = 0
    """Rows those calls served: ``batch_rows / batches`` is the engine's mean batch over the phase."""
    media_items: int = 0
    """Images, frames and audio clips the engine encoded during the phase, where it counts them (transformers;
    vLLM: its multimodal cache's misses)."""
    mean_pool_in_flight: float | None = None
    """Mean of the pool's outstanding requests at the replica over the phase (see ``UsageSample.pool_in_flight``)."""
    peak_limit: int | None = None
    """The highest concurrency limit the pool set for it during the phase."""
    up_at_s: float | None = None
    """Seconds from the phase's start to the replica's first sample (0 when it was up before the phase): requests
    are dispatched to a model as soon as its replica is up, so a slow engine joins a phase already under way."""
    load_s: float | None = None
    """The engine's own load time (weights and server), as the replica measured it."""
    up_s: float | None = None
    """Deploy call to healthy: the engine's load plus Ray's placement and Serve's deploy around it."""
    deployed_at_s: float | None = None
    """Seconds from the phase's start to its deploy call (negative: before the phase), by the controller's clock."""
    healthy_at_s: float | None = None
    """Seconds from the phase's start to when the controller saw it healthy: exact where ``up_at_s`` lags by up to
    a sampling period (longer on a loaded machine)."""
    cpu_cores: float | None = None
    """Mean CPU cores the engine's processes used over the phase (from when it was up): CPU seconds by the kernel's
    count over wall seconds."""
    node_busy_cores: float | None = None
    """Mean busy cores of its node over the same window: minus ``cpu_cores``, what the node's other work took."""
    node_cpus: int | None = None
    prestarted: bool = False
    """Its engine's server was started by the driver before Ray and taken over (``pool.prestart``): its load ran
    beside Ray's start, counted in ``load_s`` from the server's launch."""
    first_busy_s: float | None
    """Seconds from the phase's start to the first sample with work in flight."""
    last_busy_s: float | None
    """Seconds from the phase's start to the last sample with work in flight (the critical path ends here)."""


class Startup(NamedTuple):
    """A replica's start, from the controller's ``ReplicaInfo``."""

    load_s: float | None = None
    up_s: float | None = None
    deployed_at: float | None = None
    healthy_at: float | None = None
    prestarted: bool = False


class UsageSampler:
    """Samples the run's replicas from a driver thread until ``stop()``."""

    def __init__(self, controller: Any, models: list[str], period_s: float = 1.0) -> None:
        self.controller, self.models, self.period_s = controller, set(models), period_s
        self.samples: list[UsageSample] = []
        self.startup: dict[str, Startup] = {}
        """Replica -> its start as the controller saw it."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="omnieval-usage")

    def start(self) -> UsageSampler:
        self._thread.start()
        return self

    def stop(self) -> list[UsageSample]:
        """Stop, after one last sample: the counters at the phase's end."""
        self._stop.set()
        self._thread.join(timeout=15)
        self._sample()
        return self.samples

    def _loop(self) -> None:
        while not self._stop.is_set():
            t_next = time.monotonic() + self.period_s
            self._sample()
            self._stop.wait(max(0.0, t_next - time.monotonic()))

    def _sample(self) -> None:
        import ray
        from ray import serve

        try:
            infos = [i for i in ray.get(self.controller.replicas.remote(), timeout=10)
                     if i.model in self.models and i.state in ("healthy", "draining")]  # fmt: skip
            refs = {i.replica_id: serve.get_app_handle(i.replica_id).stats.remote() for i in infos if not i.inline}
            inline = [i.replica_id for i in infos if i.inline]  # the controller's own (endpoint) replicas: it answers
            held = ray.get(self.controller.inline_stats.remote(inline), timeout=10) if inline else {}
            self.startup.update((i.replica_id, Startup(i.load_s, i.up_s, i.deployed_at, i.healthy_at,
                                                                 i.prestarted)) for i in infos)
            pool_side = ray.get(self.controller.client_in_flight.remote(), timeout=10)
            limits = ray.get(self.controller.limits.remote(), timeout=10)
            served = ray.get(self.controller.served_requests.remote(), timeout=10)
            now = time.time()
            for info in infos:
                try:
                    s = held[info.replica_id] if info.inline else refs[info.replica_id].result(timeout_s=5)
                except Exception:  # noqa: BLE001 - a replica that does not answer is the health check's business
                    continue
                self.samples.append(UsageSample(
                    t=now, replica_id=info.replica_id, model=info.model, engine=s.engine, in_flight=s.in_flight,
                    queue_depth=s.queue_depth, slots=s.slots, prompt_tokens=s.prompt_tokens,
                    output_tokens=s.output_tokens, completed=max(s.completed, served.get(info.replica_id, 0)),
                    batches=s.batches, batch_rows=s.batch_rows,
                    media_items=s.media_items, cached_prompt_tokens=s.cached_prompt_tokens, kv_usage=s.kv_usage,
                    pool_in_flight=pool_side.get(info.replica_id),
                    limit=None if info.replica_id not in limits else int(limits[info.replica_id]["limit"] or 0),
                    cpu_s=s.cpu_s, node_cpu_s=s.node_cpu_s, node_cpus=s.node_cpus,
                ))  # fmt: skip
        except Exception as e:  # noqa: BLE001 - sampling is diagnostics; the run goes on without it
            log.debug("usage sample failed: %r", e)


def cpu_span(ss: list[UsageSample], start: float, end: float) -> tuple[UsageSample, UsageSample] | None:
    """The two samples (one replica's, in time order) its CPU use over [start, end] is counted between: CPU counts
    from the process's start (its load too), so from its last sample before the phase (its first inside when it came
    up later) to its last inside; None without two such samples apart."""
    inside = [s for s in ss if start <= s.t <= end]
    before = [s for s in ss if s.t < start]
    if not inside:
        return None
    first = before[-1] if before else inside[0]
    return (first, inside[-1]) if inside[-1].t > first.t else None


def summarize(samples: list[UsageSample], start: float, end: float,
              startup: dict[str, Startup] | None = None) -> list[ReplicaUsage]:  # fmt: skip
    """Per replica over [start, end] (unix times); counters are differences across the window, taken from the
    last sample at or before ``start`` (0 when none: the replica started inside the window). Busy and mean shares
    are over the samples the replica was up for: one that came up inside the phase is judged from then."""
    by: dict[str, list[UsageSample]] = {}
    for s in sorted(samples, key=lambda s: s.t):
        by.setdefault(s.replica_id, []).append(s)
    out = []
    for rid, ss in sorted(by.items()):
        st = (startup or {}).get(rid, Startup())
        inside = [s for s in ss if start <= s.t <= end]
        before = [s for s in ss if s.t < start]
        base = before[-1] if before else None
        last = inside[-1] if inside else (base or ss[-1])
        busy = [s for s in inside if s.in_flight > 0]
        pool_side = [s.pool_in_flight for s in inside if s.pool_in_flight is not None]
        limits = [s.limit for s in inside if s.limit is not None]

        def delta(field: str, last: UsageSample = last, base: UsageSample | None = base) -> int:
            return int(getattr(last, field) - (getattr(base, field) if base else 0))

        def cores(field: str, span: tuple[UsageSample, UsageSample] | None = cpu_span(ss, start, end)) -> float | None:
            if span is None:
                return None
            first, last = span
            a, b = getattr(first, field), getattr(last, field)
            return None if a is None or b is None else float(b - a) / (last.t - first.t)

        out.append(ReplicaUsage(
            replica_id=rid, model=ss[0].model, engine=ss[0].engine, samples=len(inside),
            busy_fraction=len(busy) / len(inside) if inside else None,
            mean_in_flight=sum(s.in_flight for s in inside) / len(inside) if inside else None,
            peak_queue=max((s.queue_depth for s in inside), default=0), slots=ss[-1].slots,
            prompt_tokens=delta("prompt_tokens"), output_tokens=delta("output_tokens"), requests=delta("completed"),
            batches=delta("batches"), batch_rows=delta("batch_rows"), media_items=delta("media_items"),
            cached_prompt_tokens=delta("cached_prompt_tokens"), first_busy_s=busy[0].t - start if busy else None,
            mean_pool_in_flight=sum(pool_side) / len(pool_side) if pool_side else None,
            peak_limit=max(limits) if limits else None,
            last_busy_s=busy[-1].t - start if busy else None,
            cpu_cores=cores("cpu_s"), node_busy_cores=_at_most(cores("node_cpu_s"), last.node_cpus),
            node_cpus=last.node_cpus,
            up_at_s=max(0.0, ss[0].t - start) if ss else None,
            load_s=st.load_s, up_s=st.up_s,
            deployed_at_s=None if st.deployed_at is None else st.deployed_at - start,
            healthy_at_s=None if st.healthy_at is None else st.healthy_at - start, prestarted=st.prestarted,
        ))  # fmt: skip
    return out


def write_timeline(run_dir: Path, samples: list[UsageSample]) -> None:
    """Appends: a resumed run adds its own samples after the earlier ones."""
    with open(Path(run_dir) / TIMELINE, "a") as f:
        f.writelines(json.dumps(s.model_dump()) + "\n" for s in samples)


def read_timeline(run_dir: Path) -> list[UsageSample]:
    path = Path(run_dir) / TIMELINE
    if not path.exists():
        return []
    return [UsageSample.model_validate_json(x) for x in path.read_text().splitlines() if x.strip()]


def _at_most(busy: float | None, cpus: int | None) -> float | None:
    """A node busy on every core reads a hair above its CPU count (2.0005 of 2 in CI): its counters and the clock
    are read one after the other. No node is busier than its CPUs."""
    return None if busy is None else min(busy, float(cpus)) if cpus else busy
