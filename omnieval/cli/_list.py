"""``omnieval list``: what is registered, i.e. every name a suite YAML may use."""

from __future__ import annotations

import argparse


def cmd_list(args: argparse.Namespace) -> int:
    from omnieval.benchmarks import BENCHMARKS
    from omnieval.benchmarks._task_types import TASK_TYPES
    from omnieval.metrics import METRICS
    from omnieval.postprocess import POSTPROCESSORS
    from schedulers import ROUTING_POLICIES
    from serving import ENGINES

    print("benchmarks:")
    for name in BENCHMARKS:
        spec = BENCHMARKS.get(name)
        print(f"  {name:24s} {spec.modality:6s} {spec.task_type:8s} {spec.description}")
    print("task types (benchmarks[].define.task_type):")
    for name in TASK_TYPES:
        t = TASK_TYPES.get(name)
        print(f"  {name:8s} {t.postprocessor:14s} {','.join(m.name for m in t.metrics):18s} {t.description}")
    print("engines:          " + ", ".join(ENGINES.names()))
    print("metrics:          " + ", ".join(METRICS.names()))
    print("postprocessors:   " + ", ".join(POSTPROCESSORS.names()))
    print("routing policies: " + ", ".join(ROUTING_POLICIES.names()))
    return 0
