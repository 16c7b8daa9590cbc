"""Node inventory from Ray: CPUs, GPUs, accelerator type and declared GPU memory (total and free) per alive node.

Ray knows GPU counts and (for NVIDIA) the accelerator type, but not GPU memory; nodes declare it as the custom
resource ``omnieval_gpu_memory_gb`` (``ray start --resources``, or ``detect_gpu_resources()`` for a local start) and
replicas consume it, so Ray's own accounting tells how much memory is still free on each node.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import ray
from pydantic import BaseModel, ConfigDict, Field

GPU_MEMORY_RESOURCE = "omnieval_gpu_memory_gb"
"""Custom resource a node declares for its accelerator memory (GiB, all GPUs together), e.g. ``ray start --resources``."""

NODE_ID_LABEL = "ray.io/node-id"
"""Label Ray puts on every node; placement pins replicas with it."""


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
    gpu_memory_free_gb: float | None = None
    """Declared accelerator memory not yet reserved by replicas (GiB, whole node)."""
    resources: dict[str, float] = Field(default_factory=dict)
    """All total resources (custom ones included)."""
    available: dict[str, float] = Field(default_factory=dict)
    """Resources free right now."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Ray node labels."""


def _accel(resources: dict[str, Any]) -> str | None:
    for k in resources:
        if k.startswith("accelerator_type:"):
            return k.split(":", 1)[1]
    return None


def _available_per_node() -> dict[str, dict[str, float]]:
    try:
        from ray._private.state import available_resources_per_node

        return {k: {r: float(v) for r, v in res.items()} for k, res in available_resources_per_node().items()}
    except Exception:  # noqa: BLE001 - availability is advisory; totals are enough to decide feasibility
        return {}


def inventory() -> list[NodeInfo]:
    """Alive nodes with their total and available resources."""
    avail_by_node = _available_per_node()
    out = []
    for n in ray.nodes():
        if not n.get("Alive"):
            continue
        res = {k: float(v) for k, v in (n.get("Resources") or {}).items()}
        gpus = res.get("GPU", 0.0)
        mem = res.get(GPU_MEMORY_RESOURCE)
        avail = avail_by_node.get(n["NodeID"], {})
        out.append(
            NodeInfo(
                node_id=n["NodeID"],
                hostname=n.get("NodeManagerHostname", ""),
                alive=True,
                cpus=res.get("CPU", 0.0),
                gpus=gpus,
                accelerator_type=_accel(res),
                gpu_memory_gb=(mem / gpus) if mem and gpus else (mem or None),
                gpu_memory_free_gb=avail.get(GPU_MEMORY_RESOURCE, 0.0) if mem else None,
                resources=res,
                available=avail,
                labels=dict(n.get("Labels") or {}),
            )
        )
    return out


def detect_gpu_resources() -> dict[str, float]:
    """``{omnieval_gpu_memory_gb: free GiB}`` of this host's NVIDIA GPUs (empty without ``nvidia-smi``).

    Meant for ``ray.init(resources=...)`` / ``ray start --resources`` so placement can compare a model's memory
    estimate with what the node really has free at start.
    """
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {}
    try:
        out = subprocess.run(
            [exe, "--query-gpu=memory.free", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    if out.returncode != 0:
        return {}
    mib = [float(x) for x in out.stdout.split() if x.strip().replace(".", "", 1).isdigit()]
    return {GPU_MEMORY_RESOURCE: round(sum(mib) / 1024, 1)} if mib else {}
