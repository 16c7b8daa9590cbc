"""A synthetic text benchmark registered at run time (driver only), for overhead runs that need many requests.

``run_suite`` builds Records in the driver and client actors receive Records, so a benchmark registered in the
driver process is enough; it is never written to the shipped registry or data directory.
"""

from __future__ import annotations

import json
from pathlib import Path

from omnieval.benchmarks import BENCHMARKS, BenchmarkSpec, MetricSpec

NAME = "bench_synthetic_mc"


def register_synthetic(n: int, directory: Path, max_tokens: int = 8) -> str:
    """Write ``n`` multiple-choice rows to ``directory`` and register them as benchmark ``bench_synthetic_mc``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{NAME}-{n}.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            row = {"id": f"syn-{i}", "question": f"Synthetic item {i}: which letter is option {i % 4 + 1}?",
                   "choices": ["A", "B", "C", "D"], "answer": "ABCD"[i % 4]}  # fmt: skip
            f.write(json.dumps(row) + "\n")
    spec = BenchmarkSpec(
        name=NAME, version="1", task_type="mc", data_file=str(path.resolve()),
        loader="omnieval.benchmarks._loaders:multiple_choice",
        prompt_template="{question}\n{options}\nAnswer:", uniform_prompt_template="{question}\n{options}",
        postprocessor="mc_letter", metrics=(MetricSpec(name="exact_match"),), generation={"max_tokens": max_tokens},
        description="bench-only synthetic multiple choice (never shipped)",
    )  # fmt: skip
    BENCHMARKS.register(NAME, spec, replace=True)
    return NAME
