"""Least-loaded routing."""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence
from typing import ClassVar

from ._policy import RoutingPolicy, require_candidates
from ._types import ReplicaView, RoutingRequest


class LeastLoaded(RoutingPolicy):
    """Rank all candidates by load (``outstanding + queue_depth``), lowest first.

    Best when load figures are fresh (a single router whose ``outstanding`` dominates); with stale stats and many
    routers it herds onto one replica — see :class:`PowerOfTwoChoices`. Equal loads are ordered randomly (seeded) so
    that at least exact ties, e.g. an idle pool, do not all land on the lexicographically first replica.
    """

    name: ClassVar[str] = "least_loaded"

    def __init__(self, seed: int | None = None) -> None:
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def choose(self, candidates: Sequence[ReplicaView], request: RoutingRequest) -> list[str]:
        require_candidates(candidates)
        with self._lock:
            keyed = [(v.load, self._rng.random(), v.replica_id) for v in candidates]
        keyed.sort()
        return [rid for _, _, rid in keyed]
