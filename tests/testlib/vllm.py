"""A real vLLM OpenAI API server started by a test, outside the pool: the server that lm-eval's own
``local-completions`` client and omnieval's pool (as an external endpoint) both score against."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from serving import free_port


@contextmanager
def vllm_server(checkpoint: Path, log_dir: Path, *, served_name: str = "smollm2", max_model_len: int = 2048,
                extra: tuple[str, ...] = ()) -> Iterator[str]:  # fmt: skip
    """Base URL (ending in ``/v1``) of a vLLM server on loopback (eager, CPU defaults), stopped on exit."""
    port = free_port()
    log_path = log_dir / f"vllm-{port}.log"
    log = open(log_path, "wb")
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(checkpoint),
           "--served-model-name", served_name, "--host", "127.0.0.1", "--port", str(port), "--enforce-eager",
           "--max-model-len", str(max_model_len), "--max-num-seqs", "16", *extra]  # fmt: skip
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "2")}
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 600
        while True:  # readiness is only observable by asking; bounded by the deadline
            assert proc.poll() is None, log_path.read_text()[-3000:]
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "vLLM not ready in 600 s"
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        log.close()
