"""Record builders for the judge-scored seed benchmarks (EgoMem, OmniAssistBench) behind ``BenchmarkSpec``."""

from __future__ import annotations

from typing import Any

from omnieval.benchmarks._spec import BenchmarkSpec
from omnieval.core import Content, GenerationOptions, Record, TextContent


def _text_only_content(content: list[Content]) -> list[Content]:
    """Text entries kept; a message left with none says what was withheld, so no user turn reaches a model empty
    (a proactive turn whose only input is its clip)."""
    text: list[Content] = [c for c in content if isinstance(c, TextContent)]
    if text or not content:
        return text
    kinds = sorted({c.type for c in content})
    return [TextContent(value=f"[{' and '.join(kinds)} withheld: text-only condition]")]


def _text_only(records: list[Record]) -> list[Record]:
    """Drop media entries: a diagnostic condition for text-only models (not one of the papers' conditions)."""
    out = []
    for r in records:
        msgs = [m.model_copy(update={"content": _text_only_content(m.content)}) for m in r.messages]
        out.append(r.model_copy(update={"messages": msgs, "meta": {**r.meta, "condition": "text_only"}}))
    return out


def egomem(
    spec: BenchmarkSpec, *, model: str, generation: GenerationOptions, limit: int | None, split: str,
    memory: str = "profile", user_input: str = "audio", text_only: bool = False, **kw: Any,
) -> list[Record]:  # fmt: skip
    from omnieval.benchmarks.egomem import load_records

    recs = load_records(
        spec.data_path, split=split, model=model, benchmark=spec.name, memory=memory,  # type: ignore[arg-type]
        user_input=user_input, generation=generation, limit=limit, **kw,  # type: ignore[arg-type]
    )  # fmt: skip
    return _text_only(recs) if text_only else recs


def omniassist(
    spec: BenchmarkSpec, *, model: str, generation: GenerationOptions, limit: int | None, mode: str = "common",
    condition: str = "original", text_only: bool = False, **kw: Any,
) -> list[Record]:  # fmt: skip
    from omnieval.benchmarks.omniassist import load_records

    if text_only:  # the spoken query goes in as its transcript, so no turn reaches the model empty
        kw["query_as_text"] = True
    recs = load_records(
        spec.data_path, model=model, benchmark=spec.name, mode=mode, condition=condition,  # type: ignore[arg-type]
        generation=generation, limit=limit, **kw,
    )  # fmt: skip
    return _text_only(recs) if text_only else recs
