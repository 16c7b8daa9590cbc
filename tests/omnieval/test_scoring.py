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
    bleu = get_benchmark("st_tiny")
    rows = score_benchmark(_answered(bleu.records(model="m", generation=GEN, limit=2), ["a", "b"]), bleu, model="m",
                           engine="x")  # fmt: skip
    assert all(s.stderr is None for s in rows)  # corpus-level: no per-sample mean to take an error of
