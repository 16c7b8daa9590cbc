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
    benchmark: str = ""
    """The suite entry's key (``<framework>:<task>``); subtasks of a group are ``<key>/<subtask>``."""
    error: str | None = None
    """Set when the task failed whole: what, where, fix (its score row says the same)."""
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


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _leaves(name: str, group_subtasks: dict[str, list[str]]) -> list[str]:
    subs = group_subtasks.get(name)
    if not subs:
        return [name]
    return [leaf for s in subs for leaf in _leaves(s, group_subtasks)]


def harness_rows(
    res: dict[str, Any], *, top: str, benchmark: str, model: str, records: list[Record], framework: str,
    unit_metrics: set[str], modality: str = "text",
) -> list[ScoreRow]:  # fmt: skip
    """Every entry of an lm-eval-style results block (lm-eval and its fork lmms-eval) as ScoreRows: the suite's
    task or group itself (``benchmark``), and each subtask and subgroup under it (``benchmark/<name>``), with the
    values and standard errors exactly as the harness computed them (groups size-weighted where it weights them).
    Metrics the harness reports on 0–1 are scaled to omnieval's 0–100, their standard errors too."""
    results: dict[str, dict[str, Any]] = res.get("results", {})
    groups: dict[str, list[str]] = res.get("group_subtasks", {}) or {}
    n_samples = res.get("n-samples", {}) or {}
    by_bench: dict[str, list[Record]] = {}
    for r in records:
        by_bench.setdefault(r.benchmark, []).append(r)
    rows = []
    for name, block in results.items():
        bench = benchmark if name == top else f"{benchmark}/{name}"
        leaves = _leaves(name, groups)
        leaf_benches = {benchmark if leaf == top else f"{benchmark}/{leaf}" for leaf in leaves}
        recs = [r for b in leaf_benches for r in by_bench.get(b, [])]
        n = sum(int((n_samples.get(leaf) or {}).get("effective", 0)) for leaf in leaves) or len(recs)
        n_err = sum(1 for r in recs if r.error)
        for key, value in block.items():
            if "," not in key or "_stderr" in key or _num(value) is None:
                continue
            metric, filt = key.split(",", 1)
            scale = 100.0 if metric in unit_metrics else 1.0
            se = _num(block.get(f"{metric}_stderr,{filt}"))
            rows.append(ScoreRow(
                model=model, benchmark=bench, metric=f"{metric}/{filt}", value=round(scale * float(value), 4),
                stderr=None if se is None else round(scale * se, 4), num_samples=n, num_errors=n_err, scale=scale,
                stderr_method=None if se is None else "framework",
                framework=framework, modality=modality,
            ))  # fmt: skip
    return rows


class FrameworkAdapter(ABC):
    name: ClassVar[str]
    pip_line: ClassVar[str]

    def check(self, task: str, options: dict[str, Any], where: str,  # noqa: B027 - optional hook
              scorers: dict[str, tuple[str, str | None]] | None = None) -> None:  # fmt: skip
        """Before anything is deployed: the task exists (did-you-mean), its options are the framework's, its
        local files are there, and every model it runs on can answer it (``scorers``: model -> (engine, how it
        scores log-likelihoods or None)). Raises ``OmnievalUserError`` naming ``where``; the default checks
        nothing."""

    @abstractmethod
    def run(self, *, task: str, options: dict[str, Any], model: str, bridge: Any, limit: int | None,
            generation: GenerationOptions) -> FrameworkResult:  # fmt: skip
        """Run one framework task against the pool through ``bridge`` (a ``PoolBridge``)."""
