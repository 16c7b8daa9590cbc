"""Cost-balanced sharding of evaluation items over workers."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def estimate_cost(
    prompt_chars: int, max_tokens: int, chars_per_token: float = 4.0, decode_weight: float = 4.0
) -> float:
    """Predicted token cost: prompt tokens + decode_weight × max new tokens (decode steps dominate on CPU/GPU).

    Prefill processes the prompt in parallel while each generated token is a sequential forward pass, so one decode
    token costs several prompt tokens of wall time. ``max_tokens`` is an upper bound, which is what a planner knows.
    """
    if prompt_chars < 0 or max_tokens < 0:
        raise ValueError("prompt_chars and max_tokens must be >= 0")
    if chars_per_token <= 0:
        raise ValueError("chars_per_token must be > 0")
    return prompt_chars / chars_per_token + decode_weight * max_tokens


def plan_shards(items: Sequence[T], num_shards: int, cost: Callable[[T], float]) -> list[list[T]]:
    """Longest-processing-time-first: sort by predicted cost descending, assign each to the currently lightest shard
    (heap). Deterministic; returns num_shards lists (some may be empty if fewer items).

    LPT's makespan is within ``4/3 - 1/(3m)`` of optimal (Graham, 1969), whereas naive chunking can put every
    expensive item on one shard. Ties (equal cost, equal shard load) break by input position / shard index, and each
    shard keeps its items in input order.
    """
    if num_shards < 1:
        raise ValueError("num_shards must be >= 1")
    costs = [float(cost(item)) for item in items]
    if any(c < 0 for c in costs):
        raise ValueError("costs must be >= 0")
    order = sorted(range(len(items)), key=lambda i: (-costs[i], i))
    heap = [(0.0, s) for s in range(num_shards)]
    assigned: list[list[int]] = [[] for _ in range(num_shards)]
    for i in order:
        load, s = heapq.heappop(heap)
        assigned[s].append(i)
        heapq.heappush(heap, (load + costs[i], s))
    return [[items[i] for i in sorted(idx)] for idx in assigned]


def makespan(shards: Sequence[Sequence[T]], cost: Callable[[T], float]) -> float:
    """The largest total cost of any shard (0.0 when there are none) — the wall time of a parallel run."""
    return max((sum(cost(item) for item in shard) for shard in shards), default=0.0)
