"""Cache-aware (prefix-affinity) routing in the style of sgl-router's ``cache_aware`` policy."""

from __future__ import annotations

import threading
import zlib
from collections.abc import Sequence
from typing import ClassVar

from ._policy import RoutingPolicy, rank_by_load, require_candidates
from ._prefix_tree import PrefixTree
from ._types import ReplicaView, RoutingRequest


class PrefixAware(RoutingPolicy):
    """Send a prompt to the replica most likely to hold its prefix in KV cache, unless load is badly skewed.

    Evaluation prompts share long prefixes (system prompt + the same k few-shot examples for every item of a task),
    so keeping a task on the replica that already cached that prefix skips most of the prefill. Per model it keeps an
    approximate :class:`PrefixTree` of what each replica was sent. For each request:

    1. If load is imbalanced — ``max - min > balance_abs_threshold`` *and* ``max > balance_rel_threshold * min`` —
       route to the shortest queue: affinity must not pile a whole task onto one replica.
    2. Otherwise, if the best replica matches ``match_ratio = matched_chars / len(prompt) >= cache_threshold``, route
       there (ties: lower load).
    3. Otherwise route to the replica with the smallest tree (fewest cached characters), which spreads new prefix
       families over replicas and so grows the pool's aggregate cache.

    The remaining candidates follow ranked by load. ``on_dispatch`` inserts the prompt under the replica actually
    used; memory is capped at ``max_chars_per_replica`` characters per replica (per model tree) with LRU eviction.
    ``seed`` is accepted for a uniform constructor; ties are broken deterministically.
    """

    name: ClassVar[str] = "prefix_aware"

    def __init__(
        self,
        seed: int | None = None,
        cache_threshold: float = 0.5,
        balance_abs_threshold: int = 32,
        balance_rel_threshold: float = 1.5,
        max_chars_per_replica: int = 2_000_000,
        evict_to_fraction: float = 0.9,
    ) -> None:
        self._seed = seed
        if not 0.0 <= cache_threshold <= 1.0:
            raise ValueError("cache_threshold must be in [0, 1]")
        if max_chars_per_replica < 1:
            raise ValueError("max_chars_per_replica must be >= 1")
        self.cache_threshold = cache_threshold
        self.balance_abs_threshold = balance_abs_threshold
        self.balance_rel_threshold = balance_rel_threshold
        self.max_chars_per_replica = max_chars_per_replica
        self.evict_to_fraction = evict_to_fraction
        self._trees: dict[str, PrefixTree] = {}
        self._lock = threading.Lock()

    def tree(self, model: str) -> PrefixTree:
        """The (possibly new) prefix tree for ``model``; exposed for inspection and tests."""
        with self._lock:
            tree = self._trees.get(model)
            if tree is None:
                tree = self._trees[model] = PrefixTree(self.max_chars_per_replica, self.evict_to_fraction)
            return tree

    def is_imbalanced(self, candidates: Sequence[ReplicaView]) -> bool:
        loads = [v.load for v in candidates]
        hi, lo = max(loads), min(loads)
        return hi - lo > self.balance_abs_threshold and hi > self.balance_rel_threshold * lo

    def choose(self, candidates: Sequence[ReplicaView], request: RoutingRequest) -> list[str]:
        require_candidates(candidates)
        if len(candidates) == 1:
            return [candidates[0].replica_id]
        if self.is_imbalanced(candidates):
            return rank_by_load(candidates)
        tree = self.tree(request.model)
        with self._lock:
            matches = tree.match(request.prompt_text)
            sizes = {v.replica_id: tree.chars(v.replica_id) for v in candidates}
        best = min(candidates, key=lambda v: (-matches.get(v.replica_id, 0), v.load, self._tiebreak(v.replica_id)))
        matched = matches.get(best.replica_id, 0)
        ratio = matched / len(request.prompt_text) if request.prompt_text else 0.0
        if matched == 0 or ratio < self.cache_threshold:
            best = min(candidates, key=lambda v: (sizes[v.replica_id], v.load, self._tiebreak(v.replica_id)))
        rest = rank_by_load([v for v in candidates if v is not best])
        return [best.replica_id, *rest]

    def _tiebreak(self, replica_id: str) -> int:
        """Seeded per-policy order among equals: clients that each see an empty tree must not all pick one replica."""
        return zlib.crc32(f"{self._seed}:{replica_id}".encode())

    def on_dispatch(self, replica_id: str, request: RoutingRequest) -> None:
        tree = self.tree(request.model)
        with self._lock:
            tree.insert(request.prompt_text, replica_id)

    def remove_replica(self, replica_id: str) -> None:
        with self._lock:
            for tree in self._trees.values():
                tree.remove_tenant(replica_id)

    def __repr__(self) -> str:
        return (
            f"PrefixAware(cache_threshold={self.cache_threshold}, balance_abs_threshold={self.balance_abs_threshold}, "
            f"balance_rel_threshold={self.balance_rel_threshold}, max_chars_per_replica={self.max_chars_per_replica})"
        )
