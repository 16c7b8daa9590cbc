"""The routing-policy interface.

A policy only ranks; the pool owns health filtering, circuit breaking, retries and the actual dispatch. Returning a
full ranking (not a single winner) lets the pool fall back down the list when the top choice refuses the request.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from ._types import ReplicaView, RoutingRequest


class RoutingPolicy(ABC):
    """Base class of routing policies; subclasses set ``name`` and implement :meth:`choose`.

    The feedback hooks are no-ops by default so stateless policies need not override them.
    """

    name: ClassVar[str]

    @abstractmethod
    def choose(self, candidates: Sequence[ReplicaView], request: RoutingRequest) -> list[str]:
        """Return candidate replica ids ranked best-first (all of them, so the caller can fall back)."""

    def on_dispatch(self, replica_id: str, request: RoutingRequest) -> None:  # noqa: B027
        """Called once the pool actually sent ``request`` to ``replica_id`` (possibly a fallback choice)."""

    def on_complete(self, replica_id: str, request: RoutingRequest, ok: bool, latency_s: float) -> None:  # noqa: B027
        """Called when a dispatched request finished (``ok=False`` on error)."""

    def remove_replica(self, replica_id: str) -> None:  # noqa: B027
        """Forget any state kept about a replica that left the pool."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def require_candidates(candidates: Sequence[ReplicaView]) -> None:
    """Raise ``ValueError`` on an empty candidate list: the pool must not ask a policy to route to nothing."""
    if not candidates:
        raise ValueError("no candidate replicas to route to")


def rank_by_load(candidates: Sequence[ReplicaView]) -> list[str]:
    """Ids sorted by ``(load, replica_id)`` — deterministic, used for the fallback tail of every ranking."""
    return [v.replica_id for v in sorted(candidates, key=lambda v: (v.load, v.replica_id))]
