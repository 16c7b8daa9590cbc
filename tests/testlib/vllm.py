"""A real vLLM OpenAI API server started by a test, outside the pool: the server that lm-eval's own
``local-completions`` client and omnieval's pool (as an external endpoint) both score against."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from serving import free_port
from testlib.llama import wait_healthy


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
        wait_healthy(proc, f"http://127.0.0.1:{port}/health", log_path, 600.0, "vLLM")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        log.close()
