import pytest

from schedulers import PrefixAware, ReplicaView, RoutingRequest

FEWSHOT = "".join(f"Q: example question {i}?\nA: answer {i}.\n\n" for i in range(40))  # ~1.3k shared chars


def _req(suffix: str, prefix: str = FEWSHOT, model: str = "m") -> RoutingRequest:
    return RoutingRequest(model, prefix + f"Q: {suffix}?\nA:")


def _views(loads: dict[str, int]) -> list[ReplicaView]:
    return [ReplicaView(r, n) for r, n in loads.items()]


def _route(policy: PrefixAware, views: list[ReplicaView], req: RoutingRequest) -> str:
    chosen = policy.choose(views, req)[0]
    policy.on_dispatch(chosen, req)
    return chosen


def test_repeated_fewshot_prefix_sticks_to_one_replica_when_balanced() -> None:
    policy = PrefixAware()
    loads = {"r0": 3, "r1": 2, "r2": 4}
    first = _route(policy, _views(loads), _req("item 0"))
    for i in range(1, 20):
        loads[first] += 1  # mild imbalance stays under the thresholds
        assert _route(policy, _views(loads), _req(f"item {i}")) == first


def test_routes_to_shortest_queue_when_imbalanced() -> None:
    policy = PrefixAware()
    views = _views({"r0": 0, "r1": 0})
    home = _route(policy, views, _req("warm"))
    other = "r1" if home == "r0" else "r0"
    skewed = _views({home: 40, other: 5})  # 40 - 5 > 32 and 40 > 1.5 * 5
    assert policy.choose(skewed, _req("next")) == [other, home]
    within_abs = _views({home: 30, other: 0})  # relative skew but absolute gap <= 32: keep affinity
    assert policy.choose(within_abs, _req("next"))[0] == home
    within_rel = _views({home: 100, other: 70})  # absolute gap > 32 but 100 < 1.5 * 70: keep affinity
    assert policy.choose(within_rel, _req("next"))[0] == home


def test_new_prefix_families_go_to_smallest_tree() -> None:
    policy = PrefixAware()
    views = _views({"r0": 0, "r1": 0, "r2": 0})
    homes = [_route(policy, views, _req("x", prefix=f"task-{t} " * 200)) for t in range(3)]
    assert sorted(homes) == ["r0", "r1", "r2"]
    # Each family then keeps going home.
    for t in range(3):
        assert policy.choose(views, _req("y", prefix=f"task-{t} " * 200))[0] == homes[t]


def test_below_cache_threshold_falls_back_to_smallest_tree() -> None:
    policy = PrefixAware(cache_threshold=0.5)
    views = _views({"a": 0, "b": 0})
    policy.on_dispatch("a", RoutingRequest("m", "common-" + "x" * 100))
    policy.on_dispatch("b", RoutingRequest("m", "y" * 20))
    # Shares only "common-" (7 of ~107 chars) with a: b has the smaller tree and wins.
    assert policy.choose(views, RoutingRequest("m", "common-" + "z" * 100))[0] == "b"


def test_trees_are_per_model() -> None:
    policy = PrefixAware()
    views = _views({"a": 0, "b": 0})
    policy.on_dispatch("b", _req("q", model="m1"))
    assert policy.choose(views, _req("q2", model="m1"))[0] == "b"
    assert policy.tree("m2").match(FEWSHOT) == {}


def test_lru_bounds_memory_and_remove_replica() -> None:
    policy = PrefixAware(max_chars_per_replica=5_000)
    for i in range(50):
        policy.on_dispatch("a", _req(f"{i}", prefix=f"family {i} " * 30))
    tree = policy.tree("m")
    assert 0 < tree.chars("a") <= 5_000
    policy.remove_replica("a")
    assert tree.chars("a") == 0 and tree.num_nodes() == 0


def test_ranking_edges() -> None:
    policy = PrefixAware()
    assert policy.choose([ReplicaView("solo", 99)], _req("q")) == ["solo"]
    with pytest.raises(ValueError):
        policy.choose([], _req("q"))
    views = _views({"a": 5, "b": 1, "c": 3})
    ranked = policy.choose(views, RoutingRequest("m", ""))
    assert sorted(ranked) == ["a", "b", "c"] and ranked[1:] == sorted(ranked[1:], key={"a": 5, "b": 1, "c": 3}.get)
    with pytest.raises(ValueError):
        PrefixAware(cache_threshold=2.0)


def test_seeded_tiebreak_spreads_new_prompts_across_policies() -> None:
    """Each client has its own policy; with empty trees they must not all send to the lowest id."""
    from schedulers import PrefixAware

    views = [ReplicaView(f"r{i:02d}", 0) for i in range(16)]
    firsts = {PrefixAware(seed=s).choose(views, RoutingRequest("m", "new prompt"))[0] for s in range(8)}
    assert len(firsts) > 4
