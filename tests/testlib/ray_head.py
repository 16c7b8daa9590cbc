"""A private ``ray start --head`` for end-to-end tests, torn down without touching any other Ray on the machine."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from serving import free_port


def wait_until(pred, timeout_s: float, what: str, interval: float = 0.5) -> None:  # type: ignore[no-untyped-def]
    """Bounded wait on external state (a server port, a file): fails loudly at the deadline."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout_s}s waiting for {what}")


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


@dataclass
class RayHead:
    dashboard: str
    """Job API / dashboard URL."""
    gcs_address: str
    """``host:port`` drivers pass to ``ray.init(address=...)``."""
    env: dict[str, str]
    """Environment a client needs (token auth)."""
    temp_dir: str


@contextmanager
def private_ray_head(num_cpus: int = 2) -> Iterator[RayHead]:
    """``--block`` so stopping it stops only it (``ray stop`` would kill every Ray on the machine)."""
    bindir = os.path.dirname(sys.executable)
    temp_dir = tempfile.mkdtemp(prefix="oe-ray-", dir="/tmp")  # short: Ray's unix socket paths must fit 107 bytes
    dash, port = free_port(), free_port()
    env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32), "RAY_USAGE_STATS_ENABLED": "0"}
    cmd = [os.path.join(bindir, "ray"), "start", "--head", "--block", f"--num-cpus={num_cpus}"]
    cmd += ["--dashboard-host=127.0.0.1", f"--port={port}", f"--dashboard-port={dash}", f"--temp-dir={temp_dir}"]
    cmd += [f"--ray-client-server-port={free_port()}", f"--dashboard-agent-listen-port={free_port()}"]
    cmd += [f"--runtime-env-agent-port={free_port()}", f"--metrics-export-port={free_port()}", "--disable-usage-stats"]
    log = open(Path(temp_dir) / "ray-start.log", "wb")  # noqa: SIM115
    path = bindir + os.pathsep + os.environ.get("PATH", "")
    proc = subprocess.Popen(
        cmd, env={**os.environ, **env, "PATH": path}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    address = f"http://127.0.0.1:{dash}"
    try:

        def up() -> bool:
            assert proc.poll() is None, (Path(temp_dir) / "ray-start.log").read_text()
            try:
                headers = {"Authorization": f"Bearer {env['RAY_AUTH_TOKEN']}"}
                return httpx.get(address + "/api/version", timeout=2, headers=headers).status_code == 200
            except httpx.TransportError:
                return False

        wait_until(up, 180, "the Ray dashboard job API")
        yield RayHead(dashboard=address, gcs_address=f"127.0.0.1:{port}", env=env, temp_dir=temp_dir)
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
