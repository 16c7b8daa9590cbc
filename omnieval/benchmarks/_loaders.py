"""Row loaders for the shipped text benchmarks: JSONL rows → sample dicts for ``BenchmarkSpec.records``."""

from __future__ import annotations

import json
from typing import Any

from omnieval.benchmarks._spec import BenchmarkSpec
from omnieval.errors import OmnievalUserError

LETTERS = "ABCDEFGHIJ"


def read_jsonl(spec: BenchmarkSpec) -> list[dict[str, Any]]:
    path = spec.data_path
    if not path.is_file():
        raise OmnievalUserError(f"benchmark {spec.name}: data file not found: {path}")
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise OmnievalUserError(
                f"benchmark {spec.name}: {path}:{n}: corrupt JSONL row ({e.msg}); regenerate or fix the data file"
            ) from None
        if not isinstance(rows[-1], dict):
            raise OmnievalUserError(f"benchmark {spec.name}: {path}:{n}: a row must be a JSON object")
    return rows


def multiple_choice(spec: BenchmarkSpec) -> list[dict[str, Any]]:
    out = []
    for r in read_jsonl(spec):
        choices = r["choices"]
        options_block = "\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(choices))
        out.append(
            {
                "id": r.get("id"),
                "fields": {"question": r["question"], "options": options_block},
                "label": r["answer"],
                "options": choices,
                "meta": {k: v for k, v in r.items() if k in ("subject",)},
            }
        )
    return out


def math_word_problem(spec: BenchmarkSpec) -> list[dict[str, Any]]:
    return [
        {
            "id": r.get("id"),
            "fields": {"passage": r.get("passage", ""), "question": r["question"]},
            "label": r["answer"],
            "meta": {"answer_text": r.get("answer_text")},
        }
        for r in read_jsonl(spec)
    ]
