"""Store, executors and job queue in-process (no HTTP): WAL, compare-and-set, re-attach outcomes."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from pathlib import Path

import pytest
from jobserver_testlib import wait_until

from omnieval.jobserver import Job, JobNotFoundError, JobStore, RunnerStatus, SubprocessJobRunner
from omnieval.jobserver._executors import prepare_job_dir
from omnieval.jobserver._queue import JobConflictError, JobQueue


def test_store_wal_persistence_and_compare_and_set(tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    store = JobStore(db)
    a = store.add("a", {"name": "a"})
    b = store.add("b", {"name": "b"})
    assert [j.id for j in store.list_jobs()] == [b.id, a.id]
    assert store.update(a.id, expect=("pending",), state="submitted", ray_job_id="r1") is not None
    assert store.update(a.id, expect=("pending",), state="failed") is None  # no longer pending: untouched
    with pytest.raises(ValueError):
        store.update(a.id, state="exploded")
    with pytest.raises(ValueError):
        store.update(a.id, suite="{}")
    store.close()

    again = JobStore(db)
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    got = again.get(a.id)
    assert got is not None and (got.state, got.ray_job_id, got.suite) == ("submitted", "r1", {"name": "a"})
    assert [j.id for j in again.list_jobs("pending")] == [b.id]
    assert again.get("missing") is None
    again.close()


def test_prepare_job_dir_refuses_odd_ids_and_keeps_braces(tmp_path: Path) -> None:
    job = Job(id="0" * 32, name="x", state="pending", suite={"name": "x"})
    job_dir, entry = prepare_job_dir(tmp_path, job, "{python} -c 'print({})' {suite} {out} {job_id}")
    assert entry == f"{sys.executable} -c 'print({{}})' {job_dir}/suite.yaml {job_dir}/runs {job.id}"
    with pytest.raises(ValueError):
        prepare_job_dir(tmp_path, Job(id="../../etc", name="x", state="pending", suite={}), "true")


def test_subprocess_runner_reports_a_vanished_process_as_failed(tmp_path: Path) -> None:
    runner = SubprocessJobRunner(tmp_path, "true")
    job = Job(id="1" * 32, name="x", state="pending", suite={"name": "x"})
    rid = runner.submit(job)
    assert runner.submit(job) == rid  # adopted, not started twice
    fresh = SubprocessJobRunner(tmp_path)  # as after a restart: no process handle, only the files
    wait_until(lambda: fresh.status(rid).state != "RUNNING", 10, "the job to end")
    assert fresh.status(rid) == RunnerStatus("SUCCEEDED", "exit code 0")
    (tmp_path / job.id / "exit_code").unlink()
    assert fresh.status(rid).state == "FAILED"
    with pytest.raises(JobNotFoundError):
        fresh.status("local-" + "2" * 32)


class _FakeRunner:
    def __init__(self) -> None:
        self.states: dict[str, RunnerStatus | Exception] = {}
        self.stopped: list[str] = []

    def submit(self, job: Job) -> str:
        self.states[f"r-{job.id}"] = RunnerStatus("RUNNING")
        return f"r-{job.id}"

    def status(self, ray_job_id: str) -> RunnerStatus:
        st = self.states.get(ray_job_id, JobNotFoundError(ray_job_id))
        if isinstance(st, Exception):
            raise st
        return st

    def stop(self, ray_job_id: str) -> None:
        self.stopped.append(ray_job_id)
        self.states[ray_job_id] = RunnerStatus("STOPPED")

    def logs(self, ray_job_id: str) -> str:
        return ""


def test_queue_reattach_outcomes_and_cancel(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "jobs.db")
    runner = _FakeRunner()
    lost, flaky, done = (store.add(n, {"name": n}) for n in ("lost", "flaky", "done"))
    for job in (lost, flaky, done):
        store.update(job.id, state="running", ray_job_id=f"r-{job.id}")
    runner.states[f"r-{flaky.id}"] = ConnectionError("ray is down")
    runner.states[f"r-{done.id}"] = RunnerStatus("SUCCEEDED", "Job finished successfully.")
    queued = [store.add(f"q{i}", {"name": f"q{i}"}) for i in range(3)]
    job_queue = JobQueue(store, runner, max_concurrent=2)

    async def scenario() -> None:
        assert await job_queue.tick()
        assert store.get(lost.id).state == "failed" and "lost the job" in store.get(lost.id).message  # type: ignore[union-attr]
        f = store.get(flaky.id)
        assert f is not None and f.state == "running" and "ray is down" in f.message
        assert store.get(done.id).state == "succeeded"  # type: ignore[union-attr]
        # flaky still holds a slot: only one of the two free slots is filled
        assert [store.get(q.id).state for q in queued] == ["submitted", "pending", "pending"]  # type: ignore[union-attr]
        cancelled = await job_queue.cancel(queued[0].id)
        assert cancelled is not None and cancelled.state == "cancelled" and runner.stopped == [f"r-{queued[0].id}"]
        assert (await job_queue.cancel(queued[0].id)).state == "cancelled"  # type: ignore[union-attr]
        with pytest.raises(JobConflictError):
            await job_queue.cancel(done.id)
        assert await job_queue.cancel("unknown") is None
        await job_queue.tick()
        assert store.get(queued[0].id).state == "cancelled"  # a STOPPED poll result never rewrites it  # type: ignore[union-attr]
        assert store.get(queued[1].id).state == "submitted"  # type: ignore[union-attr]

    asyncio.run(scenario())
    store.close()
