"""The SIMULATED paper setting: conventional jobs at batch 1, a heterogeneous pool, honest labels."""

from __future__ import annotations

import pytest

from omnieval.perf._federated_sim import (
    MODALITIES,
    Modality,
    _scaled,
    _schedule,
    conventional_job_s,
    markdown_table,
    paper_setting,
    simulate_model,
)
from omnieval.perf._sim import PoolSim, SimConfig
from omnieval.perf._workloads import make_workload
from serving import DEFAULT_PROFILE


def test_conventional_job_is_load_plus_every_request_alone() -> None:
    p, m = DEFAULT_PROFILE, Modality("t", 10, 100, 20)
    per = p.prefill_s(100) + 20 * p.step_s(1, 110)
    assert conventional_job_s(m, p, 5.0) == pytest.approx(5.0 + 10 * per)
    assert conventional_job_s(m, _scaled(p, 2.0), 5.0) == pytest.approx(5.0 + 20 * per)  # a 2x slower GPU


def test_jobs_are_scheduled_longest_first_to_the_earliest_finish() -> None:
    done = _schedule({"a": {"g0": 10.0, "g1": 20.0}, "b": {"g0": 6.0, "g1": 12.0}, "c": {"g0": 2.0, "g1": 4.0}})
    assert done == {"a": 10.0, "b": 12.0, "c": 12.0}  # b cannot beat 12 on either GPU; c then on g0 at 10 + 2


def test_a_slow_replica_lengthens_the_pool_and_takes_less_work() -> None:
    reqs = make_workload("uniform", 256, DEFAULT_PROFILE)
    cfg = SimConfig(replicas=2, clients=2)
    same = PoolSim(cfg, [DEFAULT_PROFILE, DEFAULT_PROFILE], [*reqs]).run()
    mixed_sim = PoolSim(cfg, [DEFAULT_PROFILE, _scaled(DEFAULT_PROFILE, 3.0)], make_workload("uniform", 256, DEFAULT_PROFILE))
    mixed = mixed_sim.run()
    assert mixed["makespan_s"] > same["makespan_s"]
    fast, slow = (r.completed for r in mixed_sim.replicas)
    assert fast > slow > 0  # work flows to the replica that returns it sooner
    with pytest.raises(ValueError, match="3 profiles for 2 replicas"):
        PoolSim(cfg, [DEFAULT_PROFILE] * 3, reqs)


def test_paper_setting_is_labelled_and_pooling_beats_batch_one() -> None:
    r = simulate_model("m", 1.0, DEFAULT_PROFILE, fast=1, slow=2, slow_factor=2.0, load_s=10.0, clients=4,
                       policy="p2c")  # fmt: skip
    assert set(r["modalities"]) == {m.name for m in MODALITIES}
    assert all(v["federated_s"] > 10.0 for v in r["modalities"].values())  # loads included
    assert r["modalities"]["text"]["speedup"] > 1  # decode-heavy: continuous batching's gain
    res = paper_setting(DEFAULT_PROFILE, log=lambda m: None)
    assert res["simulated"] is True and res["label"].startswith("SIMULATED")
    assert len(res["rows"]) == 4 and "(SIMULATED)" in markdown_table(res)
