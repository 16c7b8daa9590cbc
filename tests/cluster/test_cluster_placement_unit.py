"""Placement decisions on hand-built node inventories (no Ray): fit, best-fit choice, TP bundles, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster import (
    GPU_MEMORY_RESOURCE,
    NODE_ID_LABEL,
    Demand,
    NodeInfo,
    capacity,
    check_replicas,
    choose_node,
    consumed,
    demand_of,
    deployment_options,
    estimate_memory_gb,
    feasible_nodes,
    fits,
)
from omnieval.core import ModelConfig, PlacementError, ResourceConfig


def node(
    nid: str, *, cpus: float = 8, gpus: float = 0, accel: str | None = None, mem: float | None = None, **avail: float
) -> NodeInfo:
    res = {"CPU": cpus, "GPU": gpus, **({GPU_MEMORY_RESOURCE: mem} if mem else {})}
    if accel:
        res[f"accelerator_type:{accel}"] = 1.0
    free = {**res, **avail}  # what is still available: totals unless overridden
    return NodeInfo(
        node_id=nid, hostname=nid, alive=True, cpus=cpus, gpus=gpus, accelerator_type=accel,
        gpu_memory_gb=(mem / gpus) if mem and gpus else None,
        gpu_memory_free_gb=free.get(GPU_MEMORY_RESOURCE) if mem else None, resources=res, available=free,
    )  # fmt: skip


A100 = node("a100", gpus=2, accel="A100", mem=160)
V100 = node("v100", gpus=4, accel="V100", mem=64)
CPU = node("cpu", cpus=16)
NODES = [CPU, A100, V100]


def test_accelerator_and_memory_filter() -> None:
    assert [n.node_id for n in feasible_nodes({"num_gpus": 1, "accelerator_type": "V100"}, NODES)] == ["v100"]
    # 30 GiB fits an 80 GiB A100 but not a 16 GiB V100 GPU
    assert [n.node_id for n in feasible_nodes({"num_gpus": 1, "memory_gb": 30}, NODES)] == ["a100"]
    assert "accelerator V100 != A100" in (fits(V100, {"num_gpus": 1, "accelerator_type": "A100"}) or "")


@pytest.mark.parametrize(
    ("res", "needle"),
    [
        ({"num_gpus": 1, "accelerator_type": "H100"}, "accelerator A100 != H100"),
        ({"num_gpus": 1, "memory_gb": 100}, "80 GiB accelerator memory on 1 GPUs < 100 GiB"),
        ({"num_gpus": 1, "tensor_parallel_size": 8}, "4 GPUs < 8 (tensor_parallel_size 8 on one node)"),
        ({"num_cpus": 1, "custom": {"replica_slot": 1}}, "0 replica_slot < 1"),
    ],
)
def test_infeasible_raises_with_every_nodes_reason(res: dict, needle: str) -> None:
    with pytest.raises(PlacementError) as ei:
        feasible_nodes(res, NODES)
    msg = str(ei.value)
    assert needle in msg and "node cpu" in msg and "node v100" in msg


def test_tensor_parallel_counts_engine_kwargs_and_defaults_one_gpu_per_rank() -> None:
    d = Demand.of({"num_cpus": 1}, {"tensor_parallel_size": 4})
    assert (d.tensor_parallel_size, d.gpus_per_rank, d.total_gpus) == (4, 1.0, 4.0)
    assert [n.node_id for n in feasible_nodes(d, NODES)] == ["v100"]


def test_choose_best_fit_for_gpus_and_spread_for_cpus() -> None:
    # one GPU: the 2-GPU node is the tighter fit, keeping the 4-GPU node whole for tensor parallelism
    assert choose_node({"num_gpus": 1}, NODES).node_id == "a100"  # type: ignore[union-attr]
    small = node("small", cpus=2)
    assert choose_node({"num_cpus": 1}, [small, CPU]).node_id == "cpu"  # type: ignore[union-attr]


def test_choose_none_when_feasible_but_busy_and_reservations_count() -> None:
    busy = node("a100", gpus=2, accel="A100", mem=160, GPU=0.0)
    assert choose_node({"num_gpus": 1, "accelerator_type": "A100"}, [busy]) is None
    reserved = {"a100": {"GPU": 2.0}}
    assert choose_node({"num_gpus": 1, "accelerator_type": "A100"}, [A100], reserved) is None
    assert choose_node({"num_gpus": 1, "accelerator_type": "A100"}, [A100], {"a100": {"GPU": 1.0}}) is not None
    low_mem = node("a100", gpus=2, accel="A100", mem=160, omnieval_gpu_memory_gb=20.0)
    assert "20 GiB free accelerator memory < 40 GiB" in (
        fits(low_mem, {"num_gpus": 1, "memory_gb": 40}, use_available=True) or ""
    )


def test_deployment_options_single_rank_pins_node_and_consumes_memory() -> None:
    opts = deployment_options({"num_cpus": 1, "num_gpus": 1, "accelerator_type": "A100", "memory_gb": 40}, A100)
    actor = opts["ray_actor_options"]
    assert actor["label_selector"] == {NODE_ID_LABEL: "a100"}
    assert actor["accelerator_type"] == "A100" and actor["num_gpus"] == 1
    assert actor["resources"] == {GPU_MEMORY_RESOURCE: 40}
    assert "placement_group_bundles" not in opts


def test_deployment_options_tensor_parallel_one_bundle_with_every_rank_on_node() -> None:
    """The engine's server process inherits the bundle's CUDA_VISIBLE_DEVICES: all N ranks' GPUs, on one node."""
    opts = deployment_options({"num_cpus": 1, "num_gpus": 1, "tensor_parallel_size": 4, "memory_gb": 40}, V100)
    assert opts == {"ray_actor_options": {"num_cpus": 1.0, "num_gpus": 4.0, "resources": {GPU_MEMORY_RESOURCE: 40},
                                          "label_selector": {NODE_ID_LABEL: "v100"}}}  # fmt: skip
    assert consumed({"num_gpus": 1, "tensor_parallel_size": 4}, V100) == {"CPU": 1.0, "GPU": 4.0}
    assert Demand.of({"num_cpus": 1}, {"tp_size": 2}).total_gpus == 2.0  # SGLang's name counts too


def test_memory_estimate_from_local_weights_is_lenient(tmp_path: Path) -> None:
    w = tmp_path / "m.gguf"
    w.write_bytes(b"\0" * (8 << 20))
    cfg = ModelConfig(name="m", source={"kind": "path", "path": str(w)}, resources={"num_gpus": 1})
    est = estimate_memory_gb(cfg)
    assert est is not None and 0 < est < 0.01
    d = demand_of(cfg)
    assert d.memory_gb == est and not d.memory_strict
    no_mem = node("gpu", gpus=1)  # declares no memory: an estimate does not exclude it, a declared need does
    assert fits(no_mem, d) is None
    assert "declares no" in (fits(no_mem, {"num_gpus": 1, "memory_gb": 1}) or "")
    assert demand_of(cfg.model_copy(update={"resources": ResourceConfig(num_cpus=1)})).memory_gb is None


def test_capacity_counts_whole_replicas_by_totals_whatever_is_busy() -> None:
    assert capacity({"num_cpus": 1}, node("small", cpus=2, CPU=0)) == 2  # by totals: what is busy now frees later
    assert capacity({"num_cpus": 0.1}, node("small", cpus=1)) == 10  # no float floor to 9
    assert capacity({"num_cpus": 1, "num_gpus": 2, "accelerator_type": "A100"}, A100) == 1
    assert capacity({"num_cpus": 1, "num_gpus": 1, "memory_gb": 60}, A100) == 2  # 160 GiB / 60 on 2 GPUs
    assert capacity({"num_cpus": 1, "num_gpus": 1}, CPU) == 0  # cannot host one
    assert capacity({"num_cpus": 0}, CPU) == float("inf")


def test_more_replicas_than_the_cluster_holds_fail_at_once_naming_each_node() -> None:
    check_replicas({"num_cpus": 1}, 18, "m", [node("small", cpus=2), CPU])  # 2 + 16 fit
    with pytest.raises(PlacementError) as ei:
        check_replicas({"num_cpus": 1}, 3, "m", [node("small", cpus=2)])
    assert str(ei.value) == (
        "model 'm': replicas: 3 need num_cpus=1 each, but the cluster can hold at most 2 at once "
        "(node small (small): 2); lower replicas or resources, or add a node that fits"
    )
    with pytest.raises(PlacementError, match=r"no node can host a replica needing num_cpus=1, num_gpus=1 .*0 GPUs < 1"):
        check_replicas({"num_cpus": 1, "num_gpus": 1}, 1, "m", [CPU])
