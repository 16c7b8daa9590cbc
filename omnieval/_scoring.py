"""Postprocess + metrics: the one shared implementation every framework's benchmark is scored with."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from omnieval._artifacts import ScoreRow, StderrMethod
from omnieval.benchmarks import BenchmarkSpec
from omnieval.core import Record, RecordError
from omnieval.metrics import bootstrap_stderr, clustered_stderr_from_sums, mean_stderr

if TYPE_CHECKING:
    from omnieval.metrics import Metric


def postprocess(records: list[Record], spec: BenchmarkSpec) -> None:
    """Fill ``prediction_postprocessed`` beside the raw prediction (in place)."""
    from omnieval.postprocess import get_postprocessor

    fn = get_postprocessor(spec.postprocessor)
    for r in records:
        _postprocess_one(r, fn, spec.postprocessor)


def _postprocess_one(r: Record, fn: Any, name: str) -> None:
    if r.output is None or r.output.text is None:
        return
    try:
        r.output.text.prediction_postprocessed = [fn(p, r) for p in r.output.text.prediction]
    except Exception as e:  # noqa: BLE001 - one bad sample must not lose the others
        r.error = RecordError(kind="postprocess", message=f"{name}: {e!r}")


class BenchmarkScorer:
    """Scores one (model, benchmark) group a record at a time, so a run never holds the group to score it.

    Each record is postprocessed and gets its per-sample metric values; a mean metric keeps only a running sum and a
    ``corpus_level`` metric (BLEU, chrF, WER) keeps only the prediction and reference strings it recomputes from.
    ``rows()`` gives one ScoreRow per metric on 0–100. Failed samples count as wrong: a mean metric divides by every
    sample, a corpus metric gets an empty prediction for them (no n-gram matches, all deletions), so a run with errors
    never scores better than one without.
    """

    def __init__(self, spec: BenchmarkSpec, *, model: str, engine: str) -> None:
        from omnieval.metrics import make_metric
        from omnieval.postprocess import get_postprocessor

        self.spec, self.model, self.engine = spec, model, engine
        self._post = get_postprocessor(spec.postprocessor)
        self._metrics = [(ms.name, make_metric(ms.name, **ms.settings)) for ms in spec.metrics]
        self._sums = {n: 0.0 for n, _ in self._metrics}
        self._squares = {n: 0.0 for n, _ in self._metrics}  # for the mean's standard error
        self._strings: dict[str, tuple[list[str | None], list[Any]]] = {
            n: ([], []) for n, m in self._metrics if m.corpus_level
        }
        self._cluster_of: list[str] = []  # each sample's unit, when the benchmark clusters (cluster_by)
        self._cluster_sums: dict[str, dict[str, list[float]]] = {n: {} for n, _ in self._metrics}  # unit -> [sum, k]
        self.n = 0
        self.ok = 0

    def add(self, r: Record) -> None:
        """Postprocess and score ``r`` in place, and fold it into the aggregates."""
        self.n += 1
        _postprocess_one(r, self._post, self.spec.postprocessor)
        failed = r.error is not None or r.output is None
        unit = self._unit(r)
        for preds, refs in self._strings.values():
            preds.append(None if failed else r.prediction_postprocessed)  # None: scored as the empty string
            refs.append(r.label)
        if failed:
            for name, metric in self._metrics:  # a failed sample is a 0 in its unit where failures count as wrong
                if unit is not None and metric.higher_is_better and name not in self._strings:
                    self._cluster_sums[name].setdefault(unit, [0.0, 0])[1] += 1
            return
        self.ok += 1
        pred, ref = r.prediction_postprocessed, r.label
        for name, metric in self._metrics:
            v = float(metric.score(pred, ref, r))
            r.metrics[name] = v
            self._sums[name] += v
            self._squares[name] += v * v
            if unit is not None:
                acc = self._cluster_sums[name].setdefault(unit, [0.0, 0])
                acc[0] += v
                acc[1] += 1

    def _unit(self, r: Record) -> str | None:
        key = self.spec.cluster_by
        if key is None:
            return None
        if key not in r.meta:
            raise ValueError(f"{self.spec.name}: cluster_by {key!r} is not in sample {r.index}'s meta")
        unit = str(r.meta[key])
        self._cluster_of.append(unit)
        return unit

    def rows(self) -> list[ScoreRow]:
        rows = []
        for name, metric in self._metrics:
            stderr: float | None = None
            method: StderrMethod | None = None
            scale = 100.0
            if not self.ok:
                value = None
            elif name in self._strings:
                preds, refs = self._strings[name]  # corpus aggregates read predictions and references only
                value = metric.aggregate([], preds, refs)
                stderr, method = self._corpus_stderr(metric, preds, refs)
                scale = metric.scale
            else:
                value = 100.0 * self._sums[name] / self.ok
                k = self.ok
                if metric.higher_is_better:  # failed samples count as wrong (0)
                    value = value * self.ok / self.n
                    k = self.n
                if self.spec.cluster_by is not None:
                    se = clustered_stderr_from_sums([(a, int(b)) for a, b in self._cluster_sums[name].values()])
                    method = "clustered"
                else:
                    se, method = mean_stderr(self._sums[name], self._squares[name], k), "mean"
                stderr = None if se is None else 100.0 * se
            rows.append(
                ScoreRow(
                    model=self.model, benchmark=self.spec.name, metric=name,
                    value=None if value is None or math.isnan(value) else round(value, 4),
                    stderr=None if stderr is None else round(stderr, 4),
                    stderr_method=method if stderr is not None else None,
                    num_clusters=len(set(self._cluster_of)) if self.spec.cluster_by else None, scale=scale,
                    num_samples=self.n, num_errors=self.n - self.ok, engine=self.engine,
                    framework=self.spec.framework, modality=self.spec.modality,
                )
            )  # fmt: skip
        return rows

    def _corpus_stderr(
        self, metric: Metric, preds: list[str | None], refs: list[Any]
    ) -> tuple[float | None, StderrMethod]:
        """Bootstrap over samples (lm-eval's draws: they depend only on how many items there are, so a sample as a
        unit of one draws as lm-eval does), or over units when the benchmark clusters."""
        units: dict[Any, list[tuple[str | None, Any]]] = defaultdict(list)
        keys = self._cluster_of if self.spec.cluster_by is not None else range(len(preds))
        for u, p, r in zip(keys, preds, refs, strict=True):
            units[u].append((p, r))

        def over_units(chosen: list[list[tuple[str | None, Any]]]) -> float:
            flat = [x for unit in chosen for x in unit]
            return metric.aggregate([], [p for p, _ in flat], [r for _, r in flat])

        se = bootstrap_stderr(over_units, list(units.values()))
        return se, "bootstrap" if self.spec.cluster_by is None else "cluster_bootstrap"


def score_benchmark(records: list[Record], spec: BenchmarkSpec, *, model: str, engine: str) -> list[ScoreRow]:
    """Per-sample metrics into each Record and one ScoreRow per metric (0–100)."""
    scorer = BenchmarkScorer(spec, model=model, engine=engine)
    for r in records:
        scorer.add(r)
    return scorer.rows()


def group(records: list[Record]) -> dict[tuple[str, str], list[Record]]:
    out: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for r in records:
        out[(r.model, r.benchmark)].append(r)
    for v in out.values():
        v.sort(key=lambda r: r.index)
    return out


def score_judged(
    records: list[Record], spec: BenchmarkSpec, *, model: str, engine: str, judge_model: str | None,
    controller: object, pool_cfg: object, max_tokens: int = 256, constrained: bool = False,
) -> list[ScoreRow]:  # fmt: skip
    """Rubric benchmarks: a pool model judges each answer; every aggregate the benchmark defines becomes a row."""
    from omnieval.core import import_target
    from omnieval.verifier import make_pool_judge

    assert judge_model is not None, f"{spec.name} needs a judge model"
    judge = make_pool_judge(judge_model, controller, pool_cfg, max_tokens=max_tokens)  # type: ignore[arg-type]
    score_records = import_target(f"{spec.judge_module}:score_records")
    aggregate = import_target(f"{spec.judge_module}:aggregate")
    scored = score_records(records, judge, constrained=True) if constrained else score_records(records, judge)
    for i, r in enumerate(scored):  # the judge module returns copies: write results back in place
        records[i].metrics, records[i].meta, records[i].error = r.metrics, r.meta, r.error
    n_err = sum(1 for r in records if r.error is not None)
    values = aggregate(records)
    errors, method, units = judged_stderrs(records, spec, aggregate, [k for k in values if not k.startswith("n_")])
    return [
        ScoreRow(
            model=model,
            benchmark=spec.name,
            metric=name,
            value=None if math.isnan(v) else round(v, 4),
            stderr=None if errors.get(name) is None or math.isnan(v) else round(errors[name], 4),  # type: ignore[arg-type]
            stderr_method=method if errors.get(name) is not None and not math.isnan(v) else None,
            num_clusters=units,
            num_samples=len(records),
            num_errors=n_err,
            engine=engine,
            framework=spec.framework,
            modality=spec.modality,
        )  # fmt: skip
        for name, v in values.items()
        if not name.startswith("n_")
    ]


JUDGED_BOOTSTRAP_ITERS = 1000


def judged_stderrs(
    records: list[Record], spec: BenchmarkSpec, aggregate: Any, names: list[str]
) -> tuple[dict[str, float | None], StderrMethod, int | None]:
    """Standard errors of a judged benchmark's aggregates (weighted tiers, sub-task means): not plain means, so each
    is bootstrapped, resampling whole units (``cluster_by``: a conversation's turns share its history) or samples.
    Returns the errors by name, the method and the number of units."""
    if spec.cluster_by is not None:
        units: dict[str, list[Record]] = defaultdict(list)
        for r in records:
            units[str(r.meta.get(spec.cluster_by))].append(r)
        items: list[Any] = list(units.values())
        method: StderrMethod = "cluster_bootstrap"
        n_units: int | None = len(units)
    else:
        items, method, n_units = [[r] for r in records], "bootstrap", None
    if len(items) < 2:
        return {}, method, n_units
    reps: dict[str, list[float]] = {n: [] for n in names}

    def stat(chosen: list[list[Record]]) -> float:
        agg = aggregate([r for unit in chosen for r in unit])
        for n in names:
            v = agg.get(n, math.nan)
            if not math.isnan(v):
                reps[n].append(v)
        return 0.0

    from omnieval.metrics import bootstrap_replicates, sample_stddev

    bootstrap_replicates(stat, items, JUDGED_BOOTSTRAP_ITERS)  # every aggregate from the same resamples
    return {n: sample_stddev(v) if len(v) >= 2 else None for n, v in reps.items()}, method, n_units
