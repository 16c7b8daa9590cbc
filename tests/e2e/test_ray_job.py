"""``ray start --head`` + ``ray job submit -- omnieval run ...``: the product's cluster entry point."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from testlib.ray_head import private_ray_head
from testlib.runs import ROOT, artifact_from

from omnieval import read_manifest

pytestmark = [pytest.mark.slow, pytest.mark.ray]


def test_ray_job_submit_runs_the_suite(tmp_path: Path) -> None:
    suite = tmp_path / "suite.yaml"
    text = (ROOT / "examples/quickstart.yaml").read_text().replace("limit: 20", "limit: 4")
    suite.write_text(text)
    out = tmp_path / "runs"
    bindir = os.path.dirname(sys.executable)
    with private_ray_head(num_cpus=2) as head:
        env = {**os.environ, **head.env, "RAY_ADDRESS": head.dashboard, "PATH": bindir + os.pathsep + os.environ["PATH"]}
        cmd = [os.path.join(bindir, "ray"), "job", "submit", "--address", head.dashboard, "--",
               sys.executable, "-m", "omnieval", "run", str(suite), "--output-dir", str(out)]  # fmt: skip
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "succeeded" in proc.stdout.lower()
    # a job's log has no terminal: progress comes as plain lines, with the rate and an ETA
    assert "progress: smollm2-135m · mmlu_tiny 4/4 (100%)" in proc.stdout and "ETA" in proc.stdout, proc.stdout[-3000:]
    run_dir = artifact_from(proc.stdout)
    m = read_manifest(run_dir)
    assert m.status == "completed"
    assert sum(s.num_samples for s in m.scores) == 8 and all(s.num_errors == 0 for s in m.scores)


def test_ray_job_stop_cancels_the_run_and_releases_its_replicas(tmp_path: Path) -> None:
    """``ray job stop`` sends SIGTERM and SIGKILLs 3 s later: within that time the run says it was cancelled (in the
    job's log and its manifest) and its replicas are released; the checkpoint keeps what was answered."""
    from testlib.ray_head import wait_until

    suite = tmp_path / "suite.yaml"
    suite.write_text((ROOT / "examples/quickstart.yaml").read_text())
    out = tmp_path / "runs"
    bindir = os.path.dirname(sys.executable)
    ray = os.path.join(bindir, "ray")
    with private_ray_head(num_cpus=2) as head:
        env = {**os.environ, **head.env, "RAY_ADDRESS": head.dashboard, "PATH": bindir + os.pathsep + os.environ["PATH"]}

        def job(*args: str) -> str:
            p = subprocess.run([ray, "job", args[0], "--address", head.dashboard, *args[1:]], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=120)  # fmt: skip
            return p.stdout + p.stderr

        sub = job("submit", "--no-wait", "--", sys.executable, "-m", "omnieval", "run", str(suite), "--output-dir", str(out))
        job_id = next(w for w in sub.replace("'", " ").split() if w.startswith("raysubmit_"))
        wait_until(lambda: "progress: smollm2-135m" in job("logs", job_id), 600, "the run's first progress line")
        job("stop", job_id)
        wait_until(lambda: "was stopped" in job("status", job_id), 60, "the job to stop")
        wait_until(lambda: "run stopped by SIGTERM" in job("logs", job_id), 30, "the cancel line in the job log")

        def replicas_alive() -> str:
            return subprocess.run([ray, "list", "actors", "--filter", "state=ALIVE"], env=env, capture_output=True,
                                  text=True, timeout=120).stdout  # fmt: skip

        wait_until(lambda: "EngineReplica" not in replicas_alive(), 60, "the run's replicas to be released")
    (run_dir,) = list(out.iterdir())
    m = read_manifest(run_dir)
    assert m.status == "cancelled" and "SIGTERM" in (m.error or "")
    assert (run_dir / "records.partial.jsonl").exists()
