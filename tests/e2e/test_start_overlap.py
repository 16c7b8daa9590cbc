"""Requests go to a model as soon as its own replicas are up: a fast model works while a slow one still loads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from testlib.runs import ROOT

from omnieval import run_suite
from omnieval._replica_usage import read_timeline
from omnieval.core import SuiteConfig

pytestmark = [pytest.mark.slow, pytest.mark.ray]


def test_first_model_answers_while_the_second_loads(local_ray: None, tmp_path: Path) -> None:
    """Two llama.cpp models started one after the other (``start_models: sequential``): the second's replica is
    deployed only once the first is healthy, so the first model's engine working on a request before the second's
    replica is up shows dispatch did not wait for the whole pool. Read off the engines' own counters in the run's
    timeline, against the controller's moment the second turned healthy."""
    qs = yaml.safe_load((ROOT / "examples/quickstart.yaml").read_text())
    base = qs["models"][0]
    suite = SuiteConfig.model_validate({
        "name": "overlap",
        "models": [{**base, "name": "early"}, {**base, "name": "late"}],
        "benchmarks": [{"name": "mmlu_tiny", "limit": 8}, {"name": "asdiv_tiny", "limit": 8}],
        "generation": qs["generation"],
        "pool": {**qs["pool"], "start_models": "sequential", "usage_sample_period_s": 0.2},
        "cache": {"enabled": False},
    })  # fmt: skip
    res = run_suite(suite, output_dir=str(tmp_path), show_progress=False)
    assert res.manifest.status == "completed"
    assert sorted((r.model, r.benchmark, r.index) for r in res.records) == sorted(
        (m, b, i) for m in ("early", "late") for b in ("mmlu_tiny", "asdiv_tiny") for i in range(8)
    )  # every sample exactly once
    # two llama-servers on one node split its cores (4 logical CPUs here, the machine's own cores fewer or equal):
    # each spinning on every core took this test 114-318 s in CI, one thread each about 30 s
    cores = min(4, len(os.sched_getaffinity(0)))
    assert {m.name: m.engine_kwargs.get("threads") for m in res.manifest.models} == {
        "early": max(1, cores // 2), "late": max(1, cores // 2)}
    tm = res.manifest.timings
    assert tm["up_s.early"] < tm["up_s.late"] == pytest.approx(tm["pool_up_s"])
    usage = {u.model: u for u in res.manifest.replica_usage}
    # clients reach llama-server directly, so the replica never sees a request: the count is what clients saw
    assert usage["early"].requests == usage["late"].requests == 16
    assert usage["late"].healthy_at_s is not None
    late_up = tm["inference_start_unix"] + usage["late"].healthy_at_s  # the controller's moment, not a sample's
    early_before = [s for s in read_timeline(res.run_dir) if s.model == "early" and s.t < late_up]
    assert any(s.in_flight > 0 or s.output_tokens > 0 for s in early_before), (
        "the early model's engine had no request before the late model's replica came up"
    )
    assert usage["early"].up_at_s is not None and usage["late"].up_at_s is not None
    assert usage["early"].up_at_s < usage["late"].up_at_s  # the phase began before either: dispatch waits per model
    for u in usage.values():  # each engine's own load, inside its deploy-to-healthy time
        assert u.load_s is not None and u.up_s is not None and 0 < u.load_s <= u.up_s


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
def test_replicas_of_one_model_load_together(local_ray: None, tmp_path: Path, mode: str) -> None:
    """``replicas: 2``: under ``start_models: parallel`` both deploys are under way before either replica is
    healthy; ``sequential`` (a node too small for two loads at once) starts the second only once the first is up.
    Read off the controller's own deploy and healthy moments, not the sampler's, which lag on a loaded machine."""
    qs = yaml.safe_load((ROOT / "examples/quickstart.yaml").read_text())
    suite = SuiteConfig.model_validate({
        "name": f"replicas-{mode}",
        "models": [{**qs["models"][0], "replicas": 2}],
        "benchmarks": [{"name": "mmlu_tiny", "limit": 8}],
        "generation": qs["generation"],
        "pool": {**qs["pool"], "start_models": mode},
        "cache": {"enabled": False},
    })  # fmt: skip
    res = run_suite(suite, output_dir=str(tmp_path), show_progress=False)
    assert res.manifest.status == "completed"
    assert sorted(r.index for r in res.records) == list(range(8))
    usage = sorted(res.manifest.replica_usage, key=lambda u: u.healthy_at_s if u.healthy_at_s is not None else 0.0)
    assert len(usage) == 2 and all(u.deployed_at_s is not None and u.healthy_at_s is not None for u in usage)
    first, second = usage
    assert first.healthy_at_s is not None and second.deployed_at_s is not None
    for u in usage:  # the controller's moments agree with its deploy-to-healthy time
        assert u.healthy_at_s - u.deployed_at_s == pytest.approx(u.up_s, abs=0.05)  # type: ignore[operator]
    if mode == "parallel":
        assert second.deployed_at_s < first.healthy_at_s, "the second replica's deploy waited for the first"
    else:
        assert second.deployed_at_s >= first.healthy_at_s, "the second replica deployed while the first loaded"
