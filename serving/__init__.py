"""Engine backends and the Ray Serve deployment that hosts them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omnieval.core import ENGINES as _ENGINES
from omnieval.core import Registry
from serving._convert import gguf_to_hf
from serving._cpu import node_cpu_s, usable_cores
from serving._engine import Engine
from serving._factory import build_engine
from serving._features import EngineFeatures, declared
from serving._host import EngineHost
from serving._isa import cpu_flags, cpu_info, native_bf16
from serving._llamacpp import LlamaCppEngine
from serving._llamacpp_bin import LLAMACPP_VERSION, build_llama_server, find_llama_server
from serving._managed import ManagedServer, ServerEngine, free_port, ray_node_ip
from serving._messages import prompt_text, to_openai
from serving._models import resolve_model
from serving._openai import OpenAIEngine, chat_payload, parse_chat_completion, parse_completion, request_route
from serving._prestart import PrestartSet
from serving._prestart import offered as prestart_offered
from serving._prestart import supported as prestart_supported
from serving._process_engine import own_process, process_answer
from serving._scoring import ScoringDialect, parse_scores, parse_tokens, root_url, score_bodies, tokenize_body
from serving._simulated import DEFAULT_PROFILE, SIMULATED_TEXT, EngineProfile, PrefixCache, block_hashes
from serving._types import (
    ChoiceLogprob,
    Endpoint,
    EngineSpec,
    EngineStats,
    GenerationRequest,
    GenerationResult,
    ScoreRequest,
    ScoreResult,
    TokenizeRequest,
    TokenizeResult,
    TokenLogprob,
)

ENGINES: Registry[type[Engine]] = _ENGINES  # the kernel holds the table, so a suite config can validate names


def engine_features(
    engine: str, model_path: Path | None, kwargs: dict[str, Any], *, modalities: Sequence[str] | None = None,
    video_input: str | None = None,
) -> EngineFeatures:  # fmt: skip
    """What a model accepts: the user's ``modalities`` if given, else what ``engine`` declares for ``model_path``."""
    if modalities is not None:
        return declared(modalities, video_input)
    return ENGINES.get(engine).features(model_path, kwargs)


def __getattr__(name: str) -> Any:
    """``EngineReplica`` (the Serve deployment) loads Ray Serve; only a caller that deploys pays for it."""
    if name == "EngineReplica":
        from serving._deployment import EngineReplica

        return EngineReplica
    raise AttributeError(f"module 'serving' has no attribute {name!r}")


__all__ = [
    "ChoiceLogprob",
    "DEFAULT_PROFILE",
    "ENGINES",
    "Endpoint",
    "Engine",
    "EngineFeatures",
    "EngineHost",
    "EngineProfile",
    "EngineReplica",
    "EngineSpec",
    "EngineStats",
    "GenerationRequest",
    "GenerationResult",
    "LLAMACPP_VERSION",
    "LlamaCppEngine",
    "ManagedServer",
    "OpenAIEngine",
    "PrefixCache",
    "PrestartSet",
    "SIMULATED_TEXT",
    "ScoreRequest",
    "ScoreResult",
    "ScoringDialect",
    "ServerEngine",
    "TokenLogprob",
    "TokenizeRequest",
    "TokenizeResult",
    "block_hashes",
    "build_engine",
    "build_llama_server",
    "chat_payload",
    "cpu_flags",
    "cpu_info",
    "engine_features",
    "find_llama_server",
    "free_port",
    "gguf_to_hf",
    "native_bf16",
    "node_cpu_s",
    "usable_cores",
    "parse_chat_completion",
    "parse_completion",
    "parse_scores",
    "parse_tokens",
    "own_process",
    "prestart_offered",
    "process_answer",
    "prestart_supported",
    "prompt_text",
    "ray_node_ip",
    "request_route",
    "resolve_model",
    "root_url",
    "score_bodies",
    "to_openai",
    "tokenize_body",
]
