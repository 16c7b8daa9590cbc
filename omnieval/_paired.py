"""Paired comparison of two runs on the same samples: is B's score different from A's, or is it noise?

The two runs' Records are paired on their sample keys (benchmark, index) — the same model under two engines or
prompt conditions, or two models on one benchmark. Per benchmark, on its headline metric, failed samples counted as
in the score (0 for a per-sample metric, an empty prediction for a corpus one):

- a per-sample metric: the mean difference B − A with its 95 % t interval and the paired t-test's p-value
  (``scipy.stats``); where the benchmark's samples share units (``cluster_by``: a conversation's turns), the
  differences' error is clustered on them and the test has G − 1 degrees of freedom;
- a corpus metric (BLEU, chrF, WER): the paired bootstrap (Koehn 2004): both runs resampled on the same sample
  indices, the 95 % percentile interval of B − A and the two-sided p-value, twice the share of resamples on the
  far side of 0.

A benchmark whose two sample sets differ cannot be paired and says so.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from omnieval.core import Record

PAIRED_BOOTSTRAP_ITERS = 1000


@dataclass
class PairedRow:
    benchmark: str
    metric: str | None
    n: int
    """Pairs (0 when the benchmark could not be paired)."""
    mean_a: float | None = None
    mean_b: float | None = None
    diff: float | None = None
    """B − A on 0-100 (the metric's score-row scale)."""
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    method: str = ""
    """``paired t``, ``paired t, clustered on <key> (<G> units)`` or ``paired bootstrap``."""
    note: str = ""
    """Why a benchmark was not paired, or which models were paired."""

    @property
    def significant(self) -> bool:
        return self.p_value is not None and self.p_value < 0.05


@dataclass
class BenchInfo:
    """What the run's manifest knows about a benchmark that its Records do not say."""

    metrics: list[dict[str, Any]] = field(default_factory=list)
    """Metric specs in order, the headline first (``BenchmarkProvenance.metrics``)."""
    cluster_by: str | None = None


def _headline(records: list[Record]) -> str | None:
    for r in records:
        if r.metrics:
            return next(iter(r.metrics))
    return None


def _corpus_metric(info: BenchInfo | None) -> Any:
    """The benchmark's headline metric object when it is corpus-level, else None."""
    if info is None or not info.metrics:
        return None
    from omnieval.metrics import METRICS, make_metric

    head = info.metrics[0]
    name = str(head.get("name", ""))
    if name not in METRICS or not METRICS.get(name).corpus_level:
        return None
    return make_metric(name, **dict(head.get("settings") or {}))


def paired_rows(
    a: list[Record], b: list[Record], info: dict[str, BenchInfo] | None = None, alpha: float = 0.05
) -> list[PairedRow]:
    """One row per benchmark present in either run. Each run's Records must be of one model per benchmark (two
    models in one run are compared run to run, not with each other). ``info``: per benchmark, from run A's
    manifest (headline metric, ``cluster_by``)."""
    by_a: dict[str, dict[int, Record]] = defaultdict(dict)
    by_b: dict[str, dict[int, Record]] = defaultdict(dict)
    for recs, by in ((a, by_a), (b, by_b)):
        for r in recs:
            if r.index in by[r.benchmark] and by[r.benchmark][r.index].model != r.model:
                raise ValueError(f"{r.benchmark}: more than one model in one run; compare one model per run")
            by[r.benchmark][r.index] = r
    rows = []
    for bench in sorted(set(by_a) | set(by_b)):
        ra, rb = by_a.get(bench, {}), by_b.get(bench, {})
        if set(ra) != set(rb):
            rows.append(PairedRow(bench, None, 0, note=f"cannot be paired: different samples ({len(ra)} vs {len(rb)})"))
            continue
        keys = sorted(ra)
        models = f"{ra[keys[0]].model} → {rb[keys[0]].model}"
        bi = (info or {}).get(bench)
        corpus = _corpus_metric(bi)
        if corpus is not None:
            rows.append(_paired_bootstrap(bench, corpus, [ra[k] for k in keys], [rb[k] for k in keys], alpha, models))
            continue
        metric = _headline(list(ra.values())) or _headline(list(rb.values()))
        if metric is None:
            rows.append(PairedRow(bench, None, 0, note="no per-sample metric (judged only)"))
            continue
        raw = [r.metrics.get(metric, 0.0) for r in (*ra.values(), *rb.values())]
        scale = 100.0 if all(0.0 <= v <= 1.0 for v in raw) else 1.0  # the score rows' 0-100 for 0/1-style metrics
        xa = [scale * ra[k].metrics.get(metric, 0.0) for k in keys]
        xb = [scale * rb[k].metrics.get(metric, 0.0) for k in keys]
        units = None
        if bi is not None and bi.cluster_by is not None and all(bi.cluster_by in ra[k].meta for k in keys):
            units = [str(ra[k].meta[bi.cluster_by]) for k in keys]
        row = _paired_t(bench, metric, xa, xb, units, alpha)
        row.note = models + (f"; {row.note}" if row.note else "")
        if units is not None:
            row.method = f"paired t, clustered on {bi.cluster_by} ({len(set(units))} units)"  # type: ignore[union-attr]
        rows.append(row)
    return rows


def _paired_t(bench: str, metric: str, xa: list[float], xb: list[float], units: list[str] | None,
              alpha: float) -> PairedRow:  # fmt: skip
    from scipy import stats

    from omnieval.metrics import clustered_stderr

    d = [y - x for x, y in zip(xa, xb, strict=True)]
    n = len(d)
    mean_d = sum(d) / n
    row = PairedRow(bench, metric, n, mean_a=sum(xa) / n, mean_b=sum(xb) / n, diff=mean_d, method="paired t")
    if n < 2:
        return row
    if units is None:
        se, dof = math.sqrt(sum((x - mean_d) ** 2 for x in d) / (n - 1)) / math.sqrt(n), n - 1
    else:
        g = len(set(units))
        if g < 2:
            row.note = "one unit: no error to test against"
            return row
        se_c = clustered_stderr(d, units)
        assert se_c is not None
        se, dof = se_c, g - 1
    half = float(stats.t.ppf(1 - alpha / 2, dof)) * se
    row.ci_low, row.ci_high = mean_d - half, mean_d + half
    if se == 0:  # every pair differs by the same amount: no variance to test against
        row.p_value = 1.0 if mean_d == 0 else 0.0
    elif units is None:
        row.p_value = float(stats.ttest_rel(xb, xa).pvalue)
    else:
        row.p_value = float(2 * stats.t.sf(abs(mean_d / se), dof))
    return row


def _paired_bootstrap(bench: str, metric: Any, ra: list[Record], rb: list[Record], alpha: float,
                      models: str) -> PairedRow:  # fmt: skip
    """Both runs' corpus metric on the same resampled sample indices; B − A's percentile interval and p-value."""
    from omnieval.metrics import bootstrap_replicates

    def pred(r: Record) -> str | None:
        return None if r.error is not None or r.output is None else r.prediction_postprocessed

    pa, pb, refs = [pred(r) for r in ra], [pred(r) for r in rb], [r.label for r in ra]

    def score(preds: list[str | None], idx: list[int]) -> float:
        return float(metric.aggregate([], [preds[i] for i in idx], [refs[i] for i in idx]))

    every = list(range(len(refs)))
    va, vb = score(pa, every), score(pb, every)
    row = PairedRow(bench, metric.name, len(refs), mean_a=va, mean_b=vb, diff=vb - va, method="paired bootstrap",
                    note=models)  # fmt: skip
    if len(refs) < 2:
        return row
    diffs = sorted(bootstrap_replicates(lambda idx: score(pb, idx) - score(pa, idx), every, PAIRED_BOOTSTRAP_ITERS))
    k = len(diffs)
    row.ci_low = diffs[int(math.floor(alpha / 2 * (k - 1)))]
    row.ci_high = diffs[int(math.ceil((1 - alpha / 2) * (k - 1)))]
    below = sum(1 for x in diffs if x <= 0) / k
    above = sum(1 for x in diffs if x >= 0) / k
    row.p_value = min(1.0, 2 * min(below, above))
    return row
