"""Kill the driver mid-run; ``omnieval run --resume`` finishes from the checkpoint, no sample inferred twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from testlib.ray_head import wait_until
from testlib.runs import ROOT, artifact_from, omnieval_cmd, run_cli

from omnieval import Record, read_manifest, read_records
from omnieval._artifacts import CHECKPOINT

pytestmark = [pytest.mark.slow, pytest.mark.ray]


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_resume_after_driver_kill(quickstart_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    suite = tmp_path / "quickstart-nocache.yaml"  # real inference before and after the kill, not cache replay
    suite.write_text((ROOT / "examples/quickstart.yaml").read_text() + "cache: {enabled: false}\n")
    proc = subprocess.Popen(
        omnieval_cmd("run", str(suite), "--output-dir", str(out), "--no-progress"),
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        wait_until(lambda: any(out.glob("*/manifest.json")), 300, "the run directory")
        run_dir = next(out.glob("*/manifest.json")).parent
        wait_until(lambda: _lines(run_dir / CHECKPOINT) >= 8, 600, "8 checkpointed records")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its local Ray die like a crashed job
        proc.wait(timeout=60)
    rows = [Record.model_validate_json(x) for x in (run_dir / CHECKPOINT).read_text().splitlines() if x.strip().endswith("}")]
    before = {r.key: r.prediction for r in rows}
    done_before = set(before)
    assert 8 <= len(done_before) < 40
    assert read_manifest(run_dir).status == "running"

    res = run_cli("run", "--resume", str(run_dir), "--no-progress")
    assert res.returncode == 0, res.stderr[-3000:]
    assert artifact_from(res.stdout) == run_dir
    keys = [tuple(json.loads(x)[k] for k in ("model", "benchmark", "index"))
            for x in (run_dir / CHECKPOINT).read_text().splitlines() if x.strip().endswith("}")]  # fmt: skip
    assert len(keys) == len(set(keys)) == 40, "a sample was inferred twice or lost"
    resumed, baseline = read_manifest(run_dir), read_manifest(quickstart_run)
    assert resumed.status == "completed" and resumed.throughput["cache_hits"] == 0
    assert {(s.benchmark, s.metric): s.value for s in resumed.scores} == {
        (s.benchmark, s.metric): s.value for s in baseline.scores
    }
    # what was checkpointed before the crash is kept as it was, not re-inferred
    final = {r.key: r for r in read_records(run_dir)}
    assert all(final[k].prediction == before[k] for k in before)
