"""A real llama-server started by a test, outside the pool: the server that lm-eval's own clients and omnieval's pool
(as an external endpoint) are both pointed at when their results must agree."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from serving import free_port
from testlib.engine import require_llama_server


def wait_healthy(proc: subprocess.Popen[bytes], url: str, log_path: Path, timeout_s: float, what: str) -> None:
    """Until ``url`` answers 200; a process that exits first fails with its log's tail."""
    deadline = time.monotonic() + timeout_s
    while True:  # readiness is only observable by asking; bounded by the deadline
        assert proc.poll() is None, log_path.read_text()[-3000:]
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"{what} not ready in {timeout_s:g} s"
        time.sleep(0.2)


@contextmanager
def llama_server(model: Path, log_dir: Path, *, parallel: int = 2, ctx: int = 4096, threads: int = 2,
                 extra: tuple[str, ...] = ()) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:  # fmt: skip
    """``(base_url ending in /v1, process)`` of a llama-server on loopback, ready to answer; stopped on exit."""
    binary = require_llama_server()
    port = free_port()
    log_path = log_dir / f"llama-server-{port}.log"
    log = open(log_path, "wb")
    cmd = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-t", str(threads),
           "-c", str(ctx), "--parallel", str(parallel), "--no-webui", *extra]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_healthy(proc, f"http://127.0.0.1:{port}/health", log_path, 60.0, "llama-server")
        yield f"http://127.0.0.1:{port}/v1", proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=10)
        log.close()
