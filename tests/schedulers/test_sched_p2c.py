from collections import Counter

import pytest

from schedulers import LeastLoaded, PowerOfTwoChoices, ReplicaView, RoutingRequest

REQ = RoutingRequest("m", "prompt")


def test_two_candidates_always_picks_less_loaded() -> None:
    policy = PowerOfTwoChoices(seed=0)
    views = [ReplicaView("busy", 5, queue_depth=3), ReplicaView("idle", 1, queue_depth=2)]
    for _ in range(50):
        assert policy.choose(views, REQ) == ["idle", "busy"]


def test_picks_less_loaded_of_the_sampled_pair_not_global_min() -> None:
    views = [ReplicaView("r0", 0), ReplicaView("r1", 5), ReplicaView("r2", 9)]
    policy = PowerOfTwoChoices(seed=1)
    winners = Counter(policy.choose(views, REQ)[0] for _ in range(600))
    # r2 loses every pair; r1 wins only the (r1, r2) pair (1/3); r0 wins the other two pairs (2/3).
    assert winners["r2"] == 0
    assert 150 < winners["r1"] < 250
    assert 350 < winners["r0"] < 450


def test_ranking_contains_all_and_rest_by_load() -> None:
    policy = PowerOfTwoChoices(seed=3)
    views = [ReplicaView(f"r{i}", load) for i, load in enumerate([4, 0, 7, 2, 9])]
    for _ in range(30):
        ranked = policy.choose(views, REQ)
        assert sorted(ranked) == sorted(v.replica_id for v in views)
        loads = {v.replica_id: v.load for v in views}
        rest = [loads[r] for r in ranked[1:]]
        assert rest == sorted(rest)
        assert ranked[0] != "r4"  # the maximum can never win a pairwise comparison


def test_ties_are_broken_randomly_and_seeded() -> None:
    views = [ReplicaView("a", 1), ReplicaView("b", 1)]
    policy = PowerOfTwoChoices(seed=7)
    seq = [policy.choose(views, REQ)[0] for _ in range(200)]
    assert 60 < seq.count("a") < 140
    again = PowerOfTwoChoices(seed=7)
    assert [again.choose(views, REQ)[0] for _ in range(200)] == seq


def test_single_and_empty() -> None:
    policy = PowerOfTwoChoices(seed=0)
    assert policy.choose([ReplicaView("only", 100)], REQ) == ["only"]
    with pytest.raises(ValueError):
        policy.choose([], REQ)


def test_spreads_load_when_stats_are_fresh() -> None:
    policy = PowerOfTwoChoices(seed=42)
    outstanding = dict.fromkeys([f"r{i}" for i in range(8)], 0)
    for _ in range(800):
        views = [ReplicaView(r, n) for r, n in outstanding.items()]
        outstanding[policy.choose(views, REQ)[0]] += 1
    assert max(outstanding.values()) - min(outstanding.values()) <= 3


def test_avoids_herding_on_stale_stats() -> None:
    """A burst routed on one stale snapshot: least-loaded sends it all to one replica, p2c spreads it."""
    stale = [ReplicaView("r0", 0)] + [ReplicaView(f"r{i}", 1) for i in range(1, 4)]
    p2c, ll = PowerOfTwoChoices(seed=5), LeastLoaded(seed=5)
    p2c_counts = Counter(p2c.choose(stale, REQ)[0] for _ in range(400))
    ll_counts = Counter(ll.choose(stale, REQ)[0] for _ in range(400))
    assert ll_counts["r0"] == 400
    assert p2c_counts["r0"] < 0.6 * 400  # r0 is in half of the pairs
    assert len(p2c_counts) == 4
