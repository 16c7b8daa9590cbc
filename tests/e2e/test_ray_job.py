"""The product's cluster entry point, as Ray users run it: a head plus a node with (fake) GPUs, ``ray job submit``
with a working_dir, progress in ``ray job logs``, ``ray job stop``, a driver SIGKILLed, ``--resume`` as a job, and a
pool kept with ``--keep-pool`` listed and released from the CLI.

One test walks the whole life of one run (each step reuses the last one's artifact) so CI starts the cluster and the
engine as few times as it can."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import ray
from ray.cluster_utils import Cluster
from testlib.engine import require_engine
from testlib.ray_head import wait_until
from testlib.runs import ROOT

from omnieval import read_manifest
from omnieval._artifacts import CHECKPOINT
from serving import free_port

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.isolated]
BINDIR = os.path.dirname(sys.executable)
N = 6  # samples per benchmark: 12 requests one at a time, so the stop and the kill land mid-run


def _auth() -> dict[str, str]:
    """The dashboard's token header when Ray runs with token auth: Ray 2.60 switches it on for the whole process at the
    first local ``ray.init()`` (``RAY_AUTH_MODE=token``, token in ``~/.ray/auth_token``), so a cluster started after an
    earlier test's local Ray answers 401 without it. The ``ray`` CLI finds the token the same way by itself."""
    if os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
        return {}
    token = os.environ.get("RAY_AUTH_TOKEN") or Path(
        os.environ.get("RAY_AUTH_TOKEN_PATH", "~/.ray/auth_token")).expanduser().read_text().strip()  # fmt: skip
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def two_nodes() -> Iterator[dict[str, Any]]:
    """A head (2 CPUs, no GPU) with a dashboard for the job API, and a worker node declaring one GPU."""
    require_engine()
    if ray.is_initialized():  # an earlier test's in-process Ray must not be the one this test talks to
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 2, "include_dashboard": True, "dashboard_host": "127.0.0.1", "dashboard_port": free_port(),
    })  # fmt: skip
    gpu_node = cluster.add_node(num_cpus=1, num_gpus=1)
    try:
        ray.init(address=cluster.address, namespace="omnieval", log_to_driver=False, logging_level="WARNING")
        logs = Path(ray._private.worker._global_node.get_session_dir_path()) / "logs"
        from ray._private.services import get_webui_url_from_internal_kv

        def job_api_up() -> bool:
            url = get_webui_url_from_internal_kv()  # where the head's dashboard really serves, once it registered
            try:
                # the jobs list, not /api/version: that answers before the job module (and its agent) can take a job
                return bool(url) and httpx.get(f"http://{url}/api/jobs/", timeout=5, headers=_auth()).status_code == 200
            except httpx.TransportError:
                return False

        try:
            wait_until(job_api_up, 300, "the dashboard's job API")
            dashboard = f"http://{get_webui_url_from_internal_kv()}"
        except TimeoutError as e:  # say why: the dashboard's own log (a 401 there is a token the test lacks)
            tail = "".join((logs / f).read_text()[-1500:] for f in ("dashboard.log", "dashboard.err") if (logs / f).exists())
            raise TimeoutError(f"{e}\n{tail}") from None
        yield {"cluster": cluster, "gpu_node": gpu_node.node_id, "dashboard": dashboard}
    finally:
        ray.shutdown()
        cluster.shutdown()


def _ray(dashboard: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": BINDIR + os.pathsep + os.environ["PATH"], "RAY_ADDRESS": dashboard}
    return subprocess.run([os.path.join(BINDIR, "ray"), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def _submit(dashboard: str, workdir: Path, *omnieval_args: str, wait: bool = False) -> tuple[str, str]:
    """``ray job submit``; a submission the job server refused outright (its agent still starting on a loaded
    machine) is sent again, three tries at most: the job itself is never retried, it was never created."""
    out = ""
    for _ in range(3):
        p = _ray(dashboard, "job", "submit", "--address", dashboard, "--working-dir", str(workdir),
                 *([] if wait else ["--no-wait"]), "--", sys.executable, "-m", "omnieval", *omnieval_args,
                 timeout=900)  # fmt: skip
        out = p.stdout + p.stderr
        ids = [w for w in out.replace("'", " ").split() if w.startswith("raysubmit_")]
        if ids:
            return ids[0], out
        wait_until(lambda: httpx.get(dashboard + "/api/jobs/", timeout=5, headers=_auth()).status_code == 200, 60,
                   "the job API")  # fmt: skip
    raise AssertionError(f"ray job submit to {dashboard} gave no job id three times:\n{out[-3000:]}")


def _driver_pids(needle: str) -> list[int]:
    """The job's ``python -m omnieval run ...`` process (Ray's supervisor starts it through a shell)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"omnieval" in argv and b"run" in argv and any(needle.encode() in a for a in argv) \
                    and os.path.basename(argv[0].decode(errors="replace")).startswith("python"):  # fmt: skip
                pids.append(int(proc.name))
    return pids


def _controller() -> Any:
    return ray.get_actor("omnieval-pool", namespace="omnieval")


def _pool_cli(dashboard: str, gcs: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RAY_ADDRESS": gcs}
    return subprocess.run([sys.executable, "-m", "omnieval", "pool", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def test_ray_job_on_a_gpu_node_stop_kill_resume_and_kept_pool(two_nodes: dict[str, Any], tmp_path: Path) -> None:
    dashboard, gpu_node, cluster = two_nodes["dashboard"], two_nodes["gpu_node"], two_nodes["cluster"]
    text = (ROOT / "examples/quickstart.yaml").read_text()
    for old, new in [("limit: 20", f"limit: {N}"), ("parallel: 4", "parallel: 1"), ("max_tokens: 64", "max_tokens: 128"),
                     ("resources: {num_cpus: 1}", "resources: {num_cpus: 1, num_gpus: 1}"),
                     ("pool: {clients: 2, max_inflight_per_replica: 4, chunk_size: 4}",
                      "pool: {clients: 1, max_inflight_per_replica: 1, chunk_size: 1, lease_grace_s: 10}")]:  # fmt: skip
        assert old in text, old
        text = text.replace(old, new)
    workdir = tmp_path / "job"  # shipped as the job's working_dir: the driver runs in Ray's temporary copy of it
    workdir.mkdir()
    (workdir / "suite.yaml").write_text(text)
    out = tmp_path / "runs"  # absolute: a relative output.dir inside a working_dir copy is refused (test_output_dir)

    def logs(job_id: str) -> str:
        return _ray(dashboard, "job", "logs", "--address", dashboard, job_id).stdout

    def status(job_id: str) -> str:
        p = _ray(dashboard, "job", "status", "--address", dashboard, job_id)
        return p.stdout + p.stderr

    # 1. submitted as a job: the replica lands on the GPU node, progress reaches `ray job logs`
    job, _ = _submit(dashboard, workdir, "run", "suite.yaml", "--output-dir", str(out))
    wait_until(lambda: "progress: smollm2-135m" in logs(job), 600, "the run's first progress line")
    assert "ETA" in logs(job)  # plain progress lines with a rate and an ETA: a job's log has no terminal
    (rep,) = ray.get(_controller().replicas.remote("smollm2-135m"))
    assert rep.node_id == gpu_node, "the num_gpus: 1 replica must run on the node that has the GPU"
    from ray import serve

    engine_pid = serve.get_app_handle(rep.replica_id).pid.remote().result()
    assert engine_pid is not None and Path(f"/proc/{engine_pid}").exists()

    # 2. `ray job stop` mid-run: cancelled in the log and manifest, the replica and its engine gone within 60 s
    _ray(dashboard, "job", "stop", "--address", dashboard, job)
    wait_until(lambda: any(w in status(job) for w in ("was stopped", "succeeded", "failed")), 60, "the job to end")
    assert "was stopped" in status(job), f"the job ended before the stop reached it: {status(job)}"
    wait_until(lambda: "run stopped by SIGTERM" in logs(job), 30, "the cancel line in the job log")
    wait_until(lambda: not ray.get(_controller().replicas.remote()), 60, "the run's replicas to be released")
    wait_until(lambda: not Path(f"/proc/{engine_pid}").exists(), 60, "the engine process to exit")
    (run_dir,) = list(out.iterdir())
    m = read_manifest(run_dir)
    assert m.status == "cancelled" and "SIGTERM" in (m.error or "")
    stopped_at = len((run_dir / CHECKPOINT).read_text().splitlines())
    assert stopped_at < 2 * N

    # 3. the resumed run as a job, its driver SIGKILLed: no release, no cancel; the controller releases its replica
    # once its heartbeats have been silent for lease_grace_s (10 s)
    job2, _ = _submit(dashboard, workdir, "run", "--resume", str(run_dir))
    wait_until(lambda: ray.get(_controller().replicas.remote()), 300, "the resumed run's replica")
    wait_until(lambda: _driver_pids(str(run_dir)), 60, "the resumed run's driver process")
    for pid in _driver_pids(str(run_dir)):
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not ray.get(_controller().replicas.remote()), 10 + 60, "the dead driver's replica to go")
    assert read_manifest(run_dir).status in ("running", "cancelled")  # never "completed" by a dead driver

    # 4. resumed again, to the end, keeping the pool: every sample exactly once; the job SUCCEEDED
    job3, sub = _submit(dashboard, workdir, "run", "--resume", str(run_dir), "--keep-pool", wait=True)
    assert "succeeded" in sub.lower(), sub[-3000:]
    keys = [tuple(json.loads(x)[k] for k in ("model", "benchmark", "index"))
            for x in (run_dir / CHECKPOINT).read_text().splitlines() if x.strip()]  # fmt: skip
    assert len(keys) == len(set(keys)) == 2 * N, "a sample was inferred twice or lost"
    m = read_manifest(run_dir)
    assert m.status == "completed" and sum(s.num_samples for s in m.scores) == 2 * N

    # 5. the kept pool: listed with who holds it, released from the CLI
    listing = _pool_cli(dashboard, cluster.address, "list")
    assert listing.returncode == 0, listing.stderr[-2000:]
    assert "smollm2-135m" in listing.stdout and "kept: --keep-pool" in listing.stdout, listing.stdout
    released = _pool_cli(dashboard, cluster.address, "release", "--all")
    assert released.returncode == 0 and "1 replica(s) removed" in released.stdout, released.stdout + released.stderr
    assert ray.get(_controller().replicas.remote()) == []
    assert "0 replica(s)" in _pool_cli(dashboard, cluster.address, "list").stdout
