"""Which nodes of the cluster see a set of paths: a framework's own interpreter (``frameworks.<name>.python``) or a
benchmark's media directories may exist on some nodes and not others. An actor started with a ``py_executable`` its
node lacks never starts (Ray retries the worker), and a client on a node without the media fails every sample it
reads, so actors are placed on nodes that have them and a path no node has is a user error before any work."""

from __future__ import annotations

import os
from collections.abc import Sequence

import ray


def _first_missing(paths: list[str], executable: bool) -> tuple[str | None, str]:
    import socket

    for p in paths:
        ok = os.path.isfile(p) and os.access(p, os.X_OK) if executable else os.path.exists(p)
        if not ok:
            return p, socket.gethostname()
    return None, socket.gethostname()


_missing = ray.remote(num_cpus=0)(_first_missing)


def _driver_node() -> str | None:
    """The node this driver runs on, whose filesystem it sees itself (None under Ray Client: it runs elsewhere)."""
    try:
        from ray.util.client import ray as client

        if client.is_connected():
            return None
    except ImportError:  # pragma: no cover - every Ray we support has Ray Client
        pass
    return ray.get_runtime_context().get_node_id()


def nodes_with_paths(
    paths: Sequence[str], *, executable: bool = False, timeout_s: float = 120.0
) -> tuple[list[str], list[str]]:
    """(ids of the alive nodes that have every path, ``"hostname (node id): no <path>"`` for each that does not),
    each other node asked by a zero-CPU task pinned to it, the driver's own in process; ``executable``: each path
    must be an executable file."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
    here = _driver_node()
    # the driver's own node is answered here: a pinned task there would wait for a worker process to start (~1 s,
    # on the critical path of every run with a framework in its own interpreter or local media)
    refs = {n: _missing.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)).remote(
        list(paths), executable) for n in nodes if n != here}  # fmt: skip
    answers = dict(zip(refs, ray.get(list(refs.values()), timeout=timeout_s), strict=True))
    if here in nodes:
        answers[here] = _first_missing(list(paths), executable)
    have, lack = [], []
    for node in nodes:
        missing, host = answers[node]
        if missing is None:
            have.append(node)
        else:
            lack.append(f"{host} (node {node[:8]}): no {missing}")
    return have, lack


@ray.remote(num_cpus=0)
def _worker_problem(python: str, ray_version: str, timeout_s: float) -> str | None:
    import socket
    import subprocess

    host = socket.gethostname()
    code = "import importlib.util as u, ray; print(ray.__version__, u.find_spec('omnieval') is not None)"
    try:
        p = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{host}: {python} did not run: {e}"
    if p.returncode != 0:
        lines = p.stderr.strip().splitlines() or [f"exit status {p.returncode}"]
        return f"{host}: {lines[-1]}"
    words = p.stdout.split()
    if len(words) < 2 or words[-2] != ray_version:
        return f"{host}: it imports ray {words[-2] if len(words) >= 2 else '?'}, the cluster runs {ray_version}"
    if words[-1] != "True":
        return f"{host}: it cannot import omnieval"
    return None


def worker_checks(python: str, nodes: Sequence[str], timeout_s: float = 120.0) -> list[ray.ObjectRef]:
    """Can ``python`` run this cluster's Ray workers on each of ``nodes`` (``ray`` at the cluster's version, and
    ``omnieval``, importable)? An actor whose interpreter lacks them never starts: Ray retries the worker for
    minutes and then says only that worker startup failed. One ref per node, each resolving to None or to
    ``"host: what the interpreter said"``; not waited here, so the check overlaps the actor's own start."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return [_worker_problem.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)).remote(
        python, ray.__version__, timeout_s) for n in nodes]  # fmt: skip


def nodes_with_executable(path: str, timeout_s: float = 120.0) -> tuple[list[str], list[str]]:
    """``nodes_with_paths`` for one interpreter."""
    return nodes_with_paths([path], executable=True, timeout_s=timeout_s)
