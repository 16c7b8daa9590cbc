"""``VerifierWorker``: a Ray actor on a CPU node that owns one judge ``llama-server --parallel N`` process.

The actor pins itself (every thread) to the CPUs of one NUMA node before it starts llama-server, so the server
inherits the mask: its threads and memory stay on that node. Thread count is the worker's share of the cgroup CPU
quota (see ``_cpu``). Topology is read on the worker's own host, not the driver's, so workers on other Ray nodes
pin correctly. The judge engine is built by ``serving.build_engine``, as a pool replica's is: the llama-server
process is owned by ``serving.LlamaCppEngine`` (an endpoint judge is reached through ``serving.OpenAIEngine``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
from typing import Any

import ray
from pydantic import BaseModel, ConfigDict, Field

from omnieval.core import GenerationOptions, ModelSource

log = logging.getLogger("omnieval.verifier")


class WorkerSpec(BaseModel):
    """What one worker needs, shipped by value (the object itself: Ray pickles it, validated once where made)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    worker_index: int = Field(ge=0)
    """Position among the run's workers; selects the NUMA node (index mod nodes)."""
    num_workers: int = Field(default=1, ge=1)
    """Workers sharing the host's CPU quota."""
    source: ModelSource
    """Judge model source: local weights run on llama-server, an endpoint is called as it is."""
    threads: int | None = None
    """llama.cpp threads; None = this worker's share of the quota."""
    parallel: int = Field(default=4, ge=1)
    """llama-server slots (continuous batching)."""
    ctx_per_slot: int = Field(default=4096, ge=256)
    """Context tokens per slot (prompt + rationale)."""
    request_timeout_s: float = 300.0
    """Per-request timeout once a slot is free."""
    startup_timeout_s: float = 300.0
    """Time allowed for llama-server to load the model."""
    pin: bool = True
    """Pin to the NUMA node (off only for tests that run several workers on one node)."""
    nice: int = Field(default=0, ge=0, le=19)
    """Niceness of the judge's llama-server."""
    lora: str | None = None
    """LoRA adapter GGUF applied by llama-server (``--lora``)."""
    grammar: str | None = None
    """GBNF every reply must match (None = free text)."""
    top_logprobs: int | None = None
    """Token alternatives to request, for the verdict probability (None = none)."""


def pin_process(cpus: list[int]) -> bool:
    """Set the affinity of every thread of this process (``sched_setaffinity(0)`` alone pins only the caller)."""
    mask = set(cpus)
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = [0]
    try:
        for tid in tids:
            try:
                os.sched_setaffinity(tid, mask)
            except ProcessLookupError:  # the thread exited meanwhile
                pass
    except (OSError, AttributeError) as e:  # no affinity API, or CPUs outside our cpuset
        log.warning("could not pin verifier worker to CPUs %s: %r", cpus, e)
        return False
    return True


@ray.remote(num_cpus=1)
class VerifierWorker:
    """Lifecycle: ``start`` -> many ``generate`` batches -> ``shutdown`` (terminates llama-server)."""

    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        self.engine: Any = None
        self.info: dict[str, Any] = {}
        self._sem: asyncio.Semaphore | None = None

    async def start(self) -> dict[str, Any]:
        from omnieval.verifier._cpu import plan_workers
        from serving import build_engine

        s = self.spec
        slots = plan_workers(s.num_workers, threads=s.threads)
        slot = slots[s.worker_index % len(slots)]
        pinned = pin_process(slot.cpus) if s.pin else False
        kwargs: dict[str, Any] = {"slots": s.parallel, "timeout_s": s.request_timeout_s}
        engine = "openai"
        if s.source.kind != "endpoint":
            engine, kwargs = "llamacpp", {"parallel": s.parallel, "ctx_per_slot": s.ctx_per_slot,
                                          "threads": slot.threads, "timeout_s": s.request_timeout_s,
                                          "startup_timeout_s": s.startup_timeout_s, "nice": s.nice,
                                          "extra_args": ["--lora", s.lora] if s.lora else []}  # fmt: skip
        self.engine, path = await asyncio.to_thread(  # resolving the source may fetch the weights
            build_engine, engine, replica_id=f"verifier-{s.worker_index}", model="verifier", source=s.source,
            engine_kwargs=kwargs,
        )  # fmt: skip
        await self.engine.start()
        self._sem = asyncio.Semaphore(s.parallel)  # more would queue inside llama-server and eat request timeouts
        self.info = {
            "worker": s.worker_index, "host": socket.gethostname(), "numa_node": slot.numa_node,
            "cpus": slot.cpus if pinned else None, "threads": slot.threads, "parallel": s.parallel,
            "model_path": str(path) if path else None, "pid": getattr(self.engine, "pid", None),
            "engine_version": self.engine.version(), "lora": s.lora, "constrained": s.grammar is not None, "nice": s.nice,
        }  # fmt: skip
        log.info("verifier worker %s", self.info)
        return self.info

    async def _one(
        self, i: int, prompt: str, options: GenerationOptions
    ) -> tuple[str | None, float | None, str | None]:
        from omnieval.verifier._parse import verdict_probability
        from serving import GenerationRequest

        assert self._sem is not None, "start() first"
        req = GenerationRequest(
            request_id=f"verifier/{self.spec.worker_index}/{i}",
            messages=[{"role": "user", "content": prompt}],
            options=options,
            grammar=self.spec.grammar,
            top_logprobs=self.spec.top_logprobs,
        )
        async with self._sem:
            try:
                res = await self.engine.generate(req)
            except Exception as e:  # noqa: BLE001 - a failed request is one failed attempt for this prompt
                return None, None, f"{type(e).__name__}: {e}"[:500]
        return res.text, verdict_probability(res.logprobs), None

    async def generate(
        self, prompts: list[str], options: dict[str, Any]
    ) -> list[tuple[str | None, float | None, str | None]]:
        """(raw text, P(correct) or None, None) or (None, None, error) per prompt, in order."""
        opts = GenerationOptions.model_validate(options)
        return list(await asyncio.gather(*(self._one(i, p, opts) for i, p in enumerate(prompts))))

    def describe(self) -> dict[str, Any]:
        return {**self.info, "affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None}

    async def shutdown(self) -> None:
        """Stop llama-server first: closing the HTTP client first would wait for in-flight generations."""
        if self.engine is None:
            return
        pid = getattr(self.engine, "pid", None)
        if pid:
            await _stop(pid)
        await self.engine.shutdown()  # reaps the process and closes the client
        self.engine = None


async def _stop(pid: int, grace_s: float = 5.0) -> None:
    """SIGTERM, then SIGKILL if llama-server still runs after ``grace_s`` (it can hang in "cleaning up before exit"
    while slots are busy)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        for _ in range(int(grace_s * 10)):
            if not _alive(pid):
                return
            await asyncio.sleep(0.1)  # waiting on another process's exit: no event to await


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")", 1)[1].split()[0] != "Z"  # a zombie is dead (reaped by engine.shutdown)
    except OSError:
        return True
