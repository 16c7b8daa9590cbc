import dataclasses

import pytest

from schedulers import ReplicaView, RoutingRequest


def test_load_combines_outstanding_and_queue_depth() -> None:
    assert ReplicaView("r0", outstanding=3, queue_depth=5).load == 8
    assert ReplicaView("r0", outstanding=2).load == 2


def test_views_are_frozen() -> None:
    view = ReplicaView("r0", 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.outstanding = 2  # type: ignore[misc]
    req = RoutingRequest("m", "hello")
    assert req.est_tokens == 0 and ReplicaView("r0", 0).healthy
