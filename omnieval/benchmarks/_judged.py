"""Record builders for the judge-scored seed benchmarks (EgoMem, OmniAssistBench) behind ``BenchmarkSpec``."""

from __future__ import annotations

from typing import Any

from omnieval._schema import GenerationOptions, Record, TextContent
from omnieval.benchmarks._spec import BenchmarkSpec


def _text_only(records: list[Record]) -> list[Record]:
    """Drop media entries: a diagnostic condition for text-only models (not one of the papers' conditions)."""
    out = []
    for r in records:
        msgs = [m.model_copy(update={"content": [c for c in m.content if isinstance(c, TextContent)]}) for m in r.messages]
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

    recs = load_records(
        spec.data_path, model=model, benchmark=spec.name, mode=mode, condition=condition,  # type: ignore[arg-type]
        generation=generation, limit=limit, **kw,
    )  # fmt: skip
    return _text_only(recs) if text_only else recs
