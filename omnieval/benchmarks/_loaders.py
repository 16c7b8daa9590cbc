"""Row loaders for the shipped text benchmarks: JSONL rows → sample dicts for ``BenchmarkSpec.records``.

Loaders are generators: a run reads a benchmark row by row while it dispatches, so a million-sample file never sits
in memory whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from omnieval.benchmarks._spec import BenchmarkSpec
from omnieval.core import OmnievalUserError

LETTERS = "ABCDEFGHIJ"


def jsonl_rows(path: Path, prefix: str = "") -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, row)`` of a JSONL file, blank lines skipped; a bad line is one user error naming it."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise OmnievalUserError(
                    f"{prefix}{path}:{n}: corrupt JSONL row ({e.msg}); regenerate or fix the data file"
                ) from None
            if not isinstance(row, dict):
                raise OmnievalUserError(f"{prefix}{path}:{n}: a row must be a JSON object, got {type(row).__name__}")
            yield n, row


def read_jsonl(spec: BenchmarkSpec) -> Iterator[dict[str, Any]]:
    path = spec.data_path
    if not path.is_file():
        raise OmnievalUserError(f"benchmark {spec.name}: data file not found: {path}")
    return (row for _, row in jsonl_rows(path, f"benchmark {spec.name}: "))


def options_block(choices: list[str]) -> str:
    """``A. first\nB. second ...``: the options as every multiple-choice prompt shows them."""
    return "\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(choices))


def multiple_choice(spec: BenchmarkSpec) -> Iterator[dict[str, Any]]:
    for r in read_jsonl(spec):
        choices = r["choices"]
        yield {
            "id": r.get("id"),
            "fields": {"question": r["question"], "options": options_block(choices)},
            "label": r["answer"],
            "options": choices,
            "meta": {k: v for k, v in r.items() if k in ("subject",)},
        }


def math_word_problem(spec: BenchmarkSpec) -> Iterator[dict[str, Any]]:
    return (
        {
            "id": r.get("id"),
            "fields": {"passage": r.get("passage", ""), "question": r["question"]},
            "label": r["answer"],
            "meta": {"answer_text": r.get("answer_text")},
        }
        for r in read_jsonl(spec)
    )
