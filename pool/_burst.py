"""A model's replicas started together share the first requests, even when one of them is up a moment earlier.

Why: a run dispatches from a model's first healthy replica while its siblings still load (``ModelStarts``). Each
replica's concurrency limit starts at its engine's batch slots, so a job smaller than one replica's slots went
wholly to whichever replica answered first, and a sibling healthy a second later served nothing: on a 2-core
node, 8 image requests on one 1-thread replica took 9 s where two took 6 s. While a burst's siblings are still
starting, each healthy replica publishes the share of its limit that the replicas up so far would hold if all were
up (``limit × healthy / (healthy + starting)``), so the rest of the first requests wait at the clients for the
siblings. The share lasts at most ``SHARE_FRACTION`` of the first replica's own start time (capped at
``SHARE_MAX_S``): a sibling that lags further is a slow one, and the replicas already up take their whole limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SHARE_FRACTION = 0.25
"""The share holds for this fraction of the time the burst's first replica took to come up."""
SHARE_MAX_S = 10.0
"""... and never longer than this."""


@dataclass
class StartBurst:
    """Replicas of one model that one ``ensure_model`` call starts at once."""

    started_at: float
    """Monotonic time the burst's deploys began."""
    first_up_at: float | None = None
    """Monotonic time its first replica was healthy (None until then)."""

    def window_s(self) -> float:
        """How long after the first replica is up the share holds."""
        if self.first_up_at is None:
            return 0.0
        return min(SHARE_MAX_S, SHARE_FRACTION * (self.first_up_at - self.started_at))

    def share(self, limit: int, healthy: int, starting: int, now: float) -> int:
        """The limit a healthy replica of the burst's model publishes now."""
        if self.first_up_at is None or starting <= 0 or healthy <= 0 or now - self.first_up_at >= self.window_s():
            return limit
        return max(1, math.ceil(limit * healthy / (healthy + starting)))
