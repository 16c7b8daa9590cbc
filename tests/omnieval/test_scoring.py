"""Streaming scoring: failed samples count as wrong for mean and corpus-level metrics alike."""

from __future__ import annotations

import jiwer
import pytest
import sacrebleu

from omnieval._scoring import score_benchmark
from omnieval.benchmarks import get_benchmark
from omnieval.core import GenerationOptions, Output, Record, RecordError, TextOutput
from omnieval.metrics import METRICS
from omnieval.postprocess._asr import asr_normalize

GEN = GenerationOptions()


def _answered(records: list[Record], answers: list[str]) -> list[Record]:
    for r, a in zip(records, answers, strict=True):
        r.output = Output(text=TextOutput(prediction=[a]))
    return records


def _fail(r: Record) -> None:
    r.output = None
    r.error = RecordError(kind="request_failed", message="replica gone")


def test_corpus_level_is_a_metric_attribute() -> None:
    assert {n for n in METRICS.names() if METRICS.get(n).corpus_level} == {"bleu", "chrf", "wer"}


@pytest.mark.parametrize(("metric", "corpus"), [("bleu", sacrebleu.corpus_bleu), ("chrf", sacrebleu.corpus_chrf)])
def test_failed_sample_is_an_empty_hypothesis_in_bleu_and_chrf(metric: str, corpus: object) -> None:
    spec = get_benchmark("st_tiny")
    recs = spec.records(model="m", generation=GEN)
    hyps = [r.label for r in recs]
    hyps[0] = "Allô ? Oh, bonjour. Je ne savais pas que tu étais là."
    _answered(recs, hyps)
    _fail(recs[2])
    row = next(s for s in score_benchmark(recs, spec, model="m", engine="x") if s.metric == metric)
    refs = [r.label for r in recs]
    as_empty = corpus([h if i != 2 else "" for i, h in enumerate(hyps)], [refs]).score  # type: ignore[operator]
    excluded = corpus(hyps[:2] + hyps[3:], [refs[:2] + refs[3:]]).score  # type: ignore[operator]
    assert row.value == pytest.approx(round(as_empty, 4))
    assert row.value < excluded - 1  # the failure costs score; it did not vanish from the corpus
    assert (row.num_samples, row.num_errors) == (len(recs), 1)
    assert metric not in recs[2].metrics  # no per-sample value for a sample that never answered


def test_failed_sample_is_all_deletions_in_wer() -> None:
    spec = get_benchmark("asr_tiny")
    recs = spec.records(model="m", generation=GEN)
    hyps = [r.label for r in recs]
    hyps[0] = "the quick brown fox jumped over a lazy dog"
    _answered(recs, hyps)
    _fail(recs[1])
    (row,) = score_benchmark(recs, spec, model="m", engine="x")
    refs = [asr_normalize(r.label) for r in recs]
    norm = [asr_normalize(h) for h in hyps]
    as_empty = 100 * jiwer.wer(refs, [h if i != 1 else "" for i, h in enumerate(norm)])
    excluded = 100 * jiwer.wer(refs[:1] + refs[2:], norm[:1] + norm[2:])
    assert row.value == pytest.approx(round(as_empty, 4)) and row.value > excluded + 1  # lower is better
    assert row.num_errors == 1


def test_every_sample_failed_scores_nothing() -> None:
    spec = get_benchmark("st_tiny")
    recs = spec.records(model="m", generation=GEN, limit=2)
    for r in recs:
        _fail(r)
    rows = score_benchmark(recs, spec, model="m", engine="x")
    assert [(s.value, s.num_errors) for s in rows] == [(None, 2)] * len(rows)


def test_mean_metrics_carry_the_standard_error_lm_eval_and_a_textbook_give() -> None:
    """The mean's standard error (sample sd with n - 1, over sqrt n, on 0-100), failed samples counted as 0 like the
    value itself; equal to lm-eval's own ``mean_stderr`` on the same per-sample values. Corpus metrics have none yet."""
    import math
    import statistics

    from lm_eval.api.metrics import mean_stderr

    spec = get_benchmark("mmlu_tiny")
    recs = _answered(spec.records(model="m", generation=GEN, limit=12), ["The answer is A."] * 12)
    _fail(recs[3])
    (row,) = score_benchmark(recs, spec, model="m", engine="x")
    per_sample = [r.metrics.get("exact_match", 0.0) for r in recs]  # the failed one counts as 0
    assert 0 < sum(per_sample) < len(per_sample)  # a mix of right and wrong, so the error is not 0
    textbook = 100 * statistics.stdev(per_sample) / math.sqrt(len(per_sample))
    assert row.stderr == pytest.approx(textbook, abs=1e-4)
    assert row.stderr == pytest.approx(100 * mean_stderr(per_sample), abs=1e-4)
    assert row.value == pytest.approx(100 * statistics.mean(per_sample), abs=1e-4)
    assert row.stderr_method == "mean" and row.num_clusters is None and row.scale == 100.0


def test_corpus_metrics_carry_lm_evals_bootstrap_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """BLEU and chrF rows: bootstrap over the samples, equal to lm-eval's ``bootstrap_stderr`` (100 resamples, as
    lm-eval caps them for these metrics) over the same (reference, prediction) items, a failed sample as ""."""
    from lm_eval.api import metrics as lm

    monkeypatch.setenv("DISABLE_MULTIPROC", "1")
    spec = get_benchmark("st_tiny")
    recs = spec.records(model="m", generation=GEN)
    hyps = [" ".join(str(r.label).split()[: 2 + i % 4]) for i, r in enumerate(recs)]  # partial translations
    _answered(recs, hyps)
    _fail(recs[1])
    rows = {s.metric: s for s in score_benchmark(recs, spec, model="m", engine="x")}
    items = [(r.label, "" if r.error else r.prediction_postprocessed) for r in recs]
    for name, fn in (("bleu", lm.bleu), ("chrf", lm.chrf)):
        row = rows[name]
        assert row.stderr_method == "bootstrap" and row.scale == 1.0
        assert row.stderr == pytest.approx(lm.bootstrap_stderr(fn, items, iters=100), rel=0.01)
        assert row.value == pytest.approx(fn(items), abs=1e-3)


def test_a_suite_defined_benchmark_clusters_its_error_on_the_named_column(tmp_path: object) -> None:
    """``fields.cluster``: rows of one document share a unit; the row's error is the cluster-robust one (statsmodels'
    OLS on a constant), larger here than the independent-samples one, and says how many units it used."""
    import json
    from pathlib import Path

    import numpy as np
    import statsmodels.api as sm

    from omnieval import load_suite
    from omnieval._plan import builtin_specs, iter_records

    tmp = Path(str(tmp_path))
    docs = [i // 4 for i in range(24)]  # six documents of four questions
    rows = [{"q": f"q{i}", "a": "yes", "doc": f"d{d}"} for i, d in enumerate(docs)]
    (tmp / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp / "suite.yaml").write_text(
        "name: s\nmodels: [{name: m, source: {kind: path, path: /x.gguf}}]\nbenchmarks:\n  - name: mine\n"
        "    define: {data: data.jsonl, fields: {question: q, answer: a, cluster: doc}, task_type: open_qa}\n"
    )
    suite = load_suite(tmp / "suite.yaml")
    specs = builtin_specs(suite)
    recs = list(iter_records(suite, specs))
    right = {0, 1, 2, 3, 4, 5, 8, 12, 13, 14, 20}  # documents 0 and 3 mostly right, others mostly wrong
    _answered(recs, ["yes" if i in right else "no" for i in range(len(recs))])
    spec = specs["mine"] if isinstance(specs, dict) else specs[0]
    row = score_benchmark(recs, spec, model="m", engine="x")[0]
    y = np.array([r.metrics[row.metric] for r in recs])
    fit = sm.OLS(y, np.ones(len(y))).fit(cov_type="cluster", cov_kwds={"groups": np.array(docs)})
    assert row.stderr_method == "clustered" and row.num_clusters == 6
    assert row.stderr == pytest.approx(100 * float(fit.bse[0]), abs=1e-4)
    iid = 100 * float(np.std(y, ddof=1) / np.sqrt(len(y)))
    assert row.stderr > iid


def test_judged_aggregates_get_a_bootstrap_error_over_whole_units() -> None:
    """Judged benchmarks' aggregates (weighted tiers, sub-task means) are bootstrapped by unit (``cluster_by``). For an
    aggregate that is a plain mean, that agrees with the analytic clustered error (bootstrap noise aside), and it is
    far above the independent-samples bootstrap when the units' samples are alike."""
    import random

    from omnieval._scoring import judged_stderrs
    from omnieval.benchmarks import BenchmarkSpec
    from omnieval.core import Message
    from omnieval.metrics import clustered_stderr

    rnd = random.Random(3)
    recs = []
    for u in range(40):
        level = rnd.choice([0.0, 2.0, 5.0])  # units differ; turns within a unit are alike
        for _ in range(rnd.randint(1, 5)):
            r = Record(benchmark="j", index=len(recs), messages=[Message.text("user", "x")], meta={"conv": f"c{u}"})
            r.metrics["score"] = min(5.0, max(0.0, level + rnd.choice([-0.5, 0.0, 0.5])))
            recs.append(r)

    def aggregate(rs: list[Record]) -> dict[str, float]:
        return {"mean": 20.0 * sum(r.metrics["score"] for r in rs) / len(rs), "n_records": float(len(rs))}

    spec = get_benchmark("omniassist").model_copy(update={"name": "j", "cluster_by": "conv"})
    assert isinstance(spec, BenchmarkSpec)
    errs, method, units = judged_stderrs(recs, spec, aggregate, ["mean"])
    analytic = clustered_stderr([20.0 * r.metrics["score"] for r in recs], [r.meta["conv"] for r in recs])
    assert method == "cluster_bootstrap" and units == 40
    assert analytic is not None and errs["mean"] == pytest.approx(analytic, rel=0.15)
    iid, method, units = judged_stderrs(recs, spec.model_copy(update={"cluster_by": None}), aggregate, ["mean"])
    assert method == "bootstrap" and units is None
    assert iid["mean"] is not None and errs["mean"] > 1.5 * iid["mean"]
