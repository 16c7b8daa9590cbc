"""Placement of replicas on heterogeneous nodes: only where they fit, and a clear error at once when none can."""

from __future__ import annotations

from typing import Any

from cluster._inventory import GPU_MEMORY_RESOURCE, NodeInfo, inventory
from omnieval.errors import PlacementError


def fits(node: NodeInfo, res: dict[str, Any], *, use_available: bool = False) -> str | None:
    """None if ``node`` can host a replica with resources ``res``; otherwise the reason it cannot."""
    want_cpu = float(res.get("num_cpus", 1.0))
    want_gpu = float(res.get("num_gpus", 0.0))
    accel = res.get("accelerator_type")
    mem = res.get("memory_gb")
    cpus = node.available.get("CPU", 0.0) if use_available else node.cpus
    gpus = node.available.get("GPU", 0.0) if use_available else node.gpus
    if accel and node.accelerator_type != accel:
        return f"accelerator {node.accelerator_type or 'none'} != {accel}"
    if cpus < want_cpu:
        return f"{cpus:g} CPUs < {want_cpu:g}"
    if gpus < want_gpu:
        return f"{gpus:g} GPUs < {want_gpu:g}"
    if mem and want_gpu:
        per_gpu = node.gpu_memory_gb
        if per_gpu is None:
            return f"node declares no {GPU_MEMORY_RESOURCE}"
        if per_gpu * max(want_gpu, 1.0) < float(mem):
            return f"{per_gpu * max(want_gpu, 1.0):g} GiB accelerator memory < {float(mem):g} GiB needed"
    return None


def feasible_nodes(res: dict[str, Any], nodes: list[NodeInfo] | None = None) -> list[NodeInfo]:
    """Nodes whose total resources can host the replica; raises ``PlacementError`` listing why none can."""
    nodes = inventory() if nodes is None else nodes
    ok = [n for n in nodes if fits(n, res) is None]
    if not ok:
        reasons = "; ".join(f"{n.hostname or n.node_id[:8]}: {fits(n, res)}" for n in nodes) or "no alive nodes"
        raise PlacementError(
            f"no node can host a replica needing {_fmt(res)} ({reasons}); "
            "lower resources/memory_gb, drop accelerator_type, or add a node that fits"
        )
    return ok


def choose_node(res: dict[str, Any], nodes: list[NodeInfo] | None = None) -> NodeInfo:
    """The feasible node with most free capacity of the scarce resource (GPUs, then CPUs)."""
    ok = feasible_nodes(res, nodes)
    free_now = [n for n in ok if fits(n, res, use_available=True) is None] or ok
    key = "GPU" if float(res.get("num_gpus", 0)) > 0 else "CPU"
    return max(free_now, key=lambda n: (n.available.get(key, 0.0), n.node_id))


def _fmt(res: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in res.items() if v not in (None, 0, 0.0)) or "no resources"


def replica_actor_options(res: dict[str, Any], node_id: str | None = None) -> dict[str, Any]:
    """Serve ``ray_actor_options`` for one replica; checks feasibility first so an impossible request fails fast."""
    nodes = inventory()
    if node_id is None:
        node = choose_node(res, nodes)
    else:
        node = next((n for n in nodes if n.node_id == node_id), None)
        if node is None or fits(node, res):
            raise PlacementError(f"node {node_id} cannot host the replica: {fits(node, res) if node else 'not alive'}")
    opts: dict[str, Any] = {"num_cpus": float(res.get("num_cpus", 1.0)), "num_gpus": float(res.get("num_gpus", 0.0))}
    if res.get("accelerator_type"):
        opts["accelerator_type"] = res["accelerator_type"]
    # Pin to the chosen node: Ray labels every node with its id.
    opts["label_selector"] = {"ray.io/node-id": node.node_id}
    return opts
