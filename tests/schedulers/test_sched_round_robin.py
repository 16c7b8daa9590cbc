import pytest

from schedulers import ReplicaView, RoundRobin, RoutingRequest

REQ = RoutingRequest("m", "p")


def test_cycles_over_sorted_ids_ignoring_load() -> None:
    policy = RoundRobin()
    views = [ReplicaView("c", 0), ReplicaView("a", 50), ReplicaView("b", 9)]
    firsts = [policy.choose(views, REQ)[0] for _ in range(6)]
    assert firsts == ["a", "b", "c", "a", "b", "c"]


def test_ranking_is_a_rotation() -> None:
    policy = RoundRobin()
    views = [ReplicaView(x, 0) for x in "abc"]
    assert policy.choose(views, REQ) == ["a", "b", "c"]
    assert policy.choose(views, REQ) == ["b", "c", "a"]


def test_wraps_when_candidates_shrink_and_handles_edges() -> None:
    policy = RoundRobin(seed=123)
    four = [ReplicaView(x, 0) for x in "abcd"]
    for _ in range(3):
        policy.choose(four, REQ)
    assert policy.choose([ReplicaView("a", 0), ReplicaView("b", 0)], REQ)[0] == "b"  # cursor 3 % 2
    assert policy.choose([ReplicaView("z", 0)], REQ) == ["z"]
    with pytest.raises(ValueError):
        policy.choose([], REQ)
