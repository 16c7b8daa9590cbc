"""SGLang backend (CUDA only): an in-process ``sglang.Engine`` inside the Serve replica, via ``async_generate``.

SGLang ships no CPU build on PyPI (0.5.x needs CUDA torch, flashinfer and CUDA kernels), so it is imported only in
``start`` and its tests skip without it. A GGUF source is converted to safetensors like for vLLM.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, ClassVar

from omnieval.errors import MissingDependencyError, OmnievalUserError, ReplicaDead, RequestFailed
from serving._engine import Engine, engine_kwargs_error
from serving._text import chat_token_ids
from serving._types import GenerationRequest, GenerationResult

SGLANG_PIP = "pip install 'omnieval[sglang]'"

# sglang ServerArgs fields accepted directly; others go in ``server_args`` (checked against the installed sglang).
SERVER_ARGS: dict[str, Any] = {
    "tp_size": None,
    "dp_size": None,
    "mem_fraction_static": None,
    "context_length": None,
    "dtype": None,
    "max_running_requests": None,
    "chunked_prefill_size": None,
    "trust_remote_code": None,
    "quantization": None,
    "attention_backend": None,
    "disable_cuda_graph": None,
    "enable_torch_compile": None,
    "random_seed": None,
    "log_level": None,
}
OWN_OPTIONS: dict[str, Any] = {"server_args": {}, "convert_dtype": "bfloat16"}


def split_kwargs(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(ServerArgs fields, own options); an unknown key is a user error listing the allowed ones."""
    allowed = set(SERVER_ARGS) | set(OWN_OPTIONS)
    unknown = set(kwargs) - allowed
    if unknown:
        raise OmnievalUserError(
            engine_kwargs_error("sglang", unknown, allowed) + "; other ServerArgs fields go in server_args: {...}"
        )
    extra = kwargs.get("server_args") or {}
    if not isinstance(extra, dict):
        raise OmnievalUserError("engine 'sglang': server_args must be a mapping of sglang ServerArgs fields")
    args = {k: v for k, v in kwargs.items() if k in SERVER_ARGS and v is not None} | dict(extra)
    own = {**OWN_OPTIONS, **{k: v for k, v in kwargs.items() if k in OWN_OPTIONS}}
    return args, own


def finish_reason(meta: dict[str, Any]) -> str | None:
    """SGLang reports ``{"type": "stop"|"length"|"abort", ...}``; map to the OpenAI strings."""
    fr = meta.get("finish_reason")
    if isinstance(fr, dict):
        fr = fr.get("type")
    return None if fr is None else str(fr)


class SGLangEngine(Engine):
    """SGLang's scheduler batches everything in flight (continuous batching with RadixAttention prefix reuse)."""

    name: ClassVar[str] = "sglang"

    def __init__(self, *, replica_id: str, model: str, model_path: str, **kwargs: Any) -> None:
        super().__init__(replica_id=replica_id, model=model)
        self.args, self.own = split_kwargs(kwargs)
        self.model_path = model_path
        self.slots = int(self.args.get("max_running_requests") or 256)
        self._engine: Any = None
        self._tok: Any = None
        self._dead = False
        self._version: str | None = None

    def version(self) -> str | None:
        return self._version

    async def start(self) -> None:
        try:
            import sglang
            import torch
        except ImportError:
            raise MissingDependencyError("the sglang engine", SGLANG_PIP) from None
        if not torch.cuda.is_available():
            raise OmnievalUserError("engine 'sglang' needs a CUDA GPU; give the model resources.num_gpus >= 1")
        from serving._convert import resolve_checkpoint

        self._version = f"sglang {sglang.__version__}"
        path = await asyncio.to_thread(resolve_checkpoint, self.model_path, name=self._stats.model,
                                       dtype=self.own["convert_dtype"])  # fmt: skip
        try:
            from sglang.srt.server_args import ServerArgs

            fields = set(getattr(ServerArgs, "__dataclass_fields__", {}))
        except ImportError:
            fields = set()
        bad = set(self.args) - fields if fields else set()
        if bad:
            raise OmnievalUserError(f"engine 'sglang': this sglang's ServerArgs has no field(s) {sorted(bad)}")
        # Built on the replica's event loop thread (blocking, like vLLM's start): sglang binds to the current loop.
        self._engine = sglang.Engine(model_path=path, **self.args)
        self._tok = getattr(getattr(self._engine, "tokenizer_manager", None), "tokenizer", None)
        if self._tok is None:
            from transformers import AutoTokenizer

            self._tok = AutoTokenizer.from_pretrained(path)

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        if self._engine is None or self._dead:
            raise ReplicaDead("sglang engine is not running", replica_id=self._stats.replica_id)
        o = request.options
        params: dict[str, Any] = {"temperature": o.temperature, "top_p": o.top_p, "max_new_tokens": o.max_tokens}
        if o.stop:
            params["stop"] = list(o.stop)
        t0 = time.monotonic()
        with self._track():
            ids = chat_token_ids(self._tok, request.messages, self.name)
            try:
                out = await self._engine.async_generate(input_ids=ids, sampling_params=params)
            except (ConnectionError, EOFError, BrokenPipeError) as e:  # its scheduler subprocess is gone
                self._dead = True
                raise ReplicaDead(f"sglang engine died: {e!r}", replica_id=self._stats.replica_id) from None
            except Exception as e:  # noqa: BLE001 - a per-request failure
                raise RequestFailed(f"sglang generate failed: {e!r}", replica_id=self._stats.replica_id) from None
            meta = out.get("meta_info") or {}
            result = GenerationResult(
                request_id=request.request_id,
                text=str(out.get("text") or ""),
                finish_reason=finish_reason(meta),
                prompt_tokens=int(meta.get("prompt_tokens") or len(ids)),
                completion_tokens=int(meta.get("completion_tokens") or 0),
                engine_latency_s=time.monotonic() - t0,
            )
        return self._account(result)

    async def check_health(self) -> bool:
        return self._engine is not None and not self._dead

    async def shutdown(self) -> None:
        if self._engine is not None:
            try:
                await asyncio.to_thread(self._engine.shutdown)
            finally:
                self._engine = None
