"""Adaptive per-replica concurrency that finds the engine's saturation point (latency-gradient, Vegas-style)."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass


@dataclass
class LimitWindow:
    """What clients observed of one replica since the last update."""

    ok: int = 0
    """Requests that succeeded."""
    failed: int = 0
    """Requests that failed (errors, timeouts, dead connections)."""
    latency_sum: float = 0.0
    """Sum of normalised latencies (seconds per generated token, prefill counted as one token) of the successes."""
    peak_in_flight: int = 0
    """Most requests in flight to the replica at once during the window (all clients together)."""
    output_tokens: int = 0
    """Tokens generated (reported for accounting; the limit does not use it)."""

    def add(self, other: LimitWindow) -> None:
        self.ok += other.ok
        self.failed += other.failed
        self.latency_sum += other.latency_sum
        self.peak_in_flight = max(self.peak_in_flight, other.peak_in_flight)
        self.output_tokens += other.output_tokens


class GradientLimiter:
    """How many requests one replica should have in flight, shared by every client that sends to it.

    Why: the right depth depends on the engine, the hardware and the prompt mix; a fixed cap either idles a fast
    engine or just builds a queue in a slow one. The limit starts low and climbs the throughput curve: by Little's
    law a replica holding ``limit`` requests at mean latency ``R`` serves ``limit / R``; while a step up (``growth``,
    geometric, so 4 → 256 takes ~20 windows) raises that by at least ``min_gain``, it keeps climbing; when a step
    does not pay (the engine is saturated and extra requests only wait), it steps back and holds for ``hold``
    windows before probing again. As a guard (TCP Vegas, Netflix's gradient limiter) latency above ``tolerance`` ×
    the no-queue baseline (lowest recent window mean) shrinks the limit by the gradient, at most halving it, and any
    failure halves it. Latency is normalised per generated token, so long and short generations compare;
    continuous batching legitimately raises per-token latency with batch size, hence a tolerance of 2.
    """

    def __init__(self, initial: int = 4, min_limit: int = 1, max_limit: int = 256, *, tolerance: float = 2.0,
                 growth: float = 1.25, min_gain: float = 0.05, hold: int = 8, min_samples: int = 8,
                 baseline_windows: int = 64) -> None:  # fmt: skip
        if not 1 <= min_limit <= initial <= max_limit:
            raise ValueError("need 1 <= min_limit <= initial <= max_limit")
        if tolerance < 1 or growth <= 1:
            raise ValueError("tolerance must be >= 1 and growth > 1")
        self.min_limit, self.max_limit = min_limit, max_limit
        self.tolerance, self.growth, self.min_gain, self.hold = tolerance, growth, min_gain, hold
        self.min_samples = min_samples
        self._limit = float(initial)
        self._pending = LimitWindow()
        self._means: deque[float] = deque(maxlen=baseline_windows)
        self._prev: tuple[int, float] | None = None  # (limit, throughput) of the last decided window
        self._holding = 0
        self.updates = 0
        self.initial = self.limit
        """Where the limit started."""
        self.peak_limit = self.limit
        """The highest limit set so far (how far the climb went, whatever the limit is now)."""

    @property
    def limit(self) -> int:
        return max(self.min_limit, min(self.max_limit, math.floor(self._limit)))

    @property
    def baseline(self) -> float | None:
        """Normalised latency without queueing: the lowest recent window mean."""
        return min(self._means) if self._means else None

    def observe(self, window: LimitWindow) -> int:
        """Fold one client's report in; decide once enough samples have arrived. Returns the (new) limit."""
        self._pending.add(window)
        w = self._pending
        if w.failed:
            self._pending = LimitWindow()
            self._set(self._limit / 2)
            self.updates += 1
            return self.limit
        if w.ok < max(self.min_samples, min(self.limit, 64) // 4):
            return self.limit
        self._pending = LimitWindow()
        self.updates += 1
        mean = w.latency_sum / w.ok
        self._means.append(mean)
        base = self.baseline
        assert base is not None
        cur = self.limit
        if mean > self.tolerance * base:
            self._set(self._limit * max(0.5, self.tolerance * base / mean))
            return self.limit
        if w.peak_in_flight < 0.8 * cur:  # app-limited: the window says nothing about more depth
            return self.limit
        throughput = cur / mean
        prev, self._prev = self._prev, (cur, throughput)
        if prev is not None and prev[0] < cur and throughput < (1 + self.min_gain) * prev[1]:
            self._set(prev[0])  # the last step up did not pay: back, and stay a while
            self._prev = prev
            self._holding = self.hold
        elif self._holding > 0:
            self._holding -= 1
        else:
            self._set(max(self._limit + 1, self._limit * self.growth))
        return self.limit

    def start_at_least(self, n: int) -> None:
        """Raise the start to ``n`` (the engine's batch slots, learnt after the first client synced): a limit below
        the slots idles slots by construction."""
        if n > self.initial:
            self.initial = min(self.max_limit, n)
            self._set(max(self._limit, float(n)))

    def _set(self, value: float) -> None:
        self._limit = max(float(self.min_limit), min(float(self.max_limit), value))
        self.peak_limit = max(self.peak_limit, self.limit)

    def __repr__(self) -> str:
        return f"GradientLimiter(limit={self.limit}, baseline={self.baseline}, max={self.max_limit})"
