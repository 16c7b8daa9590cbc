"""omnieval: one job evaluates a model across benchmarks and frameworks on a federated Ray inference pool."""

from __future__ import annotations

from omnieval._artifacts import RunManifest, ScoreRow, read_manifest, read_records
from omnieval._config import ConfigError, ModelConfig, SuiteConfig, load_suite
from omnieval._schema import (
    AudioContent,
    GenerationOptions,
    ImageContent,
    Message,
    Output,
    Record,
    RecordError,
    TextContent,
    TextOutput,
    VideoContent,
)

__version__ = "0.1.0"


def run_suite(*args, **kwargs):  # type: ignore[no-untyped-def]
    """Lazy wrapper of ``omnieval._runner.run_suite`` (keeps ``import omnieval`` free of Ray start-up cost)."""
    from omnieval._runner import run_suite as _run

    return _run(*args, **kwargs)


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
