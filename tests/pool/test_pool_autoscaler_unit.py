"""Scaling decisions from health snapshots (no Ray): scale out when saturated, drain idle surplus, then remove."""

from __future__ import annotations

from omnieval.core import ModelConfig
from pool._autoscaler import DRAIN_GRACE_S, plan_scaling, saturated
from pool._types import ReplicaInfo


def rep(rid: str, *, in_flight: int = 0, slots: int = 2, state: str = "healthy", model: str = "m") -> ReplicaInfo:
    return ReplicaInfo(
        replica_id=rid, model=model, fingerprint="f", engine="llamacpp", state=state, in_flight=in_flight, slots=slots
    )  # type: ignore[arg-type]


def cfg(replicas: int = 1, max_replicas: int | None = 2) -> ModelConfig:
    return ModelConfig(name="m", source={"kind": "path", "path": "/x"}, replicas=replicas, max_replicas=max_replicas)


def test_saturated_is_aggregate_over_healthy_replicas() -> None:
    assert saturated([rep("a", in_flight=2)])
    assert not saturated([rep("a", in_flight=3), rep("b", in_flight=0)])  # 3 < 4 slots: routing, not capacity
    assert not saturated([rep("a", in_flight=5, state="unhealthy")])
    assert not saturated([])


def test_scale_out_only_when_saturated_below_max_and_nothing_starting() -> None:
    busy = [rep("a", in_flight=4)]
    assert plan_scaling({"m": cfg()}, busy, {}, {}, 0.0, 60).scale_out == ["m"]
    assert plan_scaling({"m": cfg(max_replicas=None)}, busy, {}, {}, 0.0, 60).scale_out == []
    assert plan_scaling({"m": cfg(max_replicas=1)}, busy, {}, {}, 0.0, 60).scale_out == []
    starting = [*busy, rep("b", state="starting")]
    assert plan_scaling({"m": cfg(max_replicas=3)}, starting, {}, {}, 0.0, 60).scale_out == []
    assert plan_scaling({"m": cfg()}, [rep("a", in_flight=1)], {}, {}, 0.0, 60).scale_out == []


def test_idle_surplus_is_drained_longest_idle_first_never_below_floor() -> None:
    reps = [rep("a"), rep("b"), rep("c")]
    idle = {"a": 50.0, "b": 10.0, "c": 95.0}
    plan = plan_scaling({"m": cfg(replicas=1, max_replicas=3)}, reps, idle, {}, 100.0, 30.0)
    assert plan.drain == ["b", "a"]  # c idle only 5 s; the floor of 1 keeps one anyway
    assert plan_scaling({"m": cfg(replicas=3, max_replicas=3)}, reps, idle, {}, 100.0, 30.0).drain == []
    busy_pool = [rep("a", in_flight=2), rep("b", in_flight=2), rep("c")]
    assert plan_scaling({"m": cfg(replicas=1, max_replicas=3)}, busy_pool, idle, {}, 100.0, 30.0).drain == []


def test_drained_replica_removed_after_grace_once_empty() -> None:
    reps = [rep("a"), rep("b", state="draining")]
    assert plan_scaling({"m": cfg()}, reps, {}, {"b": 100.0}, 100.0 + DRAIN_GRACE_S / 2, 1.0).remove == []
    assert plan_scaling({"m": cfg()}, reps, {}, {"b": 100.0}, 100.0 + DRAIN_GRACE_S, 1.0).remove == ["b"]
    reps[1].in_flight = 1
    assert plan_scaling({"m": cfg()}, reps, {}, {"b": 100.0}, 200.0, 1.0).remove == []
