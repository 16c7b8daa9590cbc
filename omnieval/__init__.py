"""omnieval: one job evaluates a model across benchmarks and frameworks on a federated Ray inference pool.

The names below load on first use, so ``import omnieval.core`` (what ``serving``, ``pool``, ``cluster`` and
``schedulers`` use) never pulls in the application layer above them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "RunManifest": "omnieval._artifacts",
    "ScoreRow": "omnieval._artifacts",
    "read_manifest": "omnieval._artifacts",
    "read_records": "omnieval._artifacts",
    "load_suite": "omnieval._suite",
    "run_suite": "omnieval._runner",
    **{
        name: "omnieval.core"
        for name in (
            "AudioContent", "ConfigError", "GenerationOptions", "ImageContent", "Message", "ModelConfig", "Output",
            "Record", "RecordError", "SuiteConfig", "TextContent", "TextOutput", "VideoContent",
        )
    },
}  # fmt: skip

if TYPE_CHECKING:
    from omnieval._artifacts import RunManifest, ScoreRow, read_manifest, read_records
    from omnieval._runner import run_suite
    from omnieval._suite import load_suite
    from omnieval.core import (
        AudioContent,
        ConfigError,
        GenerationOptions,
        ImageContent,
        Message,
        ModelConfig,
        Output,
        Record,
        RecordError,
        SuiteConfig,
        TextContent,
        TextOutput,
        VideoContent,
    )


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'omnieval' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "AudioContent",
    "ConfigError",
    "GenerationOptions",
    "ImageContent",
    "Message",
    "ModelConfig",
    "Output",
    "Record",
    "RecordError",
    "RunManifest",
    "ScoreRow",
    "SuiteConfig",
    "TextContent",
    "TextOutput",
    "VideoContent",
    "load_suite",
    "read_manifest",
    "read_records",
    "run_suite",
]
