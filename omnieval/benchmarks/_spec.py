"""A benchmark definition: data, prompts, postprocessor and metrics, frozen so the manifest can record it."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from omnieval.core import GenerationOptions, Message, Record, TextContent

DATA_DIR = Path(__file__).parent / "data"

Modality = Literal["text", "image", "video", "audio"]

UNIFORM = "Please answer the question in an appropriate format.\n\n"
"""Prefix of every uniform prompt (paper Table 9), built-in or suite-defined."""


class MetricSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    """Registered metric name."""
    settings: dict[str, Any] = Field(default_factory=dict)
    """Metric settings (recorded in the manifest)."""


class BenchmarkSpec(BaseModel):
    """How to turn a data file into Records and how to score them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    """Registry name."""
    version: str
    """Bump when data, prompt or scoring changes."""
    modality: Modality = "text"
    """Input modality."""
    task_type: str
    """Task type; selects shared postprocessors/metrics (mc, math, qa, asr, ...)."""
    framework: str = "builtin"
    """Framework that defines it."""
    data_file: str
    """Data file, relative to the package data dir or absolute."""
    loader: str
    """``module:function`` turning the spec into sample dicts with ``fields``/``label``/``options``/``meta`` (and
    optional ``media`` content entries placed before the prompt text)."""
    prompt_template: str
    """Benchmark-specific (native) prompt over the sample fields (see ``template_format``)."""
    uniform_prompt_template: str
    """Uniform prompt used for cross-framework comparison (paper Table 9)."""
    template_format: Literal["format", "jinja"] = "format"
    """How the templates are written: ``str.format`` (built-ins) or Jinja (suite-defined benchmarks)."""
    system_prompt: str | None = None
    """System message, if any."""
    postprocessor: str = "strip"
    """Registered postprocessor name."""
    metrics: tuple[MetricSpec, ...]
    """Native metrics; the first is the headline metric."""
    generation: dict[str, Any] = Field(default_factory=dict)
    """Generation overrides (e.g. max_tokens)."""
    description: str = ""
    """One line for ``omnieval list``."""
    records_fn: str | None = None
    """``module:function`` building Records itself (multimodal, multi-turn benchmarks) instead of the template path."""
    judge_module: str | None = None
    """Module with ``score_records(records, judge)`` and ``aggregate(records)`` for judge-scored (rubric) benchmarks."""
    options: dict[str, Any] = Field(default_factory=dict)
    """Default keyword options for ``records_fn`` (split, mode, condition, ...)."""
    cluster_by: str | None = None
    """``Record.meta`` key naming the unit samples share (a conversation, an episode, a document): their outcomes are
    correlated, so standard errors are clustered on it rather than treating every sample as independent."""
    sequential_turns: bool = False
    """Turn k of a conversation needs the model's own answers to turns < k (run in waves)."""

    @property
    def data_path(self) -> Path:
        p = Path(self.data_file)
        return p if p.is_absolute() else DATA_DIR / p

    def data_sha256(self) -> str:
        if self.data_path.is_dir():  # multimodal samples: every file, by relative path and content
            from omnieval.core import path_sha256

            return path_sha256(self.data_path)
        return hashlib.sha256(self.data_path.read_bytes()).hexdigest()

    def generation_options(
        self, generation: GenerationOptions, overrides: dict[str, Any] | None = None
    ) -> GenerationOptions:
        """A sample's generation options: the suite's, then this benchmark's own, then the suite's per-benchmark
        ``overrides``."""
        return GenerationOptions.model_validate({**generation.model_dump(), **self.generation, **(overrides or {})})

    def records(
        self,
        *,
        model: str,
        generation: GenerationOptions,
        limit: int | None = None,
        prompt: Literal["native", "uniform"] = "native",
        overrides: dict[str, Any] | None = None,
        options: dict[str, Any] | None = None,
    ) -> list[Record]:
        return list(self.iter_records(model=model, generation=generation, limit=limit, prompt=prompt,
                                      overrides=overrides, options=options))  # fmt: skip

    def iter_records(
        self,
        *,
        model: str,
        generation: GenerationOptions,
        limit: int | None = None,
        prompt: Literal["native", "uniform"] = "native",
        overrides: dict[str, Any] | None = None,
        options: dict[str, Any] | None = None,
    ) -> Iterator[Record]:
        """Records one at a time, in sample order (the loader reads rows as they are needed)."""
        from omnieval.core import import_target

        gen = self.generation_options(generation, overrides)
        if self.records_fn is not None:
            build = import_target(self.records_fn)
            yield from build(self, model=model, generation=gen, limit=limit, **{**self.options, **(options or {})})
            return
        load: Callable[[BenchmarkSpec], Iterable[dict[str, Any]]] = import_target(self.loader)
        template = self.prompt_template if prompt == "native" else self.uniform_prompt_template
        for i, s in enumerate(itertools.islice(load(self), limit)):
            messages = []
            if self.system_prompt and prompt == "native":
                messages.append(Message.text("system", self.system_prompt))
            # Media entries (a loader's optional "media" list: AudioContent, ImageContent, ...) precede the prompt.
            text = TextContent(value=template.format(**s["fields"]))
            messages.append(Message(role="user", content=[*s.get("media", ()), text]))
            yield Record(
                benchmark=self.name,
                index=i,
                model=model,
                sample_id=s.get("id"),
                messages=messages,
                generation_options=gen,
                label=s["label"],
                options=s.get("options"),
                meta={**s.get("meta", {}), "prompt": prompt},
            )
