"""Node inventory from Ray: CPUs, GPUs, accelerator type and declared GPU memory per alive node."""

from __future__ import annotations

from typing import Any

import ray
from pydantic import BaseModel, ConfigDict, Field

GPU_MEMORY_RESOURCE = "omnieval_gpu_memory_gb"
"""Custom resource a node declares for its free accelerator memory (GiB), e.g. ``ray start --resources``."""


class NodeInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    node_id: str
    """Ray node id."""
    hostname: str
    """Node hostname."""
    alive: bool
    """Whether the node is alive."""
    cpus: float
    """Total logical CPUs."""
    gpus: float
    """Total GPUs."""
    accelerator_type: str | None
    """Accelerator type from Ray's ``accelerator_type:<T>`` resource."""
    gpu_memory_gb: float | None
    """Declared accelerator memory per GPU (GiB)."""
    available: dict[str, float] = Field(default_factory=dict)
    """Resources free right now."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Ray node labels."""


def _accel(resources: dict[str, float]) -> str | None:
    for k in resources:
        if k.startswith("accelerator_type:"):
            return k.split(":", 1)[1]
    return None


def inventory() -> list[NodeInfo]:
    """Alive nodes with their total and available resources."""
    avail_by_node: dict[str, dict[str, float]] = {}
    try:
        for n in ray._private.state.state._available_resources_per_node().items():  # noqa: SLF001
            avail_by_node[n[0]] = dict(n[1])
    except Exception:  # noqa: BLE001 - availability is advisory; totals are enough to place
        avail_by_node = {}
    out = []
    for n in ray.nodes():
        if not n.get("Alive"):
            continue
        res: dict[str, Any] = n.get("Resources", {})
        gpus = float(res.get("GPU", 0))
        mem = res.get(GPU_MEMORY_RESOURCE)
        out.append(
            NodeInfo(
                node_id=n["NodeID"],
                hostname=n.get("NodeManagerHostname", ""),
                alive=True,
                cpus=float(res.get("CPU", 0)),
                gpus=gpus,
                accelerator_type=_accel(res),
                gpu_memory_gb=(float(mem) / gpus) if mem and gpus else (float(mem) if mem else None),
                available=avail_by_node.get(n["NodeID"], {}),
                labels=dict(n.get("Labels", {}) or {}),
            )
        )
    return out
