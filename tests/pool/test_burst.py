"""Replicas of one model started together share the first requests (``pool._burst``), through the controller's
``sync`` reply that every client's dispatcher caps its slots by."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from pool._burst import SHARE_MAX_S, StartBurst
from pool._controller import PoolController
from pool._types import ReplicaInfo, SyncRequest


def test_share_splits_the_limit_while_siblings_start_and_ends_with_its_window() -> None:
    b = StartBurst(started_at=100.0, first_up_at=112.0)  # the first replica took 12 s: the share holds 3 s
    assert b.window_s() == pytest.approx(3.0)
    assert b.share(8, healthy=1, starting=1, now=112.5) == 4
    assert b.share(8, healthy=1, starting=3, now=112.5) == 2
    assert b.share(3, healthy=1, starting=2, now=112.5) == 1  # never below one slot
    assert b.share(8, healthy=2, starting=0, now=112.5) == 8  # every sibling up: the whole limit
    assert b.share(8, healthy=1, starting=1, now=115.0) == 8  # a sibling lagging past the window is a slow one
    assert StartBurst(started_at=0.0, first_up_at=400.0).window_s() == SHARE_MAX_S
    assert StartBurst(started_at=0.0).share(8, healthy=0, starting=2, now=1.0) == 8  # none up yet: nothing to split


def _controller() -> Any:
    # the actor's own class, in process: its health and autoscale threads idle for an hour and find no replica
    return PoolController.__ray_metadata__.modified_class(3600.0)  # type: ignore[attr-defined]


def _replica(c: Any, rid: str, state: str, slots: int = 8) -> None:
    c._replicas[rid] = ReplicaInfo(replica_id=rid, model="m", fingerprint="f", engine="transformers", state=state,
                                   slots=slots)  # fmt: skip


def _limits(c: Any) -> dict[str, int]:
    return {r.replica_id: r.limit for r in c.sync(SyncRequest(model="m", client="a", siblings=2))}


def test_sync_publishes_the_share_while_a_sibling_starts_and_the_whole_limit_after() -> None:
    c = _controller()
    _replica(c, "m-r1", "healthy")
    _replica(c, "m-r2", "starting")
    now = time.monotonic()
    c._bursts["m"] = StartBurst(started_at=now - 12.0, first_up_at=now)
    assert _limits(c)["m-r1"] == 4  # two clients then take 2 each: half the first requests wait for m-r2
    c._replicas["m-r2"].state = "healthy"
    assert _limits(c) == {"m-r1": 8, "m-r2": 8}
    c._replicas["m-r2"].state = "starting"
    c._bursts["m"] = StartBurst(started_at=now - 30.0, first_up_at=now - 10.0)  # window 5 s, long past
    assert _limits(c)["m-r1"] == 8
    del c._bursts["m"]
    assert _limits(c)["m-r1"] == 8  # a replica starting outside a burst (a scale-out) takes nothing away


def test_a_parallel_start_opens_a_burst_that_its_first_healthy_replica_dates_and_that_closes_with_it() -> None:
    c = _controller()
    seen: list[StartBurst | None] = []
    gate = threading.Barrier(2)

    def add(model: str, node_id: str | None, wait_s: float) -> ReplicaInfo:
        gate.wait(timeout=10)  # both deploys are running at once
        seen.append(c._bursts.get(model))
        return ReplicaInfo(replica_id="x", model=model, fingerprint="f", engine="transformers")

    c._add_replica = add
    c._start_replicas("m", 2, parallel=True)
    assert len(seen) == 2 and seen[0] is not None and seen[0] is seen[1]
    assert "m" not in c._bursts  # the share ends when the burst's deploys have settled
    seen.clear()
    gate = threading.Barrier(1)
    c._start_replicas("m", 1, parallel=True)  # one replica: nothing to share
    c._start_replicas("m", 2, parallel=False)  # one after another: each is the only one starting
    assert seen == [None, None, None]
