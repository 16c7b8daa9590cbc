"""Elastic scaling decisions for the pool controller (pure: state in, plan out, so it is testable without Ray).

Scale-out: a model with ``max_replicas`` above its live replica count whose replicas are saturated (requests in
the engines ≥ their batch slots, i.e. work is queueing) asks for one more replica; the controller adds it only where
a node has room *now*, so a node joining with idle GPUs/CPUs is used as soon as it registers. One replica starts at a
time per model so a burst does not over-provision before the new replica takes load.

Scale-in: replicas above the model's ``replicas`` floor that stayed idle for ``idle_s`` are first *drained*
(dispatchers stop routing to them at their next refresh) and deleted on a later pass once nothing is in flight.
Everything left is deleted when the last run using the model releases it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from omnieval.core import ModelConfig
from pool._types import ReplicaInfo

DRAIN_GRACE_S = 2.0
"""Seconds a drained replica stays up before deletion: longer than a dispatcher's refresh interval (1 s)."""


@dataclass
class ScalePlan:
    scale_out: list[str] = field(default_factory=list)
    """Models that should get one more replica (where one fits now)."""
    drain: list[str] = field(default_factory=list)
    """Idle surplus replicas to stop routing to."""
    remove: list[str] = field(default_factory=list)
    """Drained replicas with nothing in flight: delete."""


@dataclass
class ScaleResult:
    added: list[str] = field(default_factory=list)
    """Replica ids started by this pass."""
    drained: list[str] = field(default_factory=list)
    """Replica ids set to draining."""
    removed: list[str] = field(default_factory=list)
    """Replica ids deleted."""
    waiting: dict[str, str] = field(default_factory=dict)
    """Model → why a wanted scale-out did not happen (no node with room)."""


def saturated(replicas: Iterable[ReplicaInfo]) -> bool:
    """Healthy replicas hold at least as many requests as they have batch slots (more work would queue)."""
    healthy = [r for r in replicas if r.state == "healthy"]
    if not healthy:
        return False
    return sum(r.in_flight for r in healthy) >= sum(max(r.slots, 1) for r in healthy)


def plan_scaling(
    models: Mapping[str, ModelConfig],
    replicas: Iterable[ReplicaInfo],
    idle_since: Mapping[str, float],
    drained_at: Mapping[str, float],
    now: float,
    idle_s: float,
) -> ScalePlan:
    """Decide scale-out / drain / removal from the controller's last health snapshot."""
    plan = ScalePlan()
    by_model: dict[str, list[ReplicaInfo]] = {}
    for r in replicas:
        by_model.setdefault(r.model, []).append(r)
    for model, cfg in models.items():
        reps = by_model.get(model, [])
        for r in reps:
            if r.state == "draining" and r.in_flight == 0 and now - drained_at.get(r.replica_id, now) >= DRAIN_GRACE_S:
                plan.remove.append(r.replica_id)
        live = [r for r in reps if r.state not in ("dead", "draining")]
        if any(r.state == "starting" for r in live):
            continue  # one scale step at a time
        if cfg.max_replicas is not None and len(live) < cfg.max_replicas and saturated(live):
            plan.scale_out.append(model)
            continue
        surplus = len(live) - cfg.replicas
        if surplus <= 0 or saturated(live):
            continue
        idle = [
            r for r in live
            if r.state == "healthy" and r.in_flight == 0 and now - idle_since.get(r.replica_id, now) >= idle_s
        ]  # fmt: skip
        idle.sort(key=lambda r: idle_since.get(r.replica_id, now))  # longest idle first
        plan.drain += [r.replica_id for r in idle[:surplus]]
    return plan
