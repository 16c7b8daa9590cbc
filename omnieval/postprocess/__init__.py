"""Postprocessors: turn a raw generation into the string a metric compares, or None when nothing was extracted.

Each is a pure ``(text, record) -> str | None`` function; ``record`` supplies context such as ``options`` for
multiple-choice. They are registered by ``"module:function"`` string so a Ray worker resolves a name without the
driver's imports.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

from omnieval.core import Record, Registry

Postprocessor: TypeAlias = Callable[[str, Record | None], str | None]

POSTPROCESSORS: Registry[Postprocessor] = Registry(
    "postprocessor",
    {
        "identity": "omnieval.postprocess._basic:identity",
        "strip": "omnieval.postprocess._basic:strip",
        "first_line": "omnieval.postprocess._basic:first_line",
        "mc_letter": "omnieval.postprocess._mc:mc_letter",
        "number": "omnieval.postprocess._number:number",
        "asr_normalize": "omnieval.postprocess._asr:asr_normalize",
    },
)


def get_postprocessor(name: str) -> Postprocessor:
    """Resolve a registered postprocessor; an unknown name raises ``UnknownNameError`` with suggestions."""
    return POSTPROCESSORS.get(name)


__all__ = ["POSTPROCESSORS", "Postprocessor", "get_postprocessor"]
