"""Engine backends and the Ray Serve deployment that hosts them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omnieval._registry import Registry
from serving._engine import Engine
from serving._features import EngineFeatures, declared
from serving._llamacpp_bin import LLAMACPP_VERSION, build_llama_server, find_llama_server
from serving._managed import ray_node_ip
from serving._models import cache_dir, file_sha256, resolve_model
from serving._types import Endpoint, EngineStats, GenerationRequest, GenerationResult

ENGINES: Registry[type[Engine]] = Registry("engine")
ENGINES.register("llamacpp", "serving._llamacpp:LlamaCppEngine")
ENGINES.register("openai", "serving._openai:OpenAIEngine")
ENGINES.register("simulated", "serving._simulated:SimulatedEngine")  # SIMULATED: bench/scale studies only
ENGINES.register("instant", "serving._instant:InstantEngine")  # INSTANT (no model): line-rate benchmarks only
ENGINES.register("vllm", "serving._vllm:VLLMEngine")
ENGINES.register("transformers", "serving._transformers:TransformersEngine")
ENGINES.register("sglang", "serving._sglang:SGLangEngine")
ENGINES.register("whisper", "serving._whisper:FasterWhisperEngine")


def engine_features(
    engine: str, model_path: Path | None, kwargs: dict[str, Any], *, modalities: list[str] | None = None,
    video_input: str | None = None,
) -> EngineFeatures:  # fmt: skip
    """What a model accepts: the user's ``modalities`` if given, else what ``engine`` declares for ``model_path``."""
    if modalities is not None:
        return declared(modalities, video_input)
    return ENGINES.get(engine).features(model_path, kwargs)


__all__ = [
    "ENGINES",
    "LLAMACPP_VERSION",
    "Endpoint",
    "Engine",
    "EngineFeatures",
    "EngineStats",
    "GenerationRequest",
    "GenerationResult",
    "build_llama_server",
    "cache_dir",
    "engine_features",
    "file_sha256",
    "find_llama_server",
    "ray_node_ip",
    "resolve_model",
]
