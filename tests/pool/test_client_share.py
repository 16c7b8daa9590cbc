"""A replica's concurrency limit is split among the clients that have work for its model: all the run's clients
while they first report, then only those that did (a model whose few Records went to one client gets it all)."""

from __future__ import annotations

import time
from typing import Any

from pool._controller import PoolController
from pool._types import ReplicaInfo, ReplicaLoad, SyncRequest


def _controller() -> Any:
    c = PoolController.__ray_metadata__.modified_class(3600.0)  # type: ignore[attr-defined]
    c._replicas["m-r1"] = ReplicaInfo(replica_id="m-r1", model="m", fingerprint="f", engine="transformers",
                                      state="healthy", slots=8)  # fmt: skip
    return c


def _share(c: Any, client: str, active: bool = True) -> int:
    """The per-client cap a dispatcher derives from the reply (``Dispatcher._cap``)."""
    (info,) = c.sync(SyncRequest(model="m", client=client, active=active, siblings=2,
                                 loads=[ReplicaLoad(replica_id="m-r1", in_flight=1)]))  # fmt: skip
    return -(-info.limit // info.clients)


def test_the_runs_clients_share_from_the_first_sync_then_only_those_with_work() -> None:
    c = _controller()
    assert _share(c, "a") == 4  # b may be about to send too: half each from the start
    c._sibling_hint_until["m"] = time.monotonic() - 0.01  # every client has had its chance to report
    assert _share(c, "a") == 8  # b never had work for m: a takes the whole limit
    assert _share(c, "b") == 4  # b reports work after all: split again
    assert _share(c, "a") == 4


def test_the_hint_comes_back_when_the_models_work_restarts() -> None:
    c = _controller()
    _share(c, "a")
    c._sibling_hint_until["m"] = time.monotonic() - 0.01
    assert _share(c, "a") == 8
    _share(c, "a", active=False)  # a's work is done (its flush): nobody active for m
    assert _share(c, "a") == 4  # the next run's first sync splits among its siblings again
