"""Job executors: where and how the server runs a stored job (a ``JobRunner`` each).

``RayJobRunner`` submits each job to a Ray cluster's job API (the production path). ``SubprocessJobRunner`` runs the
same entrypoint as a local process group: for machines without a Ray cluster, and for tests. Both write the suite to
``<jobs-dir>/<job id>/suite.yaml`` and point the run's artifacts at ``<jobs-dir>/<job id>/runs``; with a remote Ray
cluster, ``jobs-dir`` must be storage that the cluster's head node sees at the same path.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, cast

from omnieval.jobserver._store import Job

DEFAULT_ENTRYPOINT = "omnieval run {suite} --output-dir {out}"
"""Placeholders: {suite} (suite YAML path), {out} (output dir), {job_id}, {python} (this interpreter); shell-quoted."""

RunnerState = Literal["PENDING", "RUNNING", "SUCCEEDED", "FAILED", "STOPPED"]
_LOG_TAIL_BYTES = 256 * 1024
_ID_RE = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class RunnerStatus:
    """A runner job's state in Ray's vocabulary (``ray.job_submission.JobStatus`` values)."""

    state: RunnerState
    message: str = ""


class JobNotFoundError(LookupError):
    """The runner has no record of the job (e.g. the Ray cluster was restarted); it will never finish."""


class JobRunner(Protocol):
    """What the job queue needs from an executor; calls are blocking and run in worker threads."""

    def submit(self, job: Job) -> str:
        """Start the job; return the runner's id for it (stored as ``ray_job_id``)."""
        ...

    def status(self, ray_job_id: str) -> RunnerStatus:
        """Current state; raises ``JobNotFoundError`` for an id the runner does not know."""
        ...

    def stop(self, ray_job_id: str) -> None:
        """Stop the job (no-op when it already ended)."""
        ...

    def logs(self, ray_job_id: str) -> str:
        """The job's combined output so far."""
        ...


def prepare_job_dir(jobs_dir: Path, job: Job, template: str) -> tuple[Path, str]:
    """Write the suite YAML and return ``(job_dir, entrypoint)``; placeholders are replaced, not ``str.format``-ed,
    so templates may contain literal braces (``python -c "print({})"``)."""
    import yaml

    if not _ID_RE.match(job.id):  # ids are server-made uuids; never let one name a path outside jobs_dir
        raise ValueError(f"invalid job id {job.id!r}")
    job_dir = jobs_dir.resolve() / job.id
    out = job_dir / "runs"
    out.mkdir(parents=True, exist_ok=True)
    suite_path = job_dir / "suite.yaml"
    suite_path.write_text(yaml.safe_dump(job.suite, sort_keys=False))
    values = {"suite": str(suite_path), "out": str(out), "job_id": job.id, "python": sys.executable}
    entry = template
    for key, value in values.items():
        entry = entry.replace("{" + key + "}", shlex.quote(value))
    return job_dir, entry


class SubprocessJobRunner:
    """Runs each job as a local shell process group, without Ray.

    The wrapper writes the exit code to ``exit_code`` in the job dir, so a restarted server (which is no longer the
    process's parent) still learns how a job it re-attaches to ended; liveness is checked through the recorded pid.
    """

    def __init__(self, jobs_dir: str | Path, entrypoint_template: str = DEFAULT_ENTRYPOINT) -> None:
        self.jobs_dir = Path(jobs_dir)
        self.entrypoint_template = entrypoint_template
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    def _dir(self, ray_job_id: str) -> Path:
        job_id = ray_job_id.removeprefix("local-")
        if not _ID_RE.match(job_id):
            raise JobNotFoundError(f"not a local job id: {ray_job_id!r}")
        return self.jobs_dir.resolve() / job_id

    def submit(self, job: Job) -> str:
        ray_job_id = f"local-{job.id}"
        if self._pid(self._dir(ray_job_id)) is not None:
            return ray_job_id  # started before a crash that lost the store update: adopt, never run twice
        job_dir, entry = prepare_job_dir(self.jobs_dir, job, self.entrypoint_template)
        rc_tmp, rc_file = shlex.quote(str(job_dir / "exit_code.tmp")), shlex.quote(str(job_dir / "exit_code"))
        script = f"{entry}\nrc=$?\necho $rc > {rc_tmp} && mv {rc_tmp} {rc_file}\nexit $rc\n"
        with open(job_dir / "job.log", "ab") as log:
            proc = subprocess.Popen(
                ["/bin/sh", "-c", script],
                cwd=job_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: stop() kills the whole tree; server signals don't
            )
        (job_dir / "pid").write_text(str(proc.pid))
        self._procs[ray_job_id] = proc
        return ray_job_id

    def _pid(self, job_dir: Path) -> int | None:
        try:
            return int((job_dir / "pid").read_text())
        except (OSError, ValueError):
            return None

    @staticmethod
    def _alive(pid: int) -> bool:
        try:
            if os.getsid(pid) != pid:  # our wrapper leads its own session; a reused pid almost never does
                return False
        except (ProcessLookupError, PermissionError):
            return False
        try:  # a zombie (exited, not yet reaped by its parent) has ended
            return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
        except (OSError, IndexError):
            return True

    def status(self, ray_job_id: str) -> RunnerStatus:
        job_dir = self._dir(ray_job_id)
        pid = self._pid(job_dir)
        if pid is None:
            raise JobNotFoundError(f"no local job {ray_job_id!r} under {self.jobs_dir}")
        if (job_dir / "stopped").exists():
            return RunnerStatus("STOPPED", "stopped on request")
        proc = self._procs.get(ray_job_id)
        running = proc.poll() is None if proc is not None else self._alive(pid)
        if running:
            return RunnerStatus("RUNNING")
        self._procs.pop(ray_job_id, None)
        try:
            rc = int((job_dir / "exit_code").read_text())
        except (OSError, ValueError):
            return RunnerStatus("FAILED", "process ended without recording an exit code (killed?)")
        return RunnerStatus("SUCCEEDED", "exit code 0") if rc == 0 else RunnerStatus("FAILED", f"exit code {rc}")

    def stop(self, ray_job_id: str, grace_s: float = 5.0) -> None:
        """SIGTERM the process group, SIGKILL it after ``grace_s``."""
        job_dir = self._dir(ray_job_id)
        pid = self._pid(job_dir)
        if pid is None:
            raise JobNotFoundError(f"no local job {ray_job_id!r}")
        (job_dir / "stopped").touch()
        proc = self._procs.pop(ray_job_id, None)
        for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, grace_s)):
            if not (proc.poll() is None if proc is not None else self._alive(pid)):
                return
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                if proc is not None:
                    try:
                        proc.wait(timeout=0.1)
                        return
                    except subprocess.TimeoutExpired:
                        continue
                if not self._alive(pid):
                    return
                time.sleep(0.1)

    def logs(self, ray_job_id: str) -> str:
        log = self._dir(ray_job_id) / "job.log"
        if not log.exists():
            raise JobNotFoundError(f"no local job {ray_job_id!r}")
        with open(log, "rb") as f:
            f.seek(max(0, log.stat().st_size - _LOG_TAIL_BYTES))
            return f.read().decode(errors="replace")


def _ray_auth_headers() -> dict[str, str]:
    """An explicit token header when ``RAY_AUTH_TOKEN`` is set; otherwise Ray's own mechanism applies
    (``RAY_AUTH_MODE=token`` plus ``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``)."""
    token = os.environ.get("RAY_AUTH_TOKEN", "").strip()
    return {"Authorization": f"Bearer {token}"} if token else {}


class RayJobRunner:
    """Submits jobs through ``ray.job_submission.JobSubmissionClient``.

    The submission id is derived from the job id (``omnieval-<id>``), so a job submitted just before a server crash
    is adopted rather than submitted twice. The client is created lazily and re-created after a connection error.
    """

    def __init__(
        self,
        address: str,
        jobs_dir: str | Path,
        entrypoint_template: str = DEFAULT_ENTRYPOINT,
        runtime_env: dict[str, Any] | None = None,
    ) -> None:
        self.address = address
        self.jobs_dir = Path(jobs_dir)
        self.entrypoint_template = entrypoint_template
        self.runtime_env = runtime_env
        self._client: Any = None

    def _get_client(self) -> Any:
        if self._client is None:
            from ray.job_submission import JobSubmissionClient

            self._client = JobSubmissionClient(self.address, headers=_ray_auth_headers())
        return self._client

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return getattr(self._get_client(), method)(*args, **kwargs)
        except ConnectionError:
            self._client = None
            raise

    def submit(self, job: Job) -> str:
        _, entry = prepare_job_dir(self.jobs_dir, job, self.entrypoint_template)
        submission_id = f"omnieval-{job.id}"
        try:
            self._call(
                "submit_job",
                entrypoint=entry,
                submission_id=submission_id,
                runtime_env=self.runtime_env,
                metadata={"omnieval_job_id": job.id, "omnieval_job_name": job.name},
            )
        except RuntimeError as submit_error:
            try:
                self.status(submission_id)  # already there: submitted before a crash, adopt it
            except (JobNotFoundError, RuntimeError, ConnectionError):
                raise submit_error from None
            return submission_id
        return submission_id

    def status(self, ray_job_id: str) -> RunnerStatus:
        try:
            info = self._call("get_job_info", ray_job_id)
        except RuntimeError as e:
            if "status code 404" in str(e):
                raise JobNotFoundError(f"Ray at {self.address} has no job {ray_job_id!r}") from None
            raise
        status = getattr(info.status, "value", str(info.status))
        return RunnerStatus(cast(RunnerState, status), info.message or "")

    def stop(self, ray_job_id: str) -> None:
        self._call("stop_job", ray_job_id)

    def logs(self, ray_job_id: str) -> str:
        text: str = self._call("get_job_logs", ray_job_id)
        return text[-_LOG_TAIL_BYTES:]
