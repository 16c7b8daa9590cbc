"""The registries whose names a suite config may choose: engines, routing policies, evaluation frameworks.

They live in the kernel so the config can validate a choice against the registry itself (did-you-mean, and the JSON
Schema's ``enum`` read from it) without importing the packages that implement the entries: targets stay lazy
``"module:object"`` strings, imported only by the package that uses them (``serving``, ``schedulers``,
``omnieval.adapters`` re-export these objects). A plugin registered at runtime is accepted by the next validation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

from omnieval.core._registry import Registry

ENGINES: Registry[Any] = Registry(
    "engine",
    {
        "llamacpp": "serving._llamacpp:LlamaCppEngine",
        "vllm": "serving._vllm:VLLMEngine",
        "sglang": "serving._sglang:SGLangEngine",
        "transformers": "serving._transformers:TransformersEngine",
        "whisper": "serving._whisper:FasterWhisperEngine",
        "openai": "serving._openai:OpenAIEngine",  # an OpenAI-compatible server someone else runs
        "simulated": "serving._simulated:SimulatedEngine",  # SIMULATED: scale studies only (omnieval bench)
        "instant": "serving._instant:InstantEngine",  # INSTANT (no model): line-rate benchmarks only
    },
)
"""Engine name → ``serving.Engine`` subclass."""

ROUTING_POLICIES: Registry[Any] = Registry(
    "routing policy",
    {
        "p2c": "schedulers._p2c:PowerOfTwoChoices",
        "round_robin": "schedulers._round_robin:RoundRobin",
        "least_loaded": "schedulers._least_loaded:LeastLoaded",
        "prefix_aware": "schedulers._prefix_aware:PrefixAware",
    },
)
"""Policy name → ``schedulers.RoutingPolicy`` subclass."""

FRAMEWORKS: Registry[Any] = Registry(
    "evaluation framework",
    {
        "lmeval": "omnieval.adapters._lmeval:LMEvalAdapter",
        "lmms": "omnieval.adapters._lmms:LMMSEvalAdapter",
        "vlmeval": "omnieval.adapters._vlmeval:VLMEvalAdapter",
    },
)
"""Framework name → ``omnieval.adapters.FrameworkAdapter`` subclass (``builtin`` is omnieval's own benchmarks)."""


@dataclass(frozen=True)
class InRegistry:
    """``Annotated[str, InRegistry(ENGINES)]``: a config field naming an entry of a registry (or one of ``also``),
    validated against the registry when the config is built and listed as the JSON Schema's ``enum``."""

    registry: Registry[Any]
    also: tuple[str, ...] = ()

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        out = handler(schema)
        out["enum"] = [*self.also, *self.registry.names()]
        return out

    def _check(self, value: str) -> str:
        if value in self.also or value in self.registry:
            return value
        raise ValueError(self.registry.unknown_message(value))
