"""Power-of-two-choices routing (the default policy)."""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence
from typing import ClassVar

from ._policy import RoutingPolicy, rank_by_load, require_candidates
from ._types import ReplicaView, RoutingRequest


class PowerOfTwoChoices(RoutingPolicy):
    """Sample two distinct candidates uniformly at random and pick the less loaded (ties broken at random).

    Why: with fresh load information, "least loaded" is optimal, but load stats here are partly stale (replica-reported
    ``queue_depth``) and many client actors route concurrently. Pure least-loaded then herds: every router sends its
    burst to the same replica that *looked* idle. Sampling two at random keeps the choice spread out, yet
    (Mitzenmacher, "The Power of Two Choices in Randomized Load Balancing") it already cuts the maximum load from
    Θ(log n / log log n) for a single random choice to Θ(log log n) — almost all of the benefit of full information.
    The remaining candidates follow ranked by load so the pool can fall back.
    """

    name: ClassVar[str] = "p2c"

    def __init__(self, seed: int | None = None) -> None:
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def choose(self, candidates: Sequence[ReplicaView], request: RoutingRequest) -> list[str]:
        require_candidates(candidates)
        if len(candidates) == 1:
            return [candidates[0].replica_id]
        with self._lock:
            i, j = self._rng.sample(range(len(candidates)), 2)
            a, b = candidates[i], candidates[j]
            if a.load == b.load:
                winner = a if self._rng.random() < 0.5 else b
            else:
                winner = a if a.load < b.load else b
        rest = rank_by_load([v for v in candidates if v is not winner])
        return [winner.replica_id, *rest]

    def __repr__(self) -> str:
        return "PowerOfTwoChoices()"
