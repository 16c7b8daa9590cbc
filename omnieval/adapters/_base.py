"""The ``FrameworkAdapter`` seam: an evaluation framework's own loop, with every request sent to the pool.

One thin adapter per framework (N + M, not N × M): the framework keeps its prompts, filters and metrics, the pool
does inference, and the adapter maps the framework's per-sample output into Records.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from omnieval._artifacts import ScoreRow
from omnieval._schema import Record


class FrameworkResult(BaseModel):
    model_config = ConfigDict(extra="forbid")
    records: list[Record]
    """Per-sample Records mapped from the framework's logged samples."""
    scores: list[ScoreRow]
    """Aggregates exactly as the framework computed them (0–100)."""
    versions: dict[str, str] = Field(default_factory=dict)
    """Framework package versions (provenance)."""
    raw: dict[str, Any] = Field(default_factory=dict)
    """The framework's own results block, kept for inspection."""


class FrameworkAdapter(ABC):
    name: ClassVar[str]
    pip_line: ClassVar[str]

    @abstractmethod
    def run(self, *, task: str, options: dict[str, Any], model: str, bridge: Any, limit: int | None,
            generation: dict[str, Any]) -> FrameworkResult:  # fmt: skip
        """Run one framework task against the pool through ``bridge`` (a ``PoolBridge``)."""
