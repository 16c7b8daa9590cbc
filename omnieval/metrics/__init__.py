"""Shared metrics: one implementation per task type, used by every framework's benchmarks.

Metrics are registered by ``"module:Class"`` string so a Ray worker resolves a name without the driver's imports,
and so importing this package does not import jiwer or sacrebleu until a metric that needs them is used.
"""

from __future__ import annotations

from typing import Any

from omnieval.core import Registry
from omnieval.metrics._base import Metric
from omnieval.metrics._stderr import (
    bootstrap_replicates,
    bootstrap_stderr,
    clustered_stderr,
    clustered_stderr_from_sums,
    mean_stderr,
    sample_stddev,
)

METRICS: Registry[type[Metric]] = Registry(
    "metric",
    {
        "exact_match": "omnieval.metrics._exact_match:ExactMatch",
        "anls": "omnieval.metrics._anls:ANLS",
        "wer": "omnieval.metrics._wer:WER",
        "bleu": "omnieval.metrics._bleu:BLEU",
        "chrf": "omnieval.metrics._chrf:CHRF",
    },
)


def make_metric(name: str, **settings: Any) -> Metric:
    """Instantiate a registered metric; unknown names raise ``UnknownNameError`` with "Did you mean" suggestions and
    unknown settings raise ``TypeError``."""
    return METRICS.get(name)(**settings)


__all__ = [
    "METRICS",
    "Metric",
    "bootstrap_replicates",
    "bootstrap_stderr",
    "clustered_stderr",
    "clustered_stderr_from_sums",
    "make_metric",
    "mean_stderr",
    "sample_stddev",
]
