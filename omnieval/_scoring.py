"""Postprocess + metrics: the one shared implementation every framework's benchmark is scored with."""

from __future__ import annotations

import math
from collections import defaultdict

from omnieval._artifacts import ScoreRow
from omnieval._schema import Record, RecordError
from omnieval.benchmarks import BenchmarkSpec


def postprocess(records: list[Record], spec: BenchmarkSpec) -> None:
    """Fill ``prediction_postprocessed`` beside the raw prediction (in place)."""
    from omnieval.postprocess import get_postprocessor

    fn = get_postprocessor(spec.postprocessor)
    for r in records:
        if r.output is None or r.output.text is None:
            continue
        try:
            r.output.text.prediction_postprocessed = [fn(p, r) for p in r.output.text.prediction]
        except Exception as e:  # noqa: BLE001 - one bad sample must not lose the others
            r.error = RecordError(kind="postprocess", message=f"{spec.postprocessor}: {e!r}")


def score_benchmark(
    records: list[Record], spec: BenchmarkSpec, *, model: str, engine: str
) -> list[ScoreRow]:
    """Per-sample metrics into each Record and one ScoreRow per metric (0–100)."""
    from omnieval.metrics import make_metric

    postprocess(records, spec)
    ok = [r for r in records if r.error is None and r.output is not None]
    n_err = len(records) - len(ok)
    rows = []
    for ms in spec.metrics:
        metric = make_metric(ms.name, **ms.settings)
        preds = [r.prediction_postprocessed for r in ok]
        refs = [r.label for r in ok]
        for r, p, ref in zip(ok, preds, refs, strict=True):
            r.metrics[ms.name] = float(metric.score(p, ref, r))
        # Failed samples count as wrong: a run with errors must not look better than one without.
        if ok:
            agg = metric.aggregate(ok, preds, refs)
            value = agg * len(ok) / len(records) if metric.higher_is_better and not _corpus(ms.name) else agg
        else:
            value = None
        rows.append(
            ScoreRow(
                model=model, benchmark=spec.name, metric=ms.name,
                value=None if value is None or math.isnan(value) else round(value, 4),
                num_samples=len(records), num_errors=n_err, engine=engine, framework=spec.framework,
                modality=spec.modality,
            )
        )  # fmt: skip
    return rows


def _corpus(name: str) -> bool:
    return name in ("bleu", "chrf", "wer")


def group(records: list[Record]) -> dict[tuple[str, str], list[Record]]:
    out: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for r in records:
        out[(r.model, r.benchmark)].append(r)
    for v in out.values():
        v.sort(key=lambda r: r.index)
    return out


def score_judged(
    records: list[Record], spec: BenchmarkSpec, *, model: str, engine: str, judge_model: str | None,
    controller: object, pool_cfg: object, max_tokens: int = 256,
) -> list[ScoreRow]:  # fmt: skip
    """Rubric benchmarks: a pool model judges each answer; every aggregate the benchmark defines becomes a row."""
    from omnieval._registry import import_target
    from omnieval.verifier import make_pool_judge

    assert judge_model is not None, f"{spec.name} needs a judge model"
    judge = make_pool_judge(judge_model, controller, pool_cfg, max_tokens=max_tokens)  # type: ignore[arg-type]
    score_records = import_target(f"{spec.judge_module}:score_records")
    aggregate = import_target(f"{spec.judge_module}:aggregate")
    scored = score_records(records, judge)
    for i, r in enumerate(scored):  # the judge module returns copies: write results back in place
        records[i].metrics, records[i].meta, records[i].error = r.metrics, r.meta, r.error
    n_err = sum(1 for r in records if r.error is not None)
    return [
        ScoreRow(model=model, benchmark=spec.name, metric=name, value=None if math.isnan(v) else round(v, 4),
                 num_samples=len(records), num_errors=n_err, engine=engine, framework=spec.framework,
                 modality=spec.modality)  # fmt: skip
        for name, v in aggregate(records).items()
        if not name.startswith("n_")
    ]
