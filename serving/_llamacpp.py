"""llama.cpp backend: the replica owns a ``llama-server --parallel N`` process (real continuous batching on CPU)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

import httpx

from omnieval.errors import OmnievalUserError, ReplicaDead
from serving._llamacpp_bin import find_llama_server
from serving._openai import OpenAIEngine
from serving._types import GenerationRequest, GenerationResult

_DEFAULTS: dict[str, Any] = {
    "parallel": 4,
    "ctx_per_slot": 2048,
    "threads": None,
    "batch_size": 512,
    "flash_attn": "off",
    "startup_timeout_s": 180.0,
    "timeout_s": 300.0,
    "extra_args": [],
}


def _die_with_parent() -> None:
    """Linux: the server gets SIGTERM when the replica process dies, so a killed actor leaves no orphan engine.

    Ray starts workers at niceness 15; the engine is the workload, so it asks for normal priority where allowed.
    """
    try:
        os.setpriority(os.PRIO_PROCESS, 0, 0)
    except OSError:
        pass
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaCppEngine(OpenAIEngine):
    """``--parallel`` slots share one KV cache of ``parallel × ctx_per_slot`` tokens; requests beyond the slots
    queue inside llama-server, which is why the pool caps in-flight per replica at the slot count.

    ``flash_attn`` defaults to off: the CPU flash-attention kernel's chunked softmax depends on how much KV a slot
    holds, so greedy outputs changed with what continuous batching and the prompt cache did; with it off (and the
    det2/det3 build) two runs of the quickstart gave identical predictions."""

    name: ClassVar[str] = "llamacpp"

    def __init__(self, *, replica_id: str, model: str, model_path: str, **kwargs: Any) -> None:
        unknown = set(kwargs) - set(_DEFAULTS)
        if unknown:
            raise OmnievalUserError(f"engine 'llamacpp': unknown engine_kwargs {sorted(unknown)}; allowed: {sorted(_DEFAULTS)}")
        opts = {**_DEFAULTS, **kwargs}
        super().__init__(
            replica_id=replica_id,
            model=model,
            base_url="http://127.0.0.1:0/v1",
            slots=int(opts["parallel"]),
            timeout_s=float(opts["timeout_s"]),
        )
        self.model_path = Path(model_path)
        self.opts = opts
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_path: Path | None = None
        self._version: str | None = None

    def version(self) -> str | None:
        return self._version

    def _threads(self) -> int:
        if self.opts["threads"]:
            return int(self.opts["threads"])
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:
            return max(1, os.cpu_count() or 1)

    async def start(self) -> None:
        binary = find_llama_server()
        if not self.model_path.is_file():
            raise OmnievalUserError(f"llama.cpp model file not found: {self.model_path}")
        try:
            out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
            reported = next((ln.strip() for ln in (out.stdout + out.stderr).splitlines() if "version" in ln), "unknown")
        except (OSError, subprocess.SubprocessError):
            reported = "unknown"
        # build flags change numerics but not --version: the cache dir name (<version>-<arch>-<tag>) says which build
        self._version = f"{reported} [{binary.parent.name}]"
        port = free_port()
        self.base_url = f"http://127.0.0.1:{port}/v1"
        n = int(self.opts["parallel"])
        cmd = [
            str(binary), "-m", str(self.model_path), "--host", "127.0.0.1", "--port", str(port),
            "-t", str(self._threads()), "-c", str(n * int(self.opts["ctx_per_slot"])), "--parallel", str(n),
            "-b", str(self.opts["batch_size"]), "-fa", str(self.opts["flash_attn"]), "--no-webui",
            *map(str, self.opts["extra_args"]),
        ]  # fmt: skip
        fd, log = tempfile.mkstemp(prefix=f"llama-server-{self._stats.replica_id}-", suffix=".log")
        self._log_path = Path(log)
        self._proc = subprocess.Popen(
            cmd, stdout=fd, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent
        )
        os.close(fd)
        await self._wait_ready(float(self.opts["startup_timeout_s"]))
        await super().start()

    async def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        async with httpx.AsyncClient(timeout=2.0) as client:
            while time.monotonic() < deadline:
                assert self._proc is not None
                if self._proc.poll() is not None:
                    raise ReplicaDead(f"llama-server exited with {self._proc.returncode} at start: {self.log_tail()}")
                try:
                    r = await client.get(self.base_url.removesuffix("/v1") + "/health")
                    if r.status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.2)  # waiting on an external process's port: no event to await
        raise ReplicaDead(f"llama-server not ready after {timeout_s}s: {self.log_tail()}")

    def log_tail(self, n: int = 5) -> str:
        if self._log_path is None or not self._log_path.exists():
            return ""
        return " | ".join(self._log_path.read_text(errors="replace").strip().splitlines()[-n:])

    async def check_health(self) -> bool:
        if self._proc is None or self._proc.poll() is not None:
            return False
        return await super().check_health()

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        if self._proc is not None and self._proc.poll() is not None:
            raise ReplicaDead(f"llama-server exited with {self._proc.returncode}", replica_id=self._stats.replica_id)
        return await super().generate(request)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    async def shutdown(self) -> None:
        await super().shutdown()
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None
