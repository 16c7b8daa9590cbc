"""The embedded default end to end: local Ray + Serve + llama.cpp replica + client actors → scored artifact."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from testlib.runs import run_cli

from omnieval import load_suite, read_manifest, read_records
from omnieval.benchmarks import get_benchmark
from omnieval.cli._rerun import diff_runs
from omnieval.metrics import make_metric

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.ray]


def sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_every_sample_inferred_and_scored(quickstart_run: Path) -> None:
    records = read_records(quickstart_run)
    suite = load_suite(ROOT / "examples/quickstart.yaml")
    expected = {(m.name, b.name, i) for m in suite.models for b in suite.benchmarks for i in range(b.limit or 0)}
    assert {r.key for r in records} == expected and len(records) == len(expected)
    for r in records:
        assert r.error is None, r.error
        assert r.prediction is not None and r.output is not None and r.output.replica
        assert r.output.usage is not None and r.output.usage.completion_tokens > 0
        assert r.latency is not None and r.latency > 0
    mmlu = [r for r in records if r.benchmark == "mmlu_tiny"]
    assert all(set(r.metrics) == {"exact_match"} for r in records)
    assert any(r.prediction_postprocessed in list("ABCD") for r in mmlu)  # MC extraction really ran


def test_manifest_scores_equal_recomputed_metrics(quickstart_run: Path) -> None:
    m = read_manifest(quickstart_run)
    records = read_records(quickstart_run)
    assert m.status == "completed" and {s.benchmark for s in m.scores} == {"mmlu_tiny", "asdiv_tiny"}
    em = make_metric("exact_match")
    for s in m.scores:
        recs = [r for r in records if r.benchmark == s.benchmark]
        mine = 100 * sum(em.score(r.prediction_postprocessed, r.label, r) for r in recs) / len(recs)
        assert s.value == pytest.approx(mine)
        assert s.num_samples == len(recs) and s.num_errors == 0


def test_manifest_has_full_provenance(quickstart_run: Path) -> None:
    m = read_manifest(quickstart_run)
    suite = load_suite(ROOT / "examples/quickstart.yaml")
    assert m.config == suite.model_dump(mode="json")
    (model,) = m.models
    assert model.path and model.sha256 == sha256(model.path)
    assert model.engine == "llamacpp" and model.engine_version and "version" in model.engine_version
    for b in m.benchmarks:
        spec = get_benchmark(b.name)
        assert b.data_sha256 == sha256(spec.data_path)
        assert b.prompt_template == spec.prompt_template and b.postprocessor == spec.postprocessor
        assert b.generation["temperature"] == 0.0 and b.generation["max_tokens"] == spec.generation["max_tokens"]
        assert b.metrics == [{"name": "exact_match", "settings": {}}]
    assert {"ray", "pydantic", "pyarrow", "jiwer", "sacrebleu"} <= set(m.packages)
    assert m.ray_version and m.hostnames
    assert m.timings["inference_s"] > 0 and m.throughput["output_tokens_per_s"] > 0
    table = pq.read_table(quickstart_run / "records.parquet")
    assert table.num_rows == sum(b.num_samples for b in m.benchmarks)
    json.loads(table.column("record")[0].as_py())


def test_replica_usage_is_the_engines_own_count(quickstart_run: Path) -> None:
    """The manifest's per-replica usage comes from llama-server's own /metrics: over the inference phase it
    generated exactly the tokens the Records report, prefilled no more than their prompts (its prompt cache may
    reuse some), and was busy; the timeline holds the samples."""
    from omnieval._replica_usage import read_timeline

    m = read_manifest(quickstart_run)
    (u,) = m.replica_usage
    records = read_records(quickstart_run)
    assert u.engine == "llamacpp" and u.slots == 4 and u.samples >= 2
    if m.throughput["inferred"] == len(records):  # not served from an earlier session's response cache
        assert u.output_tokens == sum(r.output.usage.completion_tokens for r in records)  # type: ignore[union-attr]
        assert 0 < u.prompt_tokens <= sum(r.output.usage.prompt_tokens for r in records)  # type: ignore[union-attr]
        assert u.busy_fraction is not None and u.busy_fraction >= 0.5
        assert u.last_busy_s is not None and u.last_busy_s <= m.timings["inference_s"] + 1e-6
        # llama-server's own CPU (the kernel's count for its process), within what the node was busy with
        assert u.cpu_cores is not None and u.node_busy_cores is not None and u.node_cpus
        assert 0.2 < u.cpu_cores <= u.node_busy_cores + 0.05 <= u.node_cpus + 0.05
    assert len(read_timeline(quickstart_run)) >= u.samples


def test_rerun_reports_differences(quickstart_run: Path, tmp_path: Path) -> None:
    """An edited copy of the artifact must be reported as different, naming the sample and the score."""
    copy = tmp_path / quickstart_run.name
    shutil.copytree(quickstart_run, copy)
    from omnieval._artifacts import read_manifest as rm
    from omnieval._artifacts import write_manifest, write_records

    recs = read_records(copy)
    recs[0].output.text.prediction = ["tampered"]  # type: ignore[union-attr]
    write_records(copy, recs)
    man = rm(copy)
    man.scores[0].value = (man.scores[0].value or 0) + 5
    write_manifest(copy, man)
    diffs = diff_runs(quickstart_run, copy)
    assert any("predictions differ" in d and recs[0].benchmark in d for d in diffs)
    assert any(d.startswith(f"score {man.scores[0].model}/{man.scores[0].benchmark}") for d in diffs)
    assert diff_runs(quickstart_run, quickstart_run) == []


def test_rerun_reproduces_scores(quickstart_run: Path, tmp_path: Path) -> None:
    proc = run_cli("rerun", str(quickstart_run), "--output-dir", str(tmp_path))
    assert proc.returncode == 0, f"rerun differs:\n{proc.stdout}\n{proc.stderr[-3000:]}"
    assert "identical" in proc.stdout


def test_changing_only_a_metric_does_zero_inference(quickstart_run: Path, tmp_path: Path) -> None:
    """Same prompts, weights, engine and generation options: every response comes from the content-addressed cache."""
    text = (ROOT / "examples/quickstart.yaml").read_text()
    text = text.replace("  - name: mmlu_tiny\n    limit: 20\n", "  - name: mmlu_tiny\n    limit: 20\n    metrics: [exact_match, chrf]\n")
    suite = tmp_path / "rescore.yaml"
    suite.write_text(text)
    proc = run_cli("run", str(suite), "--output-dir", str(tmp_path / "runs"), "--no-progress")
    assert proc.returncode == 0, proc.stderr[-3000:]
    from testlib.runs import artifact_from

    m = read_manifest(artifact_from(proc.stdout))
    assert m.throughput["inferred"] == 0 and m.throughput["cache_hits"] == 40
    assert {(s.benchmark, s.metric) for s in m.scores} >= {("mmlu_tiny", "chrf"), ("mmlu_tiny", "exact_match")}
    base = {(s.benchmark, s.metric): s.value for s in read_manifest(quickstart_run).scores}
    assert {(s.benchmark, s.metric): s.value for s in m.scores if s.metric == "exact_match"} == base
