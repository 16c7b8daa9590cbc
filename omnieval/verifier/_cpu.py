"""CPU topology for verifier workers: NUMA nodes from sysfs and the cgroup CPU quota (v2 ``cpu.max``, v1 CFS).

Why: llama.cpp decode is memory-bandwidth bound, so one process per NUMA node pinned to that node's CPUs keeps its
weights and KV cache in local memory; and in a container the CPU quota, not ``os.cpu_count()``, is what the
threads really get — oversubscribing it makes every thread stall on throttling. Every reader takes a ``root`` so
tests can point it at a fake tree.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

NODE_ROOT = "/sys/devices/system/node"
CGROUP_ROOT = "/sys/fs/cgroup"
PROC_CGROUP = "/proc/self/cgroup"


def parse_cpulist(text: str) -> list[int]:
    """``"0-3,8,10-11"`` -> ``[0, 1, 2, 3, 8, 10, 11]`` (the sysfs cpulist format); blank -> []."""
    out: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            out.update(range(int(lo), int(hi) + 1))
        else:
            out.add(int(part))
    return sorted(out)


def _affinity() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return set(range(os.cpu_count() or 1))


def numa_nodes(root: str | Path = NODE_ROOT, allowed: set[int] | None = None) -> dict[int, list[int]]:
    """NUMA node id -> CPUs this process may use there; nodes without usable CPUs are dropped.

    Without a sysfs node tree (non-Linux, some containers) everything allowed is one node 0.
    """
    allowed = _affinity() if allowed is None else allowed
    nodes: dict[int, list[int]] = {}
    base = Path(root)
    if base.is_dir():
        for d in base.iterdir():
            m = re.fullmatch(r"node(\d+)", d.name)
            if not m or not (d / "cpulist").is_file():
                continue
            cpus = [c for c in parse_cpulist((d / "cpulist").read_text()) if c in allowed]
            if cpus:
                nodes[int(m.group(1))] = cpus
    return dict(sorted(nodes.items())) or {0: sorted(allowed)}


def _v2_limit(path: Path) -> float | None:
    try:
        quota, period = (path / "cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return None
    return None if quota == "max" else int(quota) / int(period)


def _v1_limit(path: Path) -> float | None:
    try:
        quota = int((path / "cpu.cfs_quota_us").read_text())
        period = int((path / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if quota <= 0 or period <= 0 else quota / period


def _ancestors(root: Path, rel: str) -> list[Path]:
    """``root/rel`` and each parent up to ``root``: a limit set on any ancestor cgroup applies too."""
    parts = [p for p in rel.strip("/").split("/") if p]
    return [root.joinpath(*parts[:i]) for i in range(len(parts), -1, -1)]


def cgroup_cpu_limit(root: str | Path = CGROUP_ROOT, proc_cgroup: str | Path = PROC_CGROUP) -> float | None:
    """CPUs the cgroup quota allows (e.g. 2.5), the tightest over v2 and v1 and all ancestors; None = unlimited."""
    root = Path(root)
    v2_rel, v1_rel = "/", "/"
    try:
        for line in Path(proc_cgroup).read_text().splitlines():
            hid, ctrls, rel = line.split(":", 2)
            if hid == "0" and ctrls == "":
                v2_rel = rel
            elif "cpu" in ctrls.split(","):
                v1_rel = rel
    except (OSError, ValueError):
        pass
    limits: list[float] = []
    if (root / "cgroup.controllers").is_file():  # unified (v2) hierarchy mounted at root
        limits += [v for p in _ancestors(root, v2_rel) if (v := _v2_limit(p)) is not None]
    for ctrl in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
        if (root / ctrl).is_dir():
            # In a container the v1 cpu hierarchy is often mounted at the cgroup itself: try the path and the root.
            limits += [v for p in _ancestors(root / ctrl, v1_rel) if (v := _v1_limit(p)) is not None]
            break
    return min(limits) if limits else None


@dataclass(frozen=True)
class WorkerSlot:
    numa_node: int
    """NUMA node this worker is pinned to."""
    cpus: list[int]
    """CPUs of that node the worker may run on."""
    threads: int
    """llama.cpp threads for the worker's process."""


def plan_workers(
    requested: int,
    *,
    nodes: dict[int, list[int]] | None = None,
    cpu_limit: float | None = None,
    threads: int | None = None,
    node_root: str | Path = NODE_ROOT,
    cgroup_root: str | Path = CGROUP_ROOT,
    proc_cgroup: str | Path = PROC_CGROUP,
) -> list[WorkerSlot]:
    """``min(requested, NUMA nodes)`` workers, one per node, each with its share of the quota as threads.

    A quota of 2.5 CPUs over two workers gives each 1 thread (floor, at least 1); no quota gives each worker the
    CPUs of its node. An explicit ``threads`` overrides the computed value.
    """
    nodes = numa_nodes(node_root) if nodes is None else nodes
    if cpu_limit is None:
        cpu_limit = cgroup_cpu_limit(cgroup_root, proc_cgroup)
    n = max(1, min(requested, len(nodes)))
    ids = list(nodes)[:n]
    share = None if cpu_limit is None else max(1, math.floor(cpu_limit / n))
    out = []
    for nid in ids:
        cpus = nodes[nid]
        t = threads or max(1, min(len(cpus), share if share is not None else len(cpus)))
        out.append(WorkerSlot(numa_node=nid, cpus=list(cpus), threads=t))
    return out
