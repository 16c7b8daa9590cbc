"""Round-robin routing."""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence
from typing import ClassVar

from ._policy import RoutingPolicy, require_candidates
from ._types import ReplicaView, RoutingRequest


class RoundRobin(RoutingPolicy):
    """Rotate a cursor over the candidates sorted by id, ignoring load.

    Useful as a load-blind baseline and for identical replicas under uniform requests. Sorting by id makes the order
    independent of how the pool happens to list candidates; when the candidate set changes the cursor simply wraps
    modulo the new size. ``seed`` picks the starting offset, so many clients (one policy each) do not rotate in
    lockstep over the same replicas.
    """

    name: ClassVar[str] = "round_robin"

    def __init__(self, seed: int | None = None) -> None:
        self._cursor = 0 if seed is None else random.Random(seed).randrange(1 << 30)
        self._lock = threading.Lock()

    def choose(self, candidates: Sequence[ReplicaView], request: RoutingRequest) -> list[str]:
        require_candidates(candidates)
        ids = sorted(v.replica_id for v in candidates)
        with self._lock:
            start = self._cursor % len(ids)
            self._cursor += 1
        return ids[start:] + ids[:start]
