"""Ray bring-up, node inventory and placement of replicas on heterogeneous nodes."""

from __future__ import annotations

from cluster._inventory import GPU_MEMORY_RESOURCE, NodeInfo, inventory
from cluster._placement import choose_node, feasible_nodes, fits, replica_actor_options
from cluster._ray import connect

__all__ = [
    "GPU_MEMORY_RESOURCE",
    "NodeInfo",
    "choose_node",
    "connect",
    "feasible_nodes",
    "fits",
    "inventory",
    "replica_actor_options",
]
