"""Which nodes of the cluster have a file: a framework's own interpreter (``frameworks.<name>.python``) is a path
on some nodes and not others, and an actor started with a ``py_executable`` that its node lacks never starts (Ray
retries the worker), so the run would hang instead of failing."""

from __future__ import annotations

import os

import ray


@ray.remote(num_cpus=0)
def _check(path: str) -> tuple[bool, str]:
    import socket

    return os.path.isfile(path) and os.access(path, os.X_OK), socket.gethostname()


def nodes_with_executable(path: str, timeout_s: float = 120.0) -> tuple[list[str], list[str]]:
    """(ids of the alive nodes where ``path`` is an executable file, ``"hostname (node id)"`` of those where it is
    not), each node asked by a zero-CPU task pinned to it."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
    refs = [_check.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)).remote(path)
            for n in nodes]  # fmt: skip
    have, lack = [], []
    for node, (ok, host) in zip(nodes, ray.get(refs, timeout=timeout_s), strict=True):
        (have.append(node) if ok else lack.append(f"{host} (node {node[:8]})"))
    return have, lack
