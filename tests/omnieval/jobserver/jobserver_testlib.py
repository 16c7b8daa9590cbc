"""Helpers for the job-server tests: a real `python -m omnieval.jobserver` process on a free port, bounded waits."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from serving import free_port

ROOT = Path(__file__).resolve().parents[3]
FAKE_ENTRY = Path(__file__).with_name("fake_entry.py")
TOKEN = "test-token-0123456789abcdef"


def wait_until(pred: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    """Poll ``pred`` until truthy or the deadline passes (then fail naming ``what``)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def suite(name: str, seed: int = 0) -> dict[str, Any]:
    """A minimal valid suite; the fake entrypoint reads its name to pick a behaviour."""
    return {
        "name": name,
        "seed": seed,
        "models": [
            {"name": "m", "engine": "openai", "source": {"kind": "endpoint", "base_url": "http://127.0.0.1:9/v1"}}
        ],
        "benchmarks": [{"name": "mmlu_tiny", "limit": 2}],
    }


class Server:
    """One job-server process; ``restart`` keeps its db and jobs dir."""

    def __init__(self, tmp: Path, extra: list[str], env: dict[str, str] | None = None) -> None:
        self.tmp, self.extra, self.env = tmp, extra, env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.log = tmp / "server.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, token: str | None = TOKEN) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def start(self, timeout: float = 60) -> Server:
        self.port = free_port()
        cmd = [sys.executable, "-m", "omnieval.jobserver", "--port", str(self.port), "--db", str(self.tmp / "jobs.db")]
        cmd += ["--jobs-dir", str(self.tmp / "jobs"), "--poll-interval", "0.2", "--log-level", "warning", *self.extra]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMNIEVAL_SERVER_TOKEN": TOKEN, **self.env}
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, cwd=self.tmp, env=env, stdout=log, stderr=subprocess.STDOUT)

        def up() -> bool:
            assert self.proc is not None and self.proc.poll() is None, f"server exited: {self.log.read_text()}"
            try:
                return httpx.get(self.url + "/health", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        wait_until(up, timeout, "the job server to answer /health", interval=0.2)
        return self

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)
        self.proc = None


def subprocess_server_args(max_concurrent: int = 1) -> list[str]:
    template = f"{{python}} {shlex.quote(str(FAKE_ENTRY))} {{suite}} {{out}}"
    return ["--runner", "subprocess", "--entrypoint-template", template, "--max-concurrent", str(max_concurrent)]


def wait_state(client: httpx.Client, job_id: str, states: set[str], timeout: float = 30) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        job: dict[str, Any] = client.get(f"/jobs/{job_id}").json()
        return job if job["state"] in states else None

    return wait_until(done, timeout, f"job {job_id} to reach {sorted(states)}", interval=0.1)


def kill_leftover_jobs(jobs_dir: Path) -> None:
    """Kill job process groups a test left behind (by the pids the runner recorded), so nothing outlives tests."""
    import signal

    for pid_file in jobs_dir.glob("*/pid"):
        try:
            pid = int(pid_file.read_text())
            if os.getsid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
        except (ValueError, OSError):
            pass
