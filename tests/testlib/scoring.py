"""Engine-agnostic checks of a server's scoring through the pool's transport."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from serving import Endpoint, ScoreRequest


async def assert_order_free(transport: Any, ep: Endpoint, reqs: list[ScoreRequest], seed: int = 7) -> None:
    """The requests all at once in order, then again shuffled: every log-likelihood identical (a server whose
    numbers depend on what else is in flight, e.g. vLLM #42019 with prefix caching, fails here)."""
    first = await asyncio.gather(*(transport.score(ep, r, "r") for r in reqs))
    order = list(range(len(reqs)))
    random.Random(seed).shuffle(order)
    again = dict(zip(order, await asyncio.gather(*(transport.score(ep, reqs[i], "r") for i in order)), strict=True))
    for i, a in enumerate(first):
        assert [c.logprob for c in a.choices] == [c.logprob for c in again[i].choices], reqs[i].request_id
