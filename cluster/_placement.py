"""Placement of replicas on heterogeneous nodes: only where they fit, and a clear error at once when none can.

A replica's ``Demand`` (CPUs, GPUs per tensor-parallel rank × ranks, accelerator type, accelerator memory, custom
resources) is checked against every node's *totals* first: if no node could ever host it, ``PlacementError`` names
each node's reason immediately instead of leaving a Serve deployment pending forever. Among feasible nodes, one with
room *now* (Ray's available resources minus the controller's own in-flight reservations) is chosen and the replica
is pinned to it by node-id label; a tensor-parallel replica's GPUs are one bundle on that node (see
``deployment_options``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster._inventory import GPU_MEMORY_RESOURCE, NODE_ID_LABEL, NodeInfo, inventory
from omnieval.core import ModelConfig, PlacementError

MEMORY_OVERHEAD = 1.2
"""Weights size × this = the memory estimate when a model declares none (runtime buffers + a small KV cache)."""

Reserved = dict[str, dict[str, float]]
"""node id → resource → amount promised to replicas still starting (not yet visible in Ray's availability)."""


@dataclass(frozen=True)
class Demand:
    """What one replica needs on a single node."""

    num_cpus: float = 1.0
    gpus_per_rank: float = 0.0
    tensor_parallel_size: int = 1
    accelerator_type: str | None = None
    memory_gb: float | None = None
    memory_strict: bool = True
    """True when the user declared ``memory_gb`` (a node that declares no memory cannot host it); False for an
    estimate from the weights size (checked only against nodes that declare memory)."""
    custom: dict[str, float] = field(default_factory=dict)

    @property
    def total_gpus(self) -> float:
        return self.gpus_per_rank * self.tensor_parallel_size

    @classmethod
    def of(cls, res: dict[str, Any] | Demand, engine_kwargs: dict[str, Any] | None = None) -> Demand:
        """From a ``ResourceConfig`` dict; ``engine_kwargs.tensor_parallel_size`` (vLLM/SGLang style) counts too."""
        if isinstance(res, Demand):
            return res
        kw = engine_kwargs or {}
        tp = max(
            int(res.get("tensor_parallel_size") or 1), int(kw.get("tensor_parallel_size") or kw.get("tp_size") or 1)
        )
        gpus = float(res.get("num_gpus") or 0.0)
        if tp > 1 and gpus == 0:
            gpus = 1.0  # a tensor-parallel rank is a GPU
        mem, cpus = res.get("memory_gb"), res.get("num_cpus")
        return cls(
            num_cpus=1.0 if cpus is None else float(cpus),
            gpus_per_rank=gpus,
            tensor_parallel_size=tp,
            accelerator_type=res.get("accelerator_type") or None,
            memory_gb=float(mem) if mem else None,
            custom={k: float(v) for k, v in (res.get("custom") or {}).items()},
        )

    def describe(self) -> str:
        parts = [f"num_cpus={self.num_cpus:g}"]
        if self.total_gpus:
            parts.append(f"num_gpus={self.total_gpus:g}")
        if self.tensor_parallel_size > 1:
            parts.append(f"tensor_parallel_size={self.tensor_parallel_size} (one node)")
        if self.accelerator_type:
            parts.append(f"accelerator_type={self.accelerator_type}")
        if self.memory_gb:
            parts.append(f"memory_gb={self.memory_gb:g}{'' if self.memory_strict else ' (estimated)'}")
        parts += [f"{k}={v:g}" for k, v in self.custom.items()]
        return ", ".join(parts)


def estimate_memory_gb(model: ModelConfig) -> float | None:
    """Accelerator memory a GPU replica needs: the declared ``memory_gb``, else weights size × ``MEMORY_OVERHEAD``
    for local weights (other sources are unknown until downloaded, so None)."""
    if model.resources.memory_gb:
        return float(model.resources.memory_gb)
    if model.source.kind != "path":
        return None
    p = Path(model.source.path).expanduser()
    try:
        if p.is_file():
            size = p.stat().st_size
        elif p.is_dir():
            size = sum(f.stat().st_size for f in p.rglob("*") if f.suffix in {".safetensors", ".bin", ".gguf", ".pt"})
        else:
            return None
    except OSError:
        return None
    return round(size / 2**30 * MEMORY_OVERHEAD, 3) if size else None


def demand_of(model: ModelConfig) -> Demand:
    """The replica demand of a model, memory estimated from local weights when not declared."""
    d = Demand.of(model.resources.model_dump(), model.engine_kwargs)
    if d.memory_gb is None and d.total_gpus > 0:
        est = estimate_memory_gb(model)
        if est:
            d = Demand(**{**d.__dict__, "memory_gb": est, "memory_strict": False})
    return d


def _free(node: NodeInfo, key: str, reserved: Reserved | None) -> float:
    return node.available.get(key, 0.0) - (reserved or {}).get(node.node_id, {}).get(key, 0.0)


def fits(
    node: NodeInfo, res: dict[str, Any] | Demand, *, use_available: bool = False, reserved: Reserved | None = None
) -> str | None:
    """None if ``node`` can host the replica (by totals, or by what is free now); otherwise the reason it cannot."""
    d = Demand.of(res)

    def have(key: str, total: float) -> float:
        return _free(node, key, reserved) if use_available else total

    free = "free " if use_available else ""
    if d.accelerator_type and node.accelerator_type != d.accelerator_type:
        return f"accelerator {node.accelerator_type or 'none'} != {d.accelerator_type}"
    if (cpus := have("CPU", node.cpus)) < d.num_cpus:
        return f"{cpus:g} {free}CPUs < {d.num_cpus:g}"
    if (gpus := have("GPU", node.gpus)) < d.total_gpus:
        tp = f" (tensor_parallel_size {d.tensor_parallel_size} on one node)" if d.tensor_parallel_size > 1 else ""
        return f"{gpus:g} {free}GPUs < {d.total_gpus:g}{tp}"
    if d.memory_gb and d.total_gpus:
        if node.gpu_memory_gb is None:
            if d.memory_strict:
                return (
                    f"node declares no {GPU_MEMORY_RESOURCE} (ray start --resources='{{\"{GPU_MEMORY_RESOURCE}\": N}}')"
                )
        else:
            cap = node.gpu_memory_gb * max(d.total_gpus, 1.0)
            if cap < d.memory_gb:
                return f"{cap:g} GiB accelerator memory on {max(d.total_gpus, 1.0):g} GPUs < {d.memory_gb:g} GiB needed"
            if use_available and (m := _free(node, GPU_MEMORY_RESOURCE, reserved)) < d.memory_gb:
                return f"{m:g} GiB free accelerator memory < {d.memory_gb:g} GiB"
    for k, v in d.custom.items():
        if (h := have(k, node.resources.get(k, 0.0))) < v:
            return f"{h:g} {free}{k} < {v:g}"
    return None


def feasible_nodes(res: dict[str, Any] | Demand, nodes: list[NodeInfo] | None = None) -> list[NodeInfo]:
    """Nodes whose total resources can host the replica; raises ``PlacementError`` listing why none can."""
    d = Demand.of(res)
    nodes = inventory() if nodes is None else nodes
    ok = [n for n in nodes if fits(n, d) is None]
    if not ok:
        reasons = "; ".join(f"node {n.node_id[:8]} ({n.hostname}): {fits(n, d)}" for n in nodes) or "no alive nodes"
        raise PlacementError(
            f"no node can host a replica needing {d.describe()} ({reasons}); "
            "lower resources/memory_gb/tensor_parallel_size, drop accelerator_type, or add a node that fits"
        )
    return ok


def capacity(res: dict[str, Any] | Demand, node: NodeInfo) -> float:
    """How many replicas of ``res`` ``node`` could hold at once by its totals (inf when they take none of its
    resources); 0 when it cannot host even one."""
    d = Demand.of(res)
    if fits(node, d) is not None:
        return 0.0
    totals = {**node.resources, "CPU": node.cpus, "GPU": node.gpus}
    # the epsilon keeps 1.0 / 0.1 CPUs from flooring to 9
    return float(
        min((math.floor(totals.get(k, 0.0) / v + 1e-9) for k, v in consumed(d, node).items()), default=math.inf)
    )


def check_replicas(
    res: dict[str, Any] | Demand, replicas: int, model: str, nodes: list[NodeInfo] | None = None
) -> None:
    """Raise ``PlacementError`` at once when the cluster, even empty, could never hold ``replicas`` replicas at once.

    Without it a suite asking for more replicas than fit deploys those that do, waits the placement timeout for room
    that cannot come, and only then fails.
    """
    d = Demand.of(res)
    nodes = inventory() if nodes is None else nodes
    ok = feasible_nodes(d, nodes)  # none fits even one: that error, with each node's reason
    per_node = {n.node_id: capacity(d, n) for n in ok}
    if sum(per_node.values()) >= replicas:
        return
    where = "; ".join(f"node {n.node_id[:8]} ({n.hostname}): {per_node[n.node_id]:g}" for n in ok)
    raise PlacementError(
        f"model {model!r}: replicas: {replicas} need {d.describe()} each, but the cluster can hold at most "
        f"{sum(per_node.values()):g} at once ({where}); lower replicas or resources, or add a node that fits"
    )


def choose_node(
    res: dict[str, Any] | Demand, nodes: list[NodeInfo] | None = None, reserved: Reserved | None = None
) -> NodeInfo | None:
    """A feasible node with room now, or None when all feasible nodes are busy; ``PlacementError`` if none is feasible.

    GPU replicas go best-fit (fewest free GPUs that suffice) so large nodes stay whole for tensor-parallel replicas;
    CPU replicas spread to the node with most free CPUs.
    """
    d = Demand.of(res)
    ok = feasible_nodes(d, nodes)
    free_now = [n for n in ok if fits(n, d, use_available=True, reserved=reserved) is None]
    if not free_now:
        return None
    if d.total_gpus > 0:
        return min(free_now, key=lambda n: (_free(n, "GPU", reserved), n.node_id))
    return max(free_now, key=lambda n: (_free(n, "CPU", reserved), n.node_id))


def busy_reasons(res: dict[str, Any] | Demand, nodes: list[NodeInfo], reserved: Reserved | None = None) -> str:
    """Why each feasible node has no room right now (for the error after waiting)."""
    d = Demand.of(res)
    return "; ".join(
        f"node {n.node_id[:8]}: {fits(n, d, use_available=True, reserved=reserved)}"
        for n in nodes
        if fits(n, d) is None
    )


def consumed(res: dict[str, Any] | Demand, node: NodeInfo) -> dict[str, float]:
    """Ray resources the replica takes on ``node`` (what a reservation must hold until Ray accounts for it)."""
    d = Demand.of(res)
    out = {"CPU": d.num_cpus, "GPU": d.total_gpus, **d.custom}
    if d.memory_gb and d.total_gpus and node.gpu_memory_gb is not None:
        out[GPU_MEMORY_RESOURCE] = d.memory_gb
    return {k: v for k, v in out.items() if v}


def deployment_options(res: dict[str, Any] | Demand, node: NodeInfo) -> dict[str, Any]:
    """``Deployment.options(**...)`` placing one replica on ``node``.

    One bundle, pinned to the node by a label selector, holds every GPU of the replica (all tensor-parallel ranks):
    the replica actor runs no model itself, its engine's own server process does, and it inherits the
    ``CUDA_VISIBLE_DEVICES`` Ray sets from that bundle, so a TP-N vLLM/SGLang server sees exactly its N GPUs and
    starts its ranks itself (vLLM's ``mp`` executor, SGLang's workers). A placement group of one-GPU bundles would
    suit engines whose ranks are Ray actors; a server subprocess cannot join one.
    """
    d = Demand.of(res)
    extra = {k: v for k, v in consumed(d, node).items() if k not in ("CPU", "GPU")}
    actor: dict[str, Any] = {"num_cpus": d.num_cpus, "num_gpus": d.total_gpus}
    if extra:
        actor["resources"] = extra
    if d.accelerator_type:
        actor["accelerator_type"] = d.accelerator_type
    return {"ray_actor_options": {**actor, "label_selector": {NODE_ID_LABEL: node.node_id}}}


def place(
    res: dict[str, Any] | Demand, node_id: str | None = None, reserved: Reserved | None = None
) -> tuple[NodeInfo, dict[str, Any]] | None:
    """(node, deployment options) for one replica now, or None while every fitting node (or ``node_id``) is busy.

    Raises ``PlacementError`` at once when no node (or not ``node_id``) could ever host it.
    """
    d = Demand.of(res)
    nodes = inventory()
    if node_id is None:
        node = choose_node(d, nodes, reserved)
        return None if node is None else (node, deployment_options(d, node))
    node = next((n for n in nodes if n.node_id == node_id), None)
    if node is None or (why := fits(node, d)):
        raise PlacementError(
            f"node {node_id} cannot host a replica needing {d.describe()}: {why if node else 'not alive'}"
        )
    if fits(node, d, use_available=True, reserved=reserved):
        return None
    return node, deployment_options(d, node)
