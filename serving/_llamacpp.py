"""llama.cpp backend: the replica owns a ``llama-server --parallel N`` process (real continuous batching on CPU)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, ClassVar, Literal

import httpx

from omnieval.core import OmnievalUserError
from serving._cpu import usable_cores
from serving._features import EngineFeatures, mmproj_features
from serving._llamacpp_bin import find_llama_server
from serving._managed import ServerEngine
from serving._types import EngineStats

__all__ = ["LlamaCppEngine"]

_DEFAULTS: dict[str, Any] = {
    "parallel": 4,
    "ctx_per_slot": 2048,
    "threads": None,
    "batch_size": 512,
    "flash_attn": "off",
    "startup_timeout_s": 180.0,
    "timeout_s": 300.0,
    "extra_args": [],
    "mmproj": None,  # multimodal projector GGUF (llama.cpp mtmd): images and/or audio, per its clip.has_* keys
    "nice": 0,  # niceness of llama-server: 0 for an engine; the verifier's judge runs at 19 to yield to engines
}


class LlamaCppEngine(ServerEngine):
    """``--parallel`` slots share one KV cache of ``parallel × ctx_per_slot`` tokens; requests beyond the slots
    queue inside llama-server (the pool's adaptive limit keeps that queue short). Client actors talk to the server's
    port directly; the replica owns its lifecycle and health, and reads its load from ``/metrics``.

    ``flash_attn`` defaults to off: the CPU flash-attention kernel's chunked softmax depends on how much KV a slot
    holds, so greedy outputs changed with what continuous batching and the prompt cache did; with it off (and the
    det2/det3 build) two runs of the quickstart gave identical predictions."""

    option_defaults: ClassVar[dict[str, Any]] = _DEFAULTS

    name: ClassVar[str] = "llamacpp"
    cpu_threads_option: ClassVar[str | None] = "threads"
    score_dialect: ClassVar[Literal["vllm", "llamacpp", "sglang"] | None] = "llamacpp"

    @classmethod
    def features(cls, model_path: Path | None, kwargs: dict[str, Any]) -> EngineFeatures:
        """Text, plus what the ``mmproj`` projector encodes (llama.cpp's mtmd: images and/or audio)."""
        return mmproj_features(kwargs.get("mmproj"))

    @classmethod
    def options(cls, kwargs: dict[str, Any]) -> dict[str, Any]:
        """``engine_kwargs`` over the defaults; an unknown key is the user's error."""
        unknown = set(kwargs) - set(_DEFAULTS)
        if unknown:
            raise OmnievalUserError(
                f"engine 'llamacpp': unknown engine_kwargs {sorted(unknown)}; allowed: {sorted(_DEFAULTS)}"
            )
        return {**_DEFAULTS, **kwargs}

    @classmethod
    def command(cls, model_path: str | Path, binary: str | Path | None = None, **kwargs: Any) -> list[str]:
        """llama-server's argv as this engine runs it for ``engine_kwargs`` (``{host}``/``{port}`` placeholders, for
        ``ManagedServer``): the one command line, which the benchmarks' direct reference server runs too."""
        opts = cls.options(kwargs)
        n = int(opts["parallel"])
        threads = int(opts["threads"]) if opts["threads"] else usable_cores()
        return [
            str(binary or find_llama_server()), "-m", str(model_path), "--host", "{host}", "--port", "{port}",
            "-t", str(threads), "-c", str(n * int(opts["ctx_per_slot"])), "--parallel", str(n),
            "-b", str(opts["batch_size"]), "-fa", str(opts["flash_attn"]), "--no-webui", "--metrics",
            *(["--mmproj", str(Path(opts["mmproj"]).expanduser())] if opts["mmproj"] else []),
            *map(str, opts["extra_args"]),
        ]  # fmt: skip

    def __init__(self, *, replica_id: str, model: str, model_path: str, **kwargs: Any) -> None:
        opts = self.options(kwargs)
        super().__init__(
            replica_id=replica_id, model=model, slots=int(opts["parallel"]), timeout_s=float(opts["timeout_s"])
        )
        self.model_path = Path(model_path)
        self.opts = opts
        self.startup_timeout_s = float(opts["startup_timeout_s"])
        self._binary: Path | None = None
        self._version: str | None = None

    def version(self) -> str | None:
        return self._version

    async def prepare(self) -> None:
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
        self._binary = binary

    async def start(self) -> None:
        await super().start()
        self._stats.prefix_token_id = await self._prefix_token()

    async def _prefix_token(self) -> int | None:
        """BOS (else EOS) as llama-server names it in ``/props``, as an id from its own ``/tokenize``."""
        assert self._client is not None
        root = self.base_url.removesuffix("/v1")
        try:
            props = (await self._client.get(root + "/props", timeout=10.0)).json()
            for name in ("bos_token", "eos_token"):
                if props.get(name):
                    r = await self._client.post(root + "/tokenize", json={"content": props[name], "add_special": False},
                                                timeout=10.0)  # fmt: skip
                    toks = r.json().get("tokens") or []
                    if len(toks) == 1:
                        return int(toks[0])
        except (httpx.HTTPError, OSError, ValueError):
            return None
        return None

    def server_command(self) -> list[str]:
        assert self._binary is not None
        return self.command(self.model_path, self._binary, **self.opts)

    def server_nice(self) -> int:
        return int(self.opts["nice"])

    async def poll_stats(self) -> EngineStats:
        """Requests in flight and tokens generated as llama-server itself counts them (``/metrics``): clients send
        to its port directly, so the replica process no longer sees each request."""
        s = self.stats()
        m = await self.server_metrics()
        if m:
            processing = int(m.get("llamacpp:requests_processing", 0))
            deferred = int(m.get("llamacpp:requests_deferred", 0))
            s.in_flight = max(s.in_flight, processing + deferred)
            s.queue_depth = max(s.queue_depth, deferred)
            s.output_tokens = max(s.output_tokens, int(m.get("llamacpp:tokens_predicted_total", 0)))
            s.prompt_tokens = max(s.prompt_tokens, int(m.get("llamacpp:prompt_tokens_total", 0)))
            if "llamacpp:kv_cache_usage_ratio" in m:
                s.kv_usage = float(m["llamacpp:kv_cache_usage_ratio"])
        return s
