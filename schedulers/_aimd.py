"""Adaptive (AIMD) concurrency limit."""

from __future__ import annotations

import math
import threading


class AIMDLimiter:
    """Adaptive concurrency: additive increase on success below target latency, multiplicative decrease on error or
    latency above target.

    Why: the right number of in-flight requests per replica depends on the engine, hardware and prompt mix; too few
    idles the batcher, too many only adds queueing delay and timeouts. AIMD (as in TCP congestion control) probes
    upward slowly and backs off fast. The increase is ``increase_step`` per full window (``limit`` successes), the
    analogue of TCP's one segment per round trip, so growth per round of requests does not depend on how large the
    limit already is; counting whole windows (rather than adding ``step / limit`` per success) keeps it exact. A
    decrease also restarts the window. With ``target_latency_s=None`` only errors shrink the limit.
    """

    def __init__(
        self,
        initial: int = 4,
        min_limit: int = 1,
        max_limit: int = 64,
        increase_step: float = 1.0,
        decrease_factor: float = 0.5,
        target_latency_s: float | None = None,
    ) -> None:
        if not 1 <= min_limit <= initial <= max_limit:
            raise ValueError("need 1 <= min_limit <= initial <= max_limit")
        if increase_step <= 0:
            raise ValueError("increase_step must be > 0")
        if not 0 < decrease_factor < 1:
            raise ValueError("decrease_factor must be in (0, 1)")
        if target_latency_s is not None and target_latency_s <= 0:
            raise ValueError("target_latency_s must be > 0")
        self.min_limit = min_limit
        self.max_limit = max_limit
        self.increase_step = increase_step
        self.decrease_factor = decrease_factor
        self.target_latency_s = target_latency_s
        self._limit = float(initial)
        self._acks = 0  # successes in the current window
        self._lock = threading.Lock()

    @property
    def limit(self) -> int:
        """Current concurrency limit (floor of the internal float, within ``[min_limit, max_limit]``)."""
        return max(self.min_limit, min(self.max_limit, math.floor(self._limit)))

    def on_success(self, latency_s: float) -> None:
        if self.target_latency_s is not None and latency_s > self.target_latency_s:
            self._decrease()
            return
        with self._lock:
            self._acks += 1
            if self._acks >= self.limit:
                self._acks = 0
                self._limit = min(float(self.max_limit), self._limit + self.increase_step)

    def on_failure(self) -> None:
        self._decrease()

    def _decrease(self) -> None:
        with self._lock:
            self._acks = 0
            self._limit = max(float(self.min_limit), self._limit * self.decrease_factor)

    def __repr__(self) -> str:
        return f"AIMDLimiter(limit={self.limit}, min={self.min_limit}, max={self.max_limit})"
