"""Shared bench helpers: a directly managed llama-server, statistics, machine context, JSON/PNG output.

Benchmarks on a shared machine are noisy, so every result carries the load average before/after and the commands
report medians of side-by-side repeats rather than single timings.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import statistics
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

DEFAULT_OUT = Path("bench-results")


def cpu_count() -> int:
    from serving import usable_cores

    return usable_cores()


ISA_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8", "asimd", "sve")
"""CPU features the CPU engines' kernels dispatch on (vLLM-CPU and llama.cpp pick AVX-512 / AMX paths where they
exist): two machines that differ here run the same model at different rates."""


def cpu_identity() -> dict[str, Any]:
    """The CPU's model name and the kernel-relevant ISA flags it has (``/proc/cpuinfo``; the platform's processor
    string elsewhere)."""
    from serving import cpu_flags, cpu_info

    info, flags = cpu_info(), cpu_flags()
    model = info.get("model name") or info.get("Model") or platform.processor() or platform.machine()
    return {"model": model, "isa": [f for f in ISA_FLAGS if f in flags]}


def same_cpu(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Same model name and the same kernel-relevant ISA flags."""
    if not a or not b:
        return False
    return a.get("model") == b.get("model") and sorted(a.get("isa") or []) == sorted(b.get("isa") or [])


def machine_context() -> dict[str, Any]:
    """What a reader needs to judge the numbers: CPUs (and which CPU: kernels differ by ISA), load, versions, time."""
    ctx: dict[str, Any] = {
        "utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "cpus": cpu_count(),
        "cpu": cpu_identity(),
        "python": platform.python_version(),
        "argv": ["omnieval", "bench", *sys.argv[2:]] if sys.argv[1:2] == ["bench"] else sys.argv,
    }
    try:
        ctx["loadavg"] = list(os.getloadavg())
    except OSError:
        pass
    return ctx


def pct(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); 0.0 for no values."""
    if not values:
        return 0.0
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(q / 100 * len(s) + 0.5)) - 1))
    return float(s[k])


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


class LlamaServer:
    """A llama-server subprocess owned by the bench (not by the pool): the direct, orchestration-free reference. It
    runs the ``llamacpp`` engine's own command line (``LlamaCppEngine.command``), so it measures what a replica runs."""

    def __init__(self, model_path: str | Path, *, threads: int, parallel: int, ctx_per_slot: int = 2048,
                 extra_args: Sequence[str] = ()) -> None:  # fmt: skip
        from serving import LlamaCppEngine, ManagedServer

        cmd = LlamaCppEngine.command(model_path, threads=threads, parallel=parallel, ctx_per_slot=ctx_per_slot,
                                     extra_args=list(extra_args))  # fmt: skip
        self.server = ManagedServer("omnieval-bench-llama", cmd, bind_all=False)

    @property
    def base_url(self) -> str:
        return self.server.local_url

    def start(self, timeout_s: float = 180.0) -> LlamaServer:
        import asyncio

        self.server.launch()
        try:
            asyncio.run(self.server.wait_ready(timeout_s))
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        self.server.stop()

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def no_cache(suite: Any) -> Any:
    """The suite with the response cache off: a benchmark must run every request, never replay cached ones."""
    if "cache" not in type(suite).model_fields:
        return suite
    return suite.model_copy(update={"cache": suite.cache.model_copy(update={"enabled": False})})


def default_model_path() -> Path:
    from omnieval._defaults import DEFAULT_MODEL_SOURCE
    from serving import resolve_model

    p = resolve_model(DEFAULT_MODEL_SOURCE)
    assert p is not None
    return p


def write_json(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    return path


def pyplot() -> Any | None:
    """matplotlib.pyplot with the file-only backend, or None (PNG skipped with a message, not an error)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("note: matplotlib is not installed, PNG plot skipped (pip install 'omnieval[plot]')", file=sys.stderr)
        return None
    return plt


def shutdown_ray(started: bool) -> None:
    """Tear down the pool and the local Ray the bench started; a joined cluster is only disconnected from."""
    import ray

    if not ray.is_initialized():
        return
    if not started:
        ray.shutdown()
        return
    try:
        from pool import get_controller

        ctl = get_controller(create=False)
        ray.get(ctl.shutdown.remote(), timeout=60)
    except Exception:  # noqa: BLE001 - no controller (or already gone) is fine at teardown
        pass
    try:
        from ray import serve

        serve.shutdown()
    except Exception:  # noqa: BLE001 - best effort
        pass
    ray.shutdown()
