"""CPU seconds from the kernel's own accounting (``/proc``): an engine's processes and its node's.

Why: an engine below its calibrated rate was either starved of CPU by work sharing its node (clients, framework
actors, other engines, Ray) or had its cores and was slow itself; only the CPU each actually got tells which.
Linux only; elsewhere every figure is None and the bench says it cannot tell.
"""

from __future__ import annotations

import os
from pathlib import Path

_PROC = Path("/proc")


def usable_cores() -> int:
    """Cores this process may run on (its affinity: a container's or ``taskset``'s limit, not the machine's)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def _ticks() -> float:
    return float(os.sysconf("SC_CLK_TCK"))


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()  # the command name may hold spaces and parentheses: fields follow the last


def process_tree_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of ``pid`` and of every process below it, the live ones and those already reaped
    (vLLM's engine core and llama.cpp's threads run under the server the replica started); None when ``pid`` is
    gone or there is no ``/proc``."""
    root = _stat_fields(pid)
    if root is None:
        return None
    children: dict[int, list[int]] = {}
    fields: dict[int, list[str]] = {pid: root}
    for d in _PROC.iterdir():
        if not d.name.isdigit() or int(d.name) == pid:
            continue
        f = _stat_fields(int(d.name))
        if f is not None:
            fields[int(d.name)] = f
            children.setdefault(int(f[1]), []).append(int(d.name))  # field 4: the parent's pid
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        f = fields[p]
        total += int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])  # utime stime cutime cstime (fields 14-17)
        todo += children.get(p, [])
    return total / _ticks()


def node_cpu_s() -> float | None:
    """Busy CPU seconds of this node since boot, all CPUs together (``/proc/stat``: everything but idle and iowait);
    None without ``/proc``."""
    try:
        first = (_PROC / "stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in first[1:9])
    return (user + nice + system + irq + softirq + steal) / _ticks()
