"""Hooks of the tiny_shapes lmms-eval task: images are files next to this module, referenced from the JSONL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def doc_to_visual(doc: dict[str, Any]) -> list[str]:
    """A path (not a PIL image): lmms-eval encodes it for OpenAI-style models, and it stays small in logged samples."""
    p = Path(doc["image"])
    return [str(p if p.is_absolute() else HERE / p)]


def doc_to_text(doc: dict[str, Any], lmms_eval_specific_kwargs: dict[str, Any] | None = None) -> str:
    return str(doc["question"])
