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
    policy = RoundRobin()
    four = [ReplicaView(x, 0) for x in "abcd"]
    for _ in range(3):
        policy.choose(four, REQ)
    assert policy.choose([ReplicaView("a", 0), ReplicaView("b", 0)], REQ)[0] == "b"  # cursor 3 % 2
    assert policy.choose([ReplicaView("z", 0)], REQ) == ["z"]
    with pytest.raises(ValueError):
        policy.choose([], REQ)


def test_seed_offsets_the_start_so_clients_do_not_rotate_in_lockstep() -> None:
    views = [ReplicaView(f"r{i:02d}", 0) for i in range(16)]
    starts = {RoundRobin(seed=s).choose(views, REQ)[0] for s in range(8)}
    assert len(starts) > 4
    assert RoundRobin(seed=3).choose(views, REQ) == RoundRobin(seed=3).choose(views, REQ)
