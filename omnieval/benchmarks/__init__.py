"""Benchmark registry: built-in definitions plus lazily imported ``module:SPEC`` targets."""

from __future__ import annotations

from omnieval.benchmarks._builtin import BUILTIN
from omnieval.benchmarks._custom import CustomBenchmarkSpec, DefinitionError, check_definition, custom_spec
from omnieval.benchmarks._spec import DATA_DIR, BenchmarkSpec, MetricSpec
from omnieval.core import Registry

BENCHMARKS: Registry[BenchmarkSpec] = Registry("benchmark")
for _spec in BUILTIN:
    BENCHMARKS.register(_spec.name, _spec)


def get_benchmark(name: str) -> BenchmarkSpec:
    return BENCHMARKS.get(name)


__all__ = [
    "BENCHMARKS",
    "DATA_DIR",
    "BenchmarkSpec",
    "CustomBenchmarkSpec",
    "DefinitionError",
    "MetricSpec",
    "check_definition",
    "custom_spec",
    "get_benchmark",
]
