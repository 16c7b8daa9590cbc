"""The ``FrameworkAdapter`` seam: an evaluation framework's own loop, with every request sent to the pool.

One thin adapter per framework (N + M, not N × M): the framework keeps its prompts, filters and metrics, the pool
does inference, and the adapter maps the framework's per-sample output into Records.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from omnieval._artifacts import ScoreRow
from omnieval.core import GenerationOptions, MissingDependencyError, Record, import_target
from serving import GenerationResult


class FrameworkResult(BaseModel):
    model_config = ConfigDict(extra="forbid")
    records: list[Record]
    """Per-sample Records mapped from the framework's logged samples."""
    scores: list[ScoreRow]
    """Aggregates exactly as the framework computed them (0–100)."""
    versions: dict[str, str] = Field(default_factory=dict)
    """Framework package versions (provenance)."""
    raw: dict[str, Any] = Field(default_factory=dict)
    """The framework's own results block, kept for inspection."""
    finished_at: float | None = None
    """Unix time the task finished in its actor (``bench federated`` times each task of a run that ran them all)."""


def import_framework(what: str, pip_line: str, package: str, model_base: str) -> tuple[Any, Any]:
    """The framework's package and the model base class its adapter subclasses (``"module:Class"``), imported only
    when a suite runs it (importing omnieval never imports a framework, or torch); missing, the install line."""
    try:
        return importlib.import_module(package), import_target(model_base)
    except ImportError:
        raise MissingDependencyError(what, pip_line) from None


def cache_meta(result: GenerationResult | BaseException | None) -> dict[str, Any]:
    """``Record.meta`` marking a sample the bridge answered from the response cache: the run's throughput then counts
    it as a cache hit, as it does for built-in benchmarks, not as a request inferred now."""
    return {"cache_hit": True} if isinstance(result, GenerationResult) and result.from_cache else {}


def harness_scores(
    results: dict[str, Any], *, model: str, benchmark: str, records: list[Record], framework: str,
    unit_metrics: set[str], modality: str = "text",
) -> list[ScoreRow]:  # fmt: skip
    """lm-eval-style ``{"metric,filter": value}`` results → ScoreRows (shared by lm-eval and its fork lmms-eval);
    metrics the harness reports on 0–1 are scaled to omnieval's 0–100."""
    rows = []
    n_err = sum(1 for r in records if r.error)
    for key, value in results.items():
        if "," not in key or "_stderr" in key or not isinstance(value, (int, float)):
            continue
        metric, filt = key.split(",", 1)
        scale = 100.0 if metric in unit_metrics else 1.0
        rows.append(ScoreRow(model=model, benchmark=benchmark, metric=f"{metric}/{filt}", value=round(scale * value, 4),
                             num_samples=len(records), num_errors=n_err, framework=framework, modality=modality))  # fmt: skip
    return rows


class FrameworkAdapter(ABC):
    name: ClassVar[str]
    pip_line: ClassVar[str]

    @abstractmethod
    def run(self, *, task: str, options: dict[str, Any], model: str, bridge: Any, limit: int | None,
            generation: GenerationOptions) -> FrameworkResult:  # fmt: skip
        """Run one framework task against the pool through ``bridge`` (a ``PoolBridge``)."""
