"""Paired comparison of two runs on the same samples: is B's score different from A's, or is it noise?

The two runs' Records are paired on their sample keys (benchmark, index) — the same model under two engines or
prompt conditions, or two models on one benchmark. Per benchmark, on its headline per-sample metric (failed samples
counted as 0, as in the score), the mean difference B − A with its 95 % interval and the paired t-test's p-value
(``scipy.stats``). A benchmark whose two sample sets differ cannot be paired and says so; corpus-level metrics
(BLEU, chrF, WER) have no per-sample values to pair and are listed as such.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from omnieval.core import Record


@dataclass
class PairedRow:
    benchmark: str
    metric: str | None
    n: int
    """Pairs (0 when the benchmark could not be paired)."""
    mean_a: float | None = None
    mean_b: float | None = None
    diff: float | None = None
    """Mean of B − A, on 0-100."""
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    note: str = ""
    """Why a benchmark was not paired, or which models were paired."""

    @property
    def significant(self) -> bool:
        return self.p_value is not None and self.p_value < 0.05


def _headline(records: list[Record]) -> str | None:
    for r in records:
        if r.metrics:
            return next(iter(r.metrics))
    return None


def paired_rows(a: list[Record], b: list[Record], alpha: float = 0.05) -> list[PairedRow]:
    """One row per benchmark present in either run. Each run's Records must be of one model per benchmark (two
    models in one run are compared run to run, not with each other)."""
    from scipy import stats

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
        metric = _headline(list(ra.values())) or _headline(list(rb.values()))
        if metric is None:
            rows.append(PairedRow(bench, None, 0, note="no per-sample metric (corpus-level or judged only)"))
            continue
        keys = sorted(ra)
        raw = [r.metrics.get(metric, 0.0) for r in (*ra.values(), *rb.values())]
        scale = 100.0 if all(0.0 <= v <= 1.0 for v in raw) else 1.0  # the score rows' 0-100 for 0/1-style metrics
        xa = [scale * ra[k].metrics.get(metric, 0.0) for k in keys]
        xb = [scale * rb[k].metrics.get(metric, 0.0) for k in keys]
        d = [y - x for x, y in zip(xa, xb, strict=True)]
        n = len(d)
        mean_d = sum(d) / n
        models = f"{next(iter(ra.values())).model} → {next(iter(rb.values())).model}"
        row = PairedRow(bench, metric, n, mean_a=sum(xa) / n, mean_b=sum(xb) / n, diff=mean_d, note=models)
        if n >= 2:
            sd = math.sqrt(sum((x - mean_d) ** 2 for x in d) / (n - 1))
            half = float(stats.t.ppf(1 - alpha / 2, n - 1)) * sd / math.sqrt(n)
            row.ci_low, row.ci_high = mean_d - half, mean_d + half
            if sd > 0:
                row.p_value = float(stats.ttest_rel(xb, xa).pvalue)
            else:  # every pair differs by the same amount: no variance to test against
                row.p_value = 1.0 if mean_d == 0 else 0.0
        rows.append(row)
    return rows
