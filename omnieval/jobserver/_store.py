"""SQLite job store: the server's only state, so jobs survive restarts and crashes.

WAL mode keeps readers (GET /jobs) from blocking the job queue's writes. One server process owns a database;
two servers on the same file would both schedule its pending jobs.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

JobState = Literal["pending", "submitted", "running", "succeeded", "failed", "cancelled"]
STATES: tuple[str, ...] = get_args(JobState)
ACTIVE_STATES: tuple[JobState, ...] = ("submitted", "running")
"""States holding a runner job: polled by the job queue and re-attached after a restart."""
FINAL_STATES: tuple[JobState, ...] = ("succeeded", "failed", "cancelled")

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ({", ".join(repr(s) for s in STATES)})),
    suite TEXT NOT NULL,
    ray_job_id TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    message TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs (state, created_at);
"""


@dataclass
class Job:
    """One evaluation request as stored; ``suite`` is the validated SuiteConfig as JSON-able dict."""

    id: str
    name: str
    state: JobState
    suite: dict[str, Any]
    ray_job_id: str | None = None
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    message: str = ""

    @property
    def finished(self) -> bool:
        return self.state in FINAL_STATES


def _row_to_job(row: sqlite3.Row) -> Job:
    return Job(
        id=row["id"],
        name=row["name"],
        state=row["state"],
        suite=json.loads(row["suite"]),
        ray_job_id=row["ray_job_id"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        message=row["message"],
    )


class JobStore:
    """Thread-safe CRUD over the ``jobs`` table (the job queue's worker threads and the event loop share it)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA busy_timeout=5000")
            self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def add(self, name: str, suite: dict[str, Any]) -> Job:
        job = Job(id=uuid.uuid4().hex, name=name, state="pending", suite=suite)
        with self._lock:
            self._db.execute(
                "INSERT INTO jobs (id, name, state, suite, ray_job_id, created_at, updated_at, message)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (job.id, job.name, job.state, json.dumps(suite), None, job.created_at, job.updated_at, ""),
            )
        return job

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return _row_to_job(row) if row else None

    def list_jobs(self, state: str | None = None, *, limit: int = 1000, oldest_first: bool = False) -> list[Job]:
        """Jobs newest first (the API's order); ``oldest_first`` gives the job queue FIFO order."""
        order = "ASC" if oldest_first else "DESC"
        sql = "SELECT * FROM jobs" + (" WHERE state = ?" if state else "")
        sql += f" ORDER BY created_at {order}, rowid {order} LIMIT ?"
        args: tuple[Any, ...] = (state, limit) if state else (limit,)
        with self._lock:
            rows = self._db.execute(sql, args).fetchall()
        return [_row_to_job(r) for r in rows]

    def in_states(self, states: tuple[str, ...]) -> list[Job]:
        marks = ", ".join("?" for _ in states)
        with self._lock:
            rows = self._db.execute(
                f"SELECT * FROM jobs WHERE state IN ({marks}) ORDER BY created_at ASC, rowid ASC", states
            ).fetchall()
        return [_row_to_job(r) for r in rows]

    def update(self, job_id: str, *, expect: tuple[str, ...] | None = None, **fields: Any) -> Job | None:
        """Set ``fields`` (state, ray_job_id, message); with ``expect`` only if the job is still in those states.

        Returns the updated job, or None when it is unknown or no longer in an expected state (a compare-and-set,
        so a late poll result can never overwrite a cancellation).
        """
        allowed = {"state", "ray_job_id", "message"}
        if not fields.keys() <= allowed:
            raise ValueError(f"cannot update {sorted(fields.keys() - allowed)}")
        if "state" in fields and fields["state"] not in STATES:
            raise ValueError(f"unknown state {fields['state']!r}")
        fields["updated_at"] = time.time()
        sets = ", ".join(f"{k} = ?" for k in fields)
        sql = f"UPDATE jobs SET {sets} WHERE id = ?"
        args: list[Any] = [*fields.values(), job_id]
        if expect:
            sql += f" AND state IN ({', '.join('?' for _ in expect)})"
            args += list(expect)
        with self._lock:
            changed = self._db.execute(sql, args).rowcount
        return self.get(job_id) if changed else None
