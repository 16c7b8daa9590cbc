"""The job server against a real Ray head (``ray start --head`` with token auth), through RayJobRunner."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from server_testlib import free_port, wait_state, wait_until


def _pids_using(temp_dir: str) -> list[int]:
    """Processes of this head only: every Ray process of it names our unique --temp-dir on its command line."""
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if temp_dir.encode() in (proc / "cmdline").read_bytes():
                    pids.append(int(proc.name))
            except OSError:
                pass
    return pids


@pytest.fixture
def ray_head() -> Iterator[tuple[str, dict[str, str]]]:
    """A private Ray head: its own ports, --temp-dir and token; ``--block`` so stopping it stops only it.

    ``ray stop`` would kill every Ray on the machine, so teardown signals the ``ray start --block`` process (which
    shuts its node down) and then kills, by pid, whatever still runs from our temp dir.
    """
    if shutil.which("ray", path=os.path.dirname(sys.executable)) is None:
        pytest.skip("ray CLI not installed beside this interpreter")
    temp_dir = tempfile.mkdtemp(prefix="oe-ray-", dir="/tmp")  # short: Ray's unix socket paths must fit 107 bytes
    dash = free_port()
    env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32), "RAY_USAGE_STATS_ENABLED": "0"}
    cmd = [os.path.join(os.path.dirname(sys.executable), "ray"), "start", "--head", "--block", "--num-cpus=2"]
    cmd += ["--dashboard-host=127.0.0.1", f"--port={free_port()}", f"--dashboard-port={dash}", f"--temp-dir={temp_dir}"]
    cmd += [f"--ray-client-server-port={free_port()}", f"--dashboard-agent-listen-port={free_port()}"]
    cmd += [f"--runtime-env-agent-port={free_port()}", f"--metrics-export-port={free_port()}", "--disable-usage-stats"]
    log = open(Path(temp_dir) / "ray-start.log", "wb")
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    proc = subprocess.Popen(
        cmd, env={**os.environ, **env, "PATH": path}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    address = f"http://127.0.0.1:{dash}"
    try:

        def up() -> bool:
            assert proc.poll() is None, (Path(temp_dir) / "ray-start.log").read_text()
            try:
                r = httpx.get(
                    address + "/api/version", timeout=2, headers={"Authorization": f"Bearer {env['RAY_AUTH_TOKEN']}"}
                )
                return r.status_code == 200
            except httpx.TransportError:
                return False

        wait_until(up, 120, "the Ray dashboard job API", interval=0.5)
        yield address, env
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        for pid in _pids_using(temp_dir):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        log.close()
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.ray
def test_ray_job_reaches_succeeded_and_cancels(make_server, ray_head, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from server_testlib import suite

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
