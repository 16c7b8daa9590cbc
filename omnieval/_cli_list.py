"""``omnieval list``: what is registered."""

from __future__ import annotations


def print_registries() -> None:
    from omnieval.benchmarks import BENCHMARKS
    from omnieval.metrics import METRICS
    from schedulers import ROUTING_POLICIES
    from serving import ENGINES

    print("benchmarks:")
    for name in BENCHMARKS:
        spec = BENCHMARKS.get(name)
        print(f"  {name:24s} {spec.modality:6s} {spec.task_type:8s} {spec.description}")
    print("engines:          " + ", ".join(ENGINES.names()))
    print("metrics:          " + ", ".join(METRICS.names()))
    print("routing policies: " + ", ".join(ROUTING_POLICIES.names()))
