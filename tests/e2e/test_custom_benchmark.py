"""A suite-defined benchmark end to end on the real default model: the CLI runs it from a copy of the example in
another directory, the manifest records its data hash and Jinja template, and ``omnieval rerun`` reproduces it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from testlib.runs import artifact_from, run_cli

from omnieval import load_suite, read_manifest, read_records
from omnieval._plan import builtin_specs

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow]


def test_csv_benchmark_defined_in_its_own_file_runs_records_and_reruns(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples" / "custom", tmp_path / "custom")
    suite = yaml.safe_load((ROOT / "examples" / "custom_benchmark.yaml").read_text())
    suite["models"] = suite["models"][:1]  # the default text model only; the image benchmark needs the plumbing VLM
    suite["benchmarks"] = [{**suite["benchmarks"][0], "limit": 6}]
    suite["cache"] = {"enabled": False}
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(suite))

    proc = run_cli("run", str(path), "--output-dir", str(tmp_path / "runs"), "--no-progress")
    assert proc.returncode == 0, proc.stderr[-4000:]
    run = artifact_from(proc.stdout)
    manifest = read_manifest(run)

    (prov,) = manifest.benchmarks
    spec = builtin_specs(load_suite(path))["openbookqa"]
    assert prov.data_path == str(tmp_path / "custom" / "openbookqa_tiny.csv")
    assert prov.data_sha256 == spec.data_sha256()
    assert prov.template_format == "jinja" and prov.prompt_template.startswith("Question: {{ question }}")
    assert (prov.task_type, prov.postprocessor, prov.num_samples) == ("mc", "mc_letter", 6)
    (score,) = [s for s in manifest.scores if s.metric == "exact_match"]
    assert score.benchmark == "openbookqa" and score.num_samples == 6 and score.num_errors == 0
    records = read_records(run)
    assert [r.sample_id for r in records] == [f"obqa-{i}" for i in range(2, 8)]  # rows 1-2 are the worked examples
    assert all(
        r.prediction is not None and [m.role for m in r.messages] == ["user", "assistant"] * 2 + ["user"]
        for r in records
    )
    assert sum(r.metrics["exact_match"] for r in records) / 6 * 100 == pytest.approx(score.value)

    # The manifest carries the definition with absolute paths: rerun works from anywhere and matches.
    proc = run_cli("rerun", str(run), "--output-dir", str(tmp_path / "rerun"))
    assert proc.returncode == 0, f"rerun differs:\n{proc.stdout}\n{proc.stderr[-3000:]}"
    assert "identical" in proc.stdout
