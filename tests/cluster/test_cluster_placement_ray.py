"""Placement on a real multi-node Ray cluster with fake GPUs of mixed types, each replica a real CPU-only llama.cpp.

Nodes: head (CPUs only), an A100 node (2 GPUs, 160 GiB) and a V100 node (4 GPUs, 64 GiB). Ray cannot hand the
fake GPUs to llama.cpp, but it schedules by them exactly as it would real ones, so where each replica lands (its
own runtime node id, reported by the engine) is what a real cluster would do.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from cluster_testlib import (
    PATIENT_GCS,
    PidTracker,
    kill_pids,
    replica_pids,
    require_engine,
    teardown_pool,
    tiny_model,
    wait_until,
)
from ray.cluster_utils import Cluster

from cluster import GPU_MEMORY_RESOURCE, inventory, nodes_with_paths
from omnieval.core import PlacementError
from pool import get_controller

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture(scope="module")
def gpu_cluster() -> Iterator[dict[str, Any]]:
    require_engine()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "_system_config": PATIENT_GCS})
    tracker = PidTracker()
    try:
        a100 = cluster.add_node(
            num_cpus=1, num_gpus=2, resources={"accelerator_type:A100": 1, GPU_MEMORY_RESOURCE: 160}
        )
        v100 = cluster.add_node(num_cpus=1, num_gpus=4, resources={"accelerator_type:V100": 1, GPU_MEMORY_RESOURCE: 64})
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, namespace="omnieval", log_to_driver=False, logging_level="WARNING")
        controller = get_controller(2.0, placement_wait_s=3.0)
        yield {
            "controller": controller,
            "tracker": tracker,
            "head": cluster.head_node.node_id,
            "A100": a100.node_id,
            "V100": v100.node_id,
        }
    finally:
        pids = teardown_pool(tracker) if ray.is_initialized() else tracker.pids
        ray.shutdown()
        cluster.shutdown()
        kill_pids(pids)


def _deploy(env: dict[str, Any], name: str, resources: dict[str, Any], replicas: int = 1) -> list[Any]:
    controller = env["controller"]
    try:
        reps = ray.get(controller.ensure_model.remote(tiny_model(name, resources=resources, replicas=replicas), name))
    finally:
        env["tracker"].track(controller)
    return reps


def _release(env: dict[str, Any], name: str) -> None:
    ray.get(env["controller"].release.remote(name))


def test_paths_are_asked_of_every_other_node_by_a_task(gpu_cluster: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver answers for its own node (here told it lacks the path); the A100 and V100 nodes answer in tasks
    pinned to them, with the check's own code, so they have it."""
    import sys

    import cluster._node_files as nf

    monkeypatch.setattr(nf, "_first_missing", lambda paths, executable: (paths[0], "driver-host"))
    have, lack = nodes_with_paths([sys.prefix])
    assert sorted(have) == sorted([gpu_cluster["A100"], gpu_cluster["V100"]])
    assert lack == [f"driver-host (node {gpu_cluster['head'][:8]}): no {sys.prefix}"]


def test_inventory_reports_fake_gpus(gpu_cluster: dict[str, Any]) -> None:
    nodes = {n.node_id: n for n in inventory()}
    a100, v100 = nodes[gpu_cluster["A100"]], nodes[gpu_cluster["V100"]]
    assert (a100.gpus, a100.accelerator_type, a100.gpu_memory_gb, a100.gpu_memory_free_gb) == (2, "A100", 80, 160)
    assert (v100.gpus, v100.accelerator_type, v100.gpu_memory_gb) == (4, "V100", 16)
    assert nodes[gpu_cluster["head"]].gpus == 0


def test_replica_lands_on_its_accelerator_and_reserves_memory(gpu_cluster: dict[str, Any]) -> None:
    res = {"num_cpus": 1, "num_gpus": 1, "accelerator_type": "A100", "memory_gb": 40}
    (rep,) = _deploy(gpu_cluster, "on-a100", res)
    try:
        assert rep.state == "healthy" and rep.node_id == gpu_cluster["A100"]
        a100 = next(n for n in inventory() if n.node_id == gpu_cluster["A100"])
        assert a100.gpu_memory_free_gb == 120 and a100.available.get("GPU") == 1
    finally:
        _release(gpu_cluster, "on-a100")


def test_memory_need_picks_the_node_whose_gpus_hold_it(gpu_cluster: dict[str, Any]) -> None:
    # 30 GiB fits one 80 GiB A100 but no 16 GiB V100, even though the V100 node has more GPUs free
    (rep,) = _deploy(gpu_cluster, "needs-30g", {"num_cpus": 1, "num_gpus": 1, "memory_gb": 30})
    try:
        assert rep.node_id == gpu_cluster["A100"]
    finally:
        _release(gpu_cluster, "needs-30g")


def test_tensor_parallel_4_gives_the_engine_server_all_4_gpus_of_its_node(gpu_cluster: dict[str, Any]) -> None:
    """Ray Serve LLM's layout for a server engine: one bundle holds the replica's 4 GPUs on one node, and the engine's
    own server process (here llama-server) is started with CUDA_VISIBLE_DEVICES naming exactly those 4."""
    (rep,) = _deploy(gpu_cluster, "tp4", {"num_cpus": 1, "num_gpus": 1, "tensor_parallel_size": 4})
    try:
        assert rep.node_id == gpu_cluster["V100"]
        v100 = next(n for n in inventory() if n.node_id == gpu_cluster["V100"])
        assert v100.available.get("GPU", 0) == 0  # all four ranks' GPUs are held by this replica
        (pid,) = replica_pids(gpu_cluster["controller"])
        env = dict(kv.split("=", 1) for kv in Path(f"/proc/{pid}/environ").read_text().split("\0") if "=" in kv)
        assert sorted(env["CUDA_VISIBLE_DEVICES"].split(",")) == ["0", "1", "2", "3"]
    finally:
        _release(gpu_cluster, "tp4")


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("res", "needle"),
    [
        ({"num_cpus": 1, "num_gpus": 1, "accelerator_type": "H100"}, "!= H100"),
        ({"num_cpus": 1, "num_gpus": 1, "memory_gb": 100}, "< 100 GiB needed"),
        ({"num_cpus": 1, "num_gpus": 1, "tensor_parallel_size": 8}, "4 GPUs < 8 (tensor_parallel_size 8 on one node)"),
    ],
    ids=["absent-accelerator", "too-much-memory", "tp8"],
)
def test_infeasible_request_fails_fast_with_reasons(gpu_cluster: dict[str, Any], res: dict, needle: str) -> None:
    with pytest.raises(PlacementError, match="no node can host") as ei:
        _deploy(gpu_cluster, "infeasible", res)
    assert needle in str(ei.value) and gpu_cluster["V100"][:8] in str(ei.value)
    _release(gpu_cluster, "infeasible")
    assert ray.get(gpu_cluster["controller"].replicas.remote()) == []


@pytest.mark.timeout(60)
def test_more_replicas_than_ever_fit_fail_before_any_deploy(gpu_cluster: dict[str, Any]) -> None:
    # one 2-GPU A100 replica fits the A100 node; two never can, so nothing is deployed and nothing waits
    res = {"num_cpus": 0.5, "num_gpus": 2, "accelerator_type": "A100"}
    with pytest.raises(PlacementError, match=r"model 'two-a100': replicas: 2 need .* at most 1 at once") as ei:
        _deploy(gpu_cluster, "two-a100", res, replicas=2)
    assert f"node {gpu_cluster['A100'][:8]}" in str(ei.value) and "busy" not in str(ei.value)
    assert ray.get(gpu_cluster["controller"].replicas.remote("two-a100")) == []


@pytest.mark.timeout(120)
def test_feasible_but_busy_fails_after_bounded_wait(gpu_cluster: dict[str, Any]) -> None:
    # the A100 node fits one 2-GPU replica at a time; while one model holds it, another waits placement_wait_s (3 s)
    # and then says why
    res = {"num_cpus": 0.5, "num_gpus": 2, "accelerator_type": "A100"}
    (first,) = _deploy(gpu_cluster, "a100-first", res)
    assert first.node_id == gpu_cluster["A100"]
    try:
        with pytest.raises(PlacementError, match="busy after waiting 3s") as ei:
            _deploy(gpu_cluster, "a100-second", res)
        assert "free GPUs < 2" in str(ei.value)
        assert ray.get(gpu_cluster["controller"].replicas.remote("a100-second")) == []
    finally:
        _release(gpu_cluster, "a100-second")
        _release(gpu_cluster, "a100-first")
    wait_until(
        lambda: next(n for n in inventory() if n.node_id == gpu_cluster["A100"]).available.get("GPU") == 2,
        30,
        "the A100 node's GPUs to be free again",
    )
