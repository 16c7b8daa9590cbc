"""Kill the driver mid-run; ``omnieval run --resume`` finishes from the checkpoint, no sample inferred twice."""

from __future__ import annotations

import contextlib
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


def _start_quickstart(tmp_path: Path) -> subprocess.Popen[bytes]:
    """The quickstart without the response cache (real inference before and after the stop, not cache replay), in
    a session of its own."""
    suite = tmp_path / "quickstart-nocache.yaml"
    suite.write_text((ROOT / "examples/quickstart.yaml").read_text() + "cache: {enabled: false}\n")
    return subprocess.Popen(
        omnieval_cmd("run", str(suite), "--output-dir", str(tmp_path / "runs"), "--no-progress"),
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip


def _wait_for_records(out: Path, n: int) -> Path:
    """The run directory, once its checkpoint holds ``n`` records."""
    wait_until(lambda: any(out.glob("*/manifest.json")), 300, "the run directory")
    run_dir = next(out.glob("*/manifest.json")).parent
    wait_until(lambda: _lines(run_dir / CHECKPOINT) >= n, 600, f"{n} checkpointed records")
    return run_dir


def _freeze_engines(sid: int) -> list[int]:
    """SIGSTOP the run's llama-server processes: no record completes after this, so what the test stops next is a
    run in the middle of its work however fast the machine is (no race between a poll and the run's end)."""
    out = subprocess.run(["ps", "-eo", "pid=,sid=,args="], capture_output=True, text=True).stdout
    pids = [int(f[0]) for f in (ln.split(None, 2) for ln in out.splitlines())
            if len(f) == 3 and f[1] == str(sid) and "llama-server" in f[2]]  # fmt: skip
    assert pids, "the run's engine should be up"
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    return pids


def _thaw(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def test_resume_after_driver_kill(quickstart_run: Path, tmp_path: Path) -> None:
    proc = _start_quickstart(tmp_path)
    try:
        run_dir = _wait_for_records(tmp_path / "runs", 8)
        _freeze_engines(proc.pid)
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


def _session_processes(sid: int, needle: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "sid=,args="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if line.split(None, 1)[0] == str(sid) and needle in line]


def test_sigterm_cancels_releases_and_resume_finishes(tmp_path: Path) -> None:
    """``ray job stop`` sends SIGTERM: the run stops, keeps its checkpoint, releases its engines, says
    ``cancelled`` and exits 143; ``--resume`` then completes it with every sample exactly once."""
    proc = _start_quickstart(tmp_path)
    try:
        run_dir = _wait_for_records(tmp_path / "runs", 8)
        frozen = _freeze_engines(proc.pid)
        proc.send_signal(signal.SIGTERM)  # the driver only, as `ray job stop` does
        _thaw(frozen)  # what the engines held may still land (checkpointed, not lost); nothing new is dispatched
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    assert proc.returncode == 143, err[-3000:].decode(errors="replace")
    assert b"stopped by SIGTERM" in err
    assert read_manifest(run_dir).status == "cancelled"
    wait_until(lambda: not _session_processes(proc.pid, "llama-server"), 60, "the run's engine to be gone")
    done_before = _lines(run_dir / CHECKPOINT)
    assert 8 <= done_before < 40

    res = run_cli("run", "--resume", str(run_dir), "--no-progress")
    assert res.returncode == 0, res.stderr[-3000:]
    keys = [tuple(json.loads(x)[k] for k in ("model", "benchmark", "index"))
            for x in (run_dir / CHECKPOINT).read_text().splitlines() if x.strip().endswith("}")]  # fmt: skip
    assert len(keys) == len(set(keys)) == 40, "a sample was inferred twice or lost"
    assert read_manifest(run_dir).status == "completed"
