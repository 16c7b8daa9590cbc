"""Elastic pool on a real multi-node Ray cluster: a node joining mid-run gets a replica, surplus is released.

Each replica needs one ``elastic_slot`` custom resource; the head declares one, so at first only one replica fits.
Under sustained load the pool is saturated and the autoscaler reports it cannot grow; once ``Cluster.add_node``
adds a node with a slot, the controller's own autoscale loop (no test call) places a second replica there, the
dispatcher picks it up and it serves requests. When the load stops, the idle surplus replica is drained and removed
while the run is still registered; release removes the rest.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import ray
from cluster_testlib import PATIENT_GCS, PidTracker, kill_pids, require_engine, teardown_pool, tiny_model, wait_until
from pool_load import Pump
from ray.cluster_utils import Cluster

from pool import get_controller

pytestmark = [pytest.mark.ray, pytest.mark.slow]

SLOT = "elastic_slot"


@pytest.fixture
def elastic_cluster() -> Iterator[dict[str, Any]]:
    require_engine()
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 2, "resources": {SLOT: 1}, "_system_config": PATIENT_GCS}
    )
    tracker = PidTracker()
    try:
        ray.init(address=cluster.address, namespace="omnieval", log_to_driver=False, logging_level="WARNING")
        controller = get_controller(0.5, scale_in_idle_s=3.0, placement_wait_s=5.0)
        yield {"cluster": cluster, "controller": controller, "tracker": tracker}
    finally:
        pids = teardown_pool(tracker) if ray.is_initialized() else tracker.pids
        ray.shutdown()
        cluster.shutdown()
        kill_pids(pids)


@pytest.mark.timeout(420)
def test_scale_out_onto_joining_node_then_release_idle(elastic_cluster: dict[str, Any]) -> None:
    cluster, controller, tracker = elastic_cluster["cluster"], elastic_cluster["controller"], elastic_cluster["tracker"]
    model = tiny_model(
        "elastic", resources={"num_cpus": 0.5, "custom": {SLOT: 1}}, parallel=2, replicas=1, max_replicas=2
    )
    (first,) = ray.get(controller.ensure_model.remote(model, "run-elastic"))
    tracker.track(controller)
    assert first.node_id == cluster.head_node.node_id

    pump = Pump(controller, "elastic", concurrency=6, pool={"max_inflight_per_replica": 4}).start()
    try:
        # saturated, but no node has a free slot: the autoscaler says so instead of queueing a pending replica
        why = wait_until(
            lambda: ray.get(controller.autoscale_once.remote()).waiting.get("elastic"), 90, "saturation to be seen"
        )
        assert "busy" in why and f"0 free {SLOT} < 1" in why
        assert len(ray.get(controller.replicas.remote("elastic"))) == 1

        joined = cluster.add_node(num_cpus=1, resources={SLOT: 1})
        new = wait_until(
            lambda: next(
                (
                    r
                    for r in ray.get(controller.replicas.remote("elastic"))
                    if r.replica_id != first.replica_id and r.state == "healthy"
                ),
                None,
            ),
            120,
            "a second healthy replica",
        )
        tracker.track(controller)
        assert new.node_id == joined.node_id
        wait_until(lambda: pump.served_by(new.replica_id) >= 2, 90, "the new replica to serve requests")
        assert pump.served_by(first.replica_id) > 0
    finally:
        pump.stop()
    assert pump.errors == []

    # load gone: the surplus replica is drained and removed while the run still holds the model
    wait_until(lambda: len(ray.get(controller.replicas.remote("elastic"))) == 1, 60, "scale-in to one replica")
    assert ray.get(controller.users.remote()) == {"elastic": ["run-elastic"]}
    removed = ray.get(controller.release.remote("run-elastic"))
    assert len(removed) == 1 and ray.get(controller.replicas.remote()) == []
    retired = ray.get(controller.retired.remote())
    assert {first.replica_id, new.replica_id} <= set(retired)
    assert retired[new.replica_id].stats is not None and retired[new.replica_id].stats.completed >= 2
    assert retired[new.replica_id].info.node_id == joined.node_id
