"""The job server against a real Ray head (``ray start --head`` with token auth), through RayJobRunner."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from jobserver_testlib import wait_state, wait_until
from testlib.ray_head import private_ray_head


@pytest.fixture
def ray_head() -> Iterator[tuple[str, dict[str, str]]]:
    """A private Ray head with token auth (see tests/testlib/ray_head.py)."""
    if shutil.which("ray", path=os.path.dirname(sys.executable)) is None:
        pytest.skip("ray CLI not installed beside this interpreter")
    with private_ray_head(num_cpus=2) as head:
        yield head.dashboard, head.env


@pytest.mark.slow
@pytest.mark.ray
def test_ray_job_reaches_succeeded_and_cancels(make_server, ray_head, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from jobserver_testlib import suite

    address, ray_env = ray_head
    assert httpx.get(address + "/api/jobs/", timeout=10).status_code == 401  # the head really enforces token auth
    code = "import pathlib, sys; print('hello from ray'); pathlib.Path(sys.argv[1], 'done').write_text('ok')"
    template = f'{{python}} -c "{code}" {{out}}'

    def args(template: str) -> list[str]:
        return ["--runner", "ray", "--ray-address", address, "--entrypoint-template", template, "--max-concurrent", "2"]

    server = make_server(args(template), env=ray_env).start()
    with server.client() as c:
        job = c.post("/add_job", json={"suite": suite("ok-ray")}).json()
        done = wait_state(c, job["id"], {"succeeded", "failed", "cancelled"}, timeout=120)
        assert done["state"] == "succeeded", (done, c.get(f"/jobs/{job['id']}/logs").text)
        assert done["ray_job_id"] == f"omnieval-{job['id']}"
        assert (tmp_path / "jobs" / job["id"] / "runs" / "done").read_text() == "ok"
        assert "hello from ray" in c.get(f"/jobs/{job['id']}/logs").json()["logs"]

    # a long job, cancelled through the API, is stopped in Ray too
    server.stop()
    server.extra = args("sleep 60")
    server.start()
    with server.client() as c:
        assert c.get(f"/jobs/{job['id']}").json()["state"] == "succeeded"  # persisted across the restart
        sleeper = c.post("/add_job", json={"suite": suite("sleep-ray")}).json()
        wait_state(c, sleeper["id"], {"running"}, timeout=120)
        r = c.post(f"/jobs/{sleeper['id']}/cancel")
        assert r.status_code == 200 and r.json()["state"] == "cancelled", r.text

    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(address, headers={"Authorization": f"Bearer {ray_env['RAY_AUTH_TOKEN']}"})

    def ray_state() -> str | None:
        state = str(client.get_job_status(f"omnieval-{sleeper['id']}").value)
        return state if state in ("STOPPED", "FAILED", "SUCCEEDED") else None

    assert wait_until(ray_state, 60, "Ray to stop the job") == "STOPPED"


@pytest.mark.slow
@pytest.mark.ray
def test_real_suite_through_the_job_api_leaves_its_artifact(make_server, ray_head, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The shipped entrypoint (``omnieval run {suite} --output-dir {out}``, no template override) runs a real tiny
    suite as a Ray job: default SmolLM2 GGUF on llama.cpp, 3 MMLU samples, no verifier."""
    from testlib.engine import require_engine

    from omnieval import read_manifest, read_records
    from omnieval._defaults import DEFAULT_MODEL_SOURCE
    from omnieval.jobserver import DEFAULT_ENTRYPOINT

    require_engine()
    address, ray_env = ray_head
    real = {
        "name": "real-tiny",
        "models": [{"name": "smol", "source": DEFAULT_MODEL_SOURCE.model_dump(mode="json"), "engine": "llamacpp",
                    "replicas": 1, "resources": {"num_cpus": 1},
                    "engine_kwargs": {"parallel": 2, "ctx_per_slot": 1024, "threads": 1}}],
        "benchmarks": [{"name": "mmlu_tiny", "limit": 3}],
        "generation": {"temperature": 0.0, "max_tokens": 16, "seed": 0},
        "pool": {"clients": 1},
        "verifier": None,
    }  # fmt: skip
    assert DEFAULT_ENTRYPOINT.startswith("omnieval run ")  # what runs below: the server is given no template
    server = make_server(["--runner", "ray", "--ray-address", address, "--max-concurrent", "1"], env=ray_env).start()
    with server.client() as c:
        r = c.post("/add_job", json={"suite": real})
        assert r.status_code == 201, r.text
        job_id = r.json()["id"]
        done = wait_state(c, job_id, {"succeeded", "failed", "cancelled"}, timeout=900)
        logs = c.get(f"/jobs/{job_id}/logs").json()["logs"]
        assert done["state"] == "succeeded", (done, logs[-4000:])
        assert done["ray_job_id"] == f"omnieval-{job_id}" and done["name"] == "real-tiny"
    artifacts = [line.removeprefix("artifact: ").strip() for line in logs.splitlines() if line.startswith("artifact: ")]
    assert len(artifacts) == 1, logs[-4000:]
    run_dir = Path(artifacts[0])
    assert run_dir.parent == (tmp_path / "jobs" / job_id / "runs").resolve()  # where the server pointed the run
    assert "mmlu_tiny" in logs and "exact_match" in logs  # the score table was printed

    manifest = read_manifest(run_dir)
    assert manifest.status == "completed" and manifest.suite_name == "real-tiny"
    (score,) = manifest.scores
    assert (score.model, score.benchmark, score.metric, score.engine) == (
        "smol",
        "mmlu_tiny",
        "exact_match",
        "llamacpp",
    )
    assert score.num_samples == 3 and score.num_errors == 0
    assert score.value is not None and 0.0 <= score.value <= 100.0
    records = read_records(run_dir)
    assert sorted(r.index for r in records) == [0, 1, 2]
    for rec in records:  # inferred now by a pool replica, not read from a cache
        assert rec.error is None and rec.output is not None and rec.output.replica
        assert rec.output.usage is not None and rec.output.usage.completion_tokens > 0
        assert "exact_match" in rec.metrics
    assert score.value == pytest.approx(100.0 * sum(r.metrics["exact_match"] for r in records) / 3, abs=1e-4)
