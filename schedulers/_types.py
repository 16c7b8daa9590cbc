"""Value types exchanged between the pool and routing policies.

Both are frozen so a policy can keep references (e.g. in a prefix tree) without the pool mutating them underneath.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReplicaView:
    """What a policy sees about one candidate replica.

    ``outstanding`` is exact (this router's own in-flight count); ``queue_depth`` is what the replica last reported
    (waiting + running, possibly from other routers) and may be stale, so policies combine both.
    """

    replica_id: str
    outstanding: int
    queue_depth: int = 0
    healthy: bool = True

    @property
    def load(self) -> int:
        """Combined load used by every built-in policy: ``outstanding + queue_depth``."""
        return self.outstanding + self.queue_depth


@dataclass(frozen=True)
class RoutingRequest:
    """The part of a request a policy may route on."""

    model: str
    prompt_text: str
    est_tokens: int = 0
