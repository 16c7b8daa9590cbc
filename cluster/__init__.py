"""Ray bring-up, node inventory and placement of replicas on heterogeneous nodes."""

from __future__ import annotations

from cluster._inventory import GPU_MEMORY_RESOURCE, NODE_ID_LABEL, NodeInfo, detect_gpu_resources, inventory
from cluster._node_files import nodes_with_executable, nodes_with_paths, worker_checks
from cluster._placement import (
    Demand,
    busy_reasons,
    capacity,
    check_replicas,
    choose_node,
    consumed,
    demand_of,
    deployment_options,
    estimate_memory_gb,
    feasible_nodes,
    fits,
    place,
)
from cluster._ray import connect, job_working_dir, replica_runtime_env, runtime_env_of, starts_local_ray

__all__ = [
    "GPU_MEMORY_RESOURCE",
    "NODE_ID_LABEL",
    "Demand",
    "NodeInfo",
    "busy_reasons",
    "capacity",
    "check_replicas",
    "choose_node",
    "connect",
    "job_working_dir",
    "replica_runtime_env",
    "runtime_env_of",
    "starts_local_ray",
    "consumed",
    "demand_of",
    "deployment_options",
    "detect_gpu_resources",
    "estimate_memory_gb",
    "feasible_nodes",
    "fits",
    "inventory",
    "nodes_with_executable",
    "nodes_with_paths",
    "place",
    "worker_checks",
]
