"""Postprocess + metrics: the one shared implementation every framework's benchmark is scored with."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from omnieval._artifacts import ScoreRow
from omnieval.benchmarks import BenchmarkSpec
from omnieval.core import Record, RecordError


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


def mean_stderr(total: float, squares: float, n: int) -> float | None:
    """Standard error of a per-sample mean on the 0-100 scale, from the running sum and sum of squares of ``n``
    values (zeros for failed samples included): the sample standard deviation (n - 1) over sqrt(n), as lm-eval's
    ``mean_stderr``. None below two samples."""
    if n < 2:
        return None
    var = max(0.0, (squares - total * total / n) / (n - 1))
    return 100.0 * math.sqrt(var / n)


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
        self.n = 0
        self.ok = 0

    def add(self, r: Record) -> None:
        """Postprocess and score ``r`` in place, and fold it into the aggregates."""
        self.n += 1
        _postprocess_one(r, self._post, self.spec.postprocessor)
        failed = r.error is not None or r.output is None
        for preds, refs in self._strings.values():
            preds.append(None if failed else r.prediction_postprocessed)  # None: scored as the empty string
            refs.append(r.label)
        if failed:
            return
        self.ok += 1
        pred, ref = r.prediction_postprocessed, r.label
        for name, metric in self._metrics:
            v = float(metric.score(pred, ref, r))
            r.metrics[name] = v
            self._sums[name] += v
            self._squares[name] += v * v

    def rows(self) -> list[ScoreRow]:
        rows = []
        for name, metric in self._metrics:
            stderr = None
            if not self.ok:
                value = None
            elif name in self._strings:
                preds, refs = self._strings[name]  # corpus aggregates read predictions and references only
                value = metric.aggregate([], preds, refs)
            else:
                value = 100.0 * self._sums[name] / self.ok
                k = self.ok
                if metric.higher_is_better:  # failed samples count as wrong (0)
                    value = value * self.ok / self.n
                    k = self.n
                stderr = mean_stderr(self._sums[name], self._squares[name], k)
            rows.append(
                ScoreRow(
                    model=self.model, benchmark=self.spec.name, metric=name,
                    value=None if value is None or math.isnan(value) else round(value, 4),
                    stderr=None if stderr is None else round(stderr, 4),
                    num_samples=self.n, num_errors=self.n - self.ok, engine=self.engine,
                    framework=self.spec.framework, modality=self.spec.modality,
                )
            )  # fmt: skip
        return rows


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
    return [
        ScoreRow(
            model=model,
            benchmark=spec.name,
            metric=name,
            value=None if math.isnan(v) else round(v, 4),
            num_samples=len(records),
            num_errors=n_err,
            engine=engine,
            framework=spec.framework,
            modality=spec.modality,
        )  # fmt: skip
        for name, v in aggregate(records).items()
        if not name.startswith("n_")
    ]
