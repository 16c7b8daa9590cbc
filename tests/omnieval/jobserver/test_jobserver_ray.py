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
