"""Load through the pool: 10k requests against two managed INSTANT-server replicas (the pool itself is the only cost,
so this exercises routing, adaptive limits and accounting at line rate), then 400 against two real llama.cpp
replicas. No errors, every sample exactly once, both replicas used, nothing left in flight."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import ray

from omnieval import run_suite
from omnieval._defaults import DEFAULT_MODEL_SOURCE
from omnieval.benchmarks import BENCHMARKS, BenchmarkSpec, MetricSpec
from omnieval.core import SuiteConfig
from serving._instant import INSTANT_TEXT

pytestmark = [pytest.mark.slow, pytest.mark.ray]


def _register(tmp_path: Path, n: int) -> str:
    data = tmp_path / f"load{n}.jsonl"
    data.write_text("".join(json.dumps({"question": f"Say {i}.", "answer": str(i)}) + "\n" for i in range(n)))
    BENCHMARKS.register(f"load{n}", BenchmarkSpec(
        name=f"load{n}", version="1", task_type="qa", data_file=str(data),
        loader="omnieval.benchmarks._loaders:math_word_problem", prompt_template="{question}",
        uniform_prompt_template="{question}", postprocessor="number", metrics=(MetricSpec(name="exact_match"),),
        generation={"max_tokens": 1},
    ), replace=True)  # fmt: skip
    return f"load{n}"


def _run(tmp_path: Path, name: str, n: int, model: dict[str, Any]) -> Any:
    suite = SuiteConfig.model_validate({
        "name": "load", "models": [model], "benchmarks": [{"name": _register(tmp_path, n)}],
        "pool": {"clients": 2, "chunk_size": 250}, "cache": {"enabled": False},
    })  # fmt: skip
    res = run_suite(suite, output_dir=str(tmp_path / name), show_progress=False, keep_pool=True)
    (score,) = res.manifest.scores
    assert score.num_samples == n and score.num_errors == 0
    assert sorted(r.index for r in res.records) == list(range(n))  # every sample exactly once
    assert len({r.output.replica for r in res.records if r.output}) == 2
    assert all(r.output and r.output.finish_reason == "length" for r in res.records)
    controller = ray.get_actor("omnieval-pool", namespace="omnieval")
    stats = ray.get(controller.check_now.remote())
    assert all(s.in_flight == 0 and s.queue_depth == 0 for s in stats), stats  # nothing left in flight
    ray.get(controller.release.remote(res.manifest.run_id))
    return res


def test_ten_thousand_requests_at_line_rate(local_ray: None, tmp_path: Path) -> None:
    model = {"name": "instant", "engine": "instant", "replicas": 2, "resources": {"num_cpus": 0},
             "source": {"kind": "path", "path": "/dev/null"}}  # fmt: skip
    res = _run(tmp_path, "instant", 10_000, model)
    assert {r.prediction for r in res.records} == {INSTANT_TEXT}


def test_four_hundred_requests_on_real_llama_cpp(local_ray: None, tmp_path: Path) -> None:
    model = {"name": "smol", "source": DEFAULT_MODEL_SOURCE.model_dump(), "replicas": 2, "resources": {"num_cpus": 1},
             "engine_kwargs": {"parallel": 8, "ctx_per_slot": 256, "threads": 1}}  # fmt: skip
    _run(tmp_path, "llama", 400, model)
