"""10k requests through the router against real llama.cpp replicas: no errors, no leaked in-flight slots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import ray

from omnieval import run_suite
from omnieval._config import SuiteConfig
from omnieval._defaults import DEFAULT_MODEL_SOURCE
from omnieval.benchmarks import BENCHMARKS, BenchmarkSpec, MetricSpec

pytestmark = [pytest.mark.slow, pytest.mark.ray]
N = 10_000


def test_ten_thousand_requests(local_ray: None, tmp_path: Path) -> None:
    data = tmp_path / "load.jsonl"
    data.write_text("".join(json.dumps({"question": f"Say {i}.", "answer": str(i)}) + "\n" for i in range(N)))
    BENCHMARKS.register("load10k", BenchmarkSpec(
        name="load10k", version="1", task_type="qa", data_file=str(data),
        loader="omnieval.benchmarks._loaders:math_word_problem", prompt_template="{question}",
        uniform_prompt_template="{question}", postprocessor="number", metrics=(MetricSpec(name="exact_match"),),
        generation={"max_tokens": 1},
    ), replace=True)  # fmt: skip
    suite = SuiteConfig.model_validate({
        "name": "load",
        "models": [{"name": "smol", "source": DEFAULT_MODEL_SOURCE.model_dump(), "replicas": 2,
                    "resources": {"num_cpus": 1}, "engine_kwargs": {"parallel": 8, "ctx_per_slot": 256, "threads": 1}}],
        "benchmarks": [{"name": "load10k"}],
        "pool": {"clients": 2, "max_inflight_per_replica": 8, "chunk_size": 1000},
        "cache": {"enabled": False},
    })  # fmt: skip
    res = run_suite(suite, output_dir=str(tmp_path / "runs"), show_progress=False, keep_pool=True)
    (score,) = res.manifest.scores
    assert score.num_samples == N and score.num_errors == 0
    assert len({r.index for r in res.records}) == N
    assert {r.output.replica for r in res.records if r.output} and len({r.output.replica for r in res.records if r.output}) == 2
    controller = ray.get_actor("omnieval-pool", namespace="omnieval")
    stats = ray.get(controller.check_now.remote())
    assert all(s.in_flight == 0 and s.queue_depth == 0 for s in stats), stats  # nothing left in flight
    assert sum(1 for r in res.records if r.output and r.output.finish_reason == "length") == N
