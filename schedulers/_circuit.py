"""Per-replica circuit breaker."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

BreakerState = Literal["closed", "open", "half_open"]


@dataclass
class _Entry:
    state: BreakerState = "closed"
    failures: int = 0  # consecutive, while closed
    successes: int = 0  # consecutive, while half-open
    backoff_s: float = 0.0  # current (un-jittered) backoff; 0 until the first open
    reopen_at: float = 0.0
    probe_since: float | None = None  # when the outstanding half-open probe was granted


class CircuitBreaker:
    """Per-replica breaker: closed → open after `failure_threshold` consecutive failures; open for a backoff that
    doubles on each re-open (initial_backoff_s, max_backoff_s, jitter 0 by default for determinism); after the backoff
    one probe is allowed (half-open); `success_threshold` successes close it.

    Why: a crashed or wedged replica would otherwise keep receiving (and failing) a share of the traffic, burning
    retries. Exponential backoff keeps a replica that stays broken from being probed too often. Details:

    * a failed probe re-opens with double the backoff (capped); closing resets the backoff to ``initial_backoff_s``;
    * results arriving while open (requests dispatched before it opened) are ignored;
    * if a probe's result never arrives (e.g. the caller cancelled it), another probe is allowed after one more
      backoff period, so a replica can never be blocked forever;
    * ``jitter`` > 0 stretches each backoff by a random factor in ``[1, 1 + jitter)`` to de-synchronise routers.
    """

    def __init__(
        self,
        failure_threshold: int = 5,
        success_threshold: int = 1,
        initial_backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        jitter: float = 0.0,
        seed: int | None = None,
    ) -> None:
        if failure_threshold < 1 or success_threshold < 1:
            raise ValueError("failure_threshold and success_threshold must be >= 1")
        if not 0 < initial_backoff_s <= max_backoff_s:
            raise ValueError("need 0 < initial_backoff_s <= max_backoff_s")
        if jitter < 0:
            raise ValueError("jitter must be >= 0")
        self.failure_threshold = failure_threshold
        self.success_threshold = success_threshold
        self.initial_backoff_s = initial_backoff_s
        self.max_backoff_s = max_backoff_s
        self.jitter = jitter
        self._clock = clock
        self._rng = random.Random(seed)
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def allow(self, replica_id: str) -> bool:
        """Whether a request may go to ``replica_id`` now; in half-open state this grants the single probe."""
        with self._lock:
            e = self._refresh(replica_id)
            if e.state == "closed":
                return True
            if e.state == "open":
                return False
            now = self._clock()
            if e.probe_since is None or now - e.probe_since >= e.backoff_s:
                e.probe_since = now
                return True
            return False

    def record_success(self, replica_id: str) -> None:
        with self._lock:
            e = self._refresh(replica_id)
            if e.state == "closed":
                e.failures = 0
            elif e.state == "half_open":
                e.successes += 1
                e.probe_since = None
                if e.successes >= self.success_threshold:
                    self._entries[replica_id] = _Entry()

    def record_failure(self, replica_id: str) -> None:
        with self._lock:
            e = self._refresh(replica_id)
            if e.state == "closed":
                e.failures += 1
                if e.failures >= self.failure_threshold:
                    self._open(e, self.initial_backoff_s)
            elif e.state == "half_open":
                self._open(e, min(e.backoff_s * 2, self.max_backoff_s))

    def state(self, replica_id: str) -> BreakerState:
        """Current state; an open breaker whose backoff has elapsed reports ``"half_open"``."""
        with self._lock:
            return self._refresh(replica_id).state

    def remove(self, replica_id: str) -> None:
        """Forget a replica (it left the pool)."""
        with self._lock:
            self._entries.pop(replica_id, None)

    def _refresh(self, replica_id: str) -> _Entry:
        e = self._entries.get(replica_id)
        if e is None:
            e = self._entries[replica_id] = _Entry()
        if e.state == "open" and self._clock() >= e.reopen_at:
            e.state, e.successes, e.probe_since = "half_open", 0, None
        return e

    def _open(self, e: _Entry, backoff_s: float) -> None:
        wait = backoff_s * (1.0 + self.jitter * self._rng.random()) if self.jitter else backoff_s
        e.state, e.failures, e.successes, e.probe_since = "open", 0, 0, None
        e.backoff_s = backoff_s
        e.reopen_at = self._clock() + wait
