from collections import Counter

import pytest

from schedulers import LeastLoaded, ReplicaView, RoutingRequest

REQ = RoutingRequest("m", "p")


def test_sorts_by_combined_load() -> None:
    views = [ReplicaView("a", 3, queue_depth=4), ReplicaView("b", 0, queue_depth=9), ReplicaView("c", 2)]
    assert LeastLoaded(seed=0).choose(views, REQ) == ["c", "a", "b"]


def test_exact_ties_are_randomised_and_seeded() -> None:
    views = [ReplicaView(x, 0) for x in "abcd"]
    policy = LeastLoaded(seed=1)
    firsts = [policy.choose(views, REQ)[0] for _ in range(200)]
    assert set(Counter(firsts)) == set("abcd")
    other = LeastLoaded(seed=1)
    assert [other.choose(views, REQ)[0] for _ in range(200)] == firsts


def test_single_and_empty() -> None:
    assert LeastLoaded().choose([ReplicaView("x", 7)], REQ) == ["x"]
    with pytest.raises(ValueError):
        LeastLoaded().choose([], REQ)
