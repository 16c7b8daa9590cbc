"""The discrete-event pool simulation: exact single-request timing, conservation, and policy effects."""

from __future__ import annotations

import pytest

from omnieval.perf._sim import SimConfig, simulate
from omnieval.perf._workloads import SimRequest, make_workload
from serving._simulated import DEFAULT_PROFILE, PrefixCache, block_hashes

P = DEFAULT_PROFILE.with_(step_base_s=0.01, step_per_seq_s=0.005, step_per_kv_token_s=0.0, prefill_base_s=0.0,
                          prefill_per_token_s=0.001)  # fmt: skip


def test_single_request_latency_is_prefill_plus_decode_plus_two_hops() -> None:
    req = SimRequest(rid=0, group="g", prompt="x" * 400, blocks=(), n_prompt=100, n_out=20, max_tokens=20)
    m = simulate(SimConfig(replicas=1, clients=1, rpc_s=0.002, rpc_jitter=0.0), P, [req])
    expected = 0.002 + 100 * 0.001 + 20 * P.step_s(1) + 0.002
    assert m["makespan_s"] == pytest.approx(expected, rel=1e-9)


def test_batched_requests_share_steps() -> None:
    reqs = [SimRequest(rid=i, group="g", prompt=f"{i}" * 40, blocks=(), n_prompt=10, n_out=10, max_tokens=10)
            for i in range(4)]  # fmt: skip
    m = simulate(SimConfig(replicas=1, clients=1, rpc_s=0.0), P, reqs)
    # all four are admitted together: 4 prefills stall decode, then 10 steps at batch 4
    assert m["makespan_s"] == pytest.approx(40 * 0.001 + 10 * P.step_s(4), rel=1e-9)


def test_every_request_completes_once_and_tokens_are_conserved() -> None:
    reqs = make_workload("skewed", 600, P, seed=3)
    m = simulate(SimConfig(replicas=8, clients=3, policy="p2c"), P, reqs)
    assert m["requests"] == 600
    assert m["output_tokens_per_s"] * m["makespan_s"] == pytest.approx(sum(r.n_out for r in reqs))
    assert 0 < m["replica_busy_mean"] <= 1.0


def test_p2c_beats_round_robin_on_skewed_lengths() -> None:
    # overloaded pool (more in flight than slots), heavy-tailed lengths: load-blind rotation queues work behind long
    # requests; p2c's tail and makespan were lower for seeds 0-4 (seed 0 is asserted; the sim is deterministic)
    reqs = make_workload("skewed", 3000, P, seed=0)
    cfg = {"replicas": 16, "clients": 4, "chunks_per_client": 8}
    p2c = simulate(SimConfig(policy="p2c", **cfg), P, reqs)
    rr = simulate(SimConfig(policy="round_robin", **cfg), P, reqs)
    assert p2c["makespan_s"] < rr["makespan_s"]
    assert p2c["latency_p99_s"] < rr["latency_p99_s"]


def test_prefix_aware_gets_more_cache_hits_on_prefix_heavy() -> None:
    reqs = make_workload("prefix_heavy", 2000, P, seed=0)
    cfg = {"replicas": 16, "clients": 4}
    hits = {pol: simulate(SimConfig(policy=pol, **cfg), P, reqs)["prefix_cache_hit_rate"]
            for pol in ("prefix_aware", "p2c", "round_robin")}  # fmt: skip
    assert hits["prefix_aware"] > hits["p2c"] + 0.05
    assert hits["prefix_aware"] > hits["round_robin"] + 0.05


def test_prefix_cache_counts_leading_blocks_and_evicts_lru() -> None:
    c = PrefixCache(capacity_blocks=4)
    a = block_hashes("a" * 64 + "b" * 64 + "c" * 64, 64)
    assert c.lookup_insert(a) == 0
    assert c.lookup_insert(a) == 3
    assert c.lookup_insert(block_hashes("a" * 64 + "z" * 64, 64)) == 1  # shares only the first block
    c.lookup_insert(block_hashes("q" * 256, 64))  # 4 new blocks push everything else out
    assert c.lookup_insert(a) == 0


def test_workloads_are_deterministic_and_prefix_heavy_shares_prefixes() -> None:
    a = make_workload("prefix_heavy", 100, P, seed=5)
    b = make_workload("prefix_heavy", 100, P, seed=5)
    assert [r.prompt for r in a] == [r.prompt for r in b]
    same_group = [r for r in a if r.group == a[0].group]
    assert len(same_group) > 1 and same_group[0].blocks[:10] == same_group[1].blocks[:10]
    with pytest.raises(ValueError, match="unknown workload"):
        make_workload("nope", 1, P)
