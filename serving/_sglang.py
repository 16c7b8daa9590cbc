"""SGLang backend (CUDA only): the replica runs SGLang's own OpenAI-compatible server (``sglang.launch_server``).

A separate process, not the in-process ``sglang.Engine``: that one registers signal handlers, which fails off the main
thread, i.e. inside a Serve replica (sglang issue 2536); and clients then reach SGLang's server (its chat templates
and multimodal preprocessing) directly. SGLang ships no CPU build on PyPI (0.5.x needs CUDA torch, flashinfer and
CUDA kernels), so it is looked up only in ``start`` and its tests skip without it. A GGUF source is converted to
safetensors like for vLLM.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import sys
from pathlib import Path
from typing import Any, ClassVar, Literal

from omnieval.core import MissingDependencyError, OmnievalUserError
from serving._engine import split_passthrough
from serving._features import EngineFeatures, hf_features
from serving._managed import ServerEngine, cli_flags
from serving._scoring import checkpoint_prefix_token
from serving._source_fields import dataclass_fields
from serving._vllm import has_cuda_device

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
    return split_passthrough("sglang", kwargs, SERVER_ARGS, OWN_OPTIONS, extra_key="server_args", what="ServerArgs")


def server_arg_fields() -> set[str]:
    """The installed SGLang's ``ServerArgs`` fields, from its source (``serving._source_fields``); empty (no check)
    when neither the source nor the import gives them."""
    fields = dataclass_fields("sglang", "srt/server_args.py", "ServerArgs")
    if fields is None:
        try:
            from sglang.srt.server_args import ServerArgs
        except ImportError:
            return set()
        fields = set(getattr(ServerArgs, "__dataclass_fields__", {}))
    return fields


def server_flags(args: dict[str, Any]) -> list[str]:
    """ServerArgs fields as ``sglang.launch_server`` flags (booleans are store-true switches there)."""
    return cli_flags(args, negatable=False)


class SGLangEngine(ServerEngine):
    """SGLang's scheduler batches everything in flight (continuous batching with RadixAttention prefix reuse)."""

    option_defaults: ClassVar[dict[str, Any]] = {**SERVER_ARGS, **OWN_OPTIONS}

    name: ClassVar[str] = "sglang"
    score_dialect: ClassVar[Literal["vllm", "llamacpp", "sglang"] | None] = "sglang"
    tp_kwarg: ClassVar[str | None] = "tp_size"

    @classmethod
    def features(cls, model_path: Path | None, kwargs: dict[str, Any]) -> EngineFeatures:
        """From the checkpoint's config.json, as for vLLM."""
        return hf_features(model_path)

    def __init__(self, *, replica_id: str, model: str, model_path: str, **kwargs: Any) -> None:
        args, own = split_kwargs(kwargs)
        super().__init__(replica_id=replica_id, model=model, slots=int(args.get("max_running_requests") or 256),
                         timeout_s=600.0)  # fmt: skip
        self.args, self.own = args, own
        self.model_path = model_path
        self.startup_timeout_s = 900.0
        self.checkpoint: str | None = None
        self._version: str | None = None

    def version(self) -> str | None:
        return self._version

    async def prepare(self) -> None:
        if importlib.util.find_spec("sglang") is None:
            raise MissingDependencyError("the sglang engine", SGLANG_PIP)
        if not has_cuda_device():
            raise OmnievalUserError("engine 'sglang' needs a CUDA GPU; give the model resources.num_gpus >= 1")
        from serving._convert import resolve_checkpoint

        self._version = f"sglang {importlib.metadata.version('sglang')}"
        self.checkpoint = await asyncio.to_thread(resolve_checkpoint, self.model_path, name=self._stats.model,
                                                  dtype=self.own["convert_dtype"])  # fmt: skip
        fields = server_arg_fields()
        bad = set(self.args) - fields if fields else set()
        if bad:
            raise OmnievalUserError(f"engine 'sglang': this sglang's ServerArgs has no field(s) {sorted(bad)}")

    async def start(self) -> None:
        await super().start()
        assert self.checkpoint is not None
        self._stats.prefix_token_id = checkpoint_prefix_token(self.checkpoint)
        self._stats.tokenizer_dir = self.checkpoint if Path(self.checkpoint).is_dir() else None

    def server_command(self) -> list[str]:
        assert self.checkpoint is not None
        return [sys.executable, "-m", "sglang.launch_server", "--model-path", self.checkpoint,
                "--served-model-name", self.served_model_name, "--host", "{host}", "--port", "{port}",
                *server_flags(self.args)]  # fmt: skip
