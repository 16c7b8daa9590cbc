import itertools
import random

import pytest

from schedulers import estimate_cost, makespan, plan_shards


def _ident(x: float) -> float:
    return x


def _graham(m: int) -> float:
    return 4 / 3 - 1 / (3 * m)


def _optimal(costs: list[float], m: int) -> float:
    """Exact optimum by brute force (small instances); the first item is pinned to shard 0 by symmetry."""
    best = float("inf")
    for rest in itertools.product(range(m), repeat=len(costs) - 1):
        loads = [0.0] * m
        for c, s in zip(costs, (0, *rest), strict=True):
            loads[s] += c
        best = min(best, max(loads))
    return best


def test_returns_all_items_in_num_shards_lists() -> None:
    items = list(range(10))
    shards = plan_shards(items, 4, lambda i: float(i))
    assert len(shards) == 4
    assert sorted(x for s in shards for x in s) == items
    assert all(s == sorted(s) for s in shards)  # input order kept within a shard
    assert plan_shards([5.0], 3, _ident) == [[5.0], [], []]
    assert plan_shards([], 2, _ident) == [[], []]


def test_deterministic() -> None:
    rng = random.Random(0)
    items = [rng.choice([1.0, 2.0, 3.0]) for _ in range(50)]  # many ties
    assert plan_shards(items, 5, _ident) == plan_shards(list(items), 5, _ident)


def test_within_graham_bound_of_exact_optimum() -> None:
    rng = random.Random(1)
    for _ in range(25):
        m = rng.randint(2, 3)
        costs = [float(rng.randint(1, 30)) for _ in range(rng.randint(3, 7))]
        got = makespan(plan_shards(costs, m, _ident), _ident)
        assert got <= _graham(m) * _optimal(costs, m) + 1e-9


def test_within_graham_bound_of_lower_bound_on_large_random_instances() -> None:
    rng = random.Random(2)
    for _ in range(30):
        m = rng.randint(2, 16)
        costs = [rng.expovariate(1 / 50) for _ in range(rng.randint(10 * m, 40 * m))]
        lower = max(max(costs), sum(costs) / m)  # <= OPT
        got = makespan(plan_shards(costs, m, _ident), _ident)
        assert lower - 1e-9 <= got <= _graham(m) * lower


def test_beats_naive_chunking_on_skewed_instances() -> None:
    m = 4
    strided = [100.0 if i % m == 0 else 1.0 for i in range(40)]  # round-robin dealing puts every heavy on shard 0
    naive_rr = makespan([strided[k::m] for k in range(m)], _ident)
    assert makespan(plan_shards(strided, m, _ident), _ident) < naive_rr / 3
    front = [100.0] * 8 + [1.0] * 32  # contiguous chunks put the heavy head on one shard
    chunk = len(front) // m
    naive_chunks = makespan([front[k * chunk : (k + 1) * chunk] for k in range(m)], _ident)
    assert makespan(plan_shards(front, m, _ident), _ident) < naive_chunks / 3


def test_estimate_cost_and_makespan() -> None:
    assert estimate_cost(400, 0) == 100.0
    assert estimate_cost(400, 10) == 140.0
    assert estimate_cost(100, 10, chars_per_token=2.0, decode_weight=1.0) == 60.0
    assert makespan([], _ident) == 0.0
    assert makespan([[1.0, 2.0], [4.0]], _ident) == 4.0


def test_validation() -> None:
    with pytest.raises(ValueError):
        plan_shards([1.0], 0, _ident)
    with pytest.raises(ValueError):
        plan_shards([-1.0], 2, _ident)
    with pytest.raises(ValueError):
        estimate_cost(-1, 0)
