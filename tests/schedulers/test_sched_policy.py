from collections.abc import Sequence

import pytest

from schedulers import ReplicaView, RoutingPolicy, RoutingRequest
from schedulers._policy import rank_by_load, require_candidates


class _First(RoutingPolicy):
    name = "first"

    def choose(self, candidates: Sequence[ReplicaView], request: RoutingRequest) -> list[str]:
        return [v.replica_id for v in candidates]


def test_hooks_default_to_noops() -> None:
    policy = _First()
    req = RoutingRequest("m", "p")
    policy.on_dispatch("r0", req)
    policy.on_complete("r0", req, ok=False, latency_s=1.0)
    policy.remove_replica("r0")
    assert policy.choose([ReplicaView("r0", 0)], req) == ["r0"]


def test_choose_is_abstract() -> None:
    with pytest.raises(TypeError):
        RoutingPolicy()  # type: ignore[abstract]


def test_helpers() -> None:
    with pytest.raises(ValueError):
        require_candidates([])
    views = [ReplicaView("b", 1), ReplicaView("a", 1), ReplicaView("c", 0, queue_depth=0)]
    assert rank_by_load(views) == ["c", "a", "b"]
