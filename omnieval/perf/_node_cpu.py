"""Who took the node's CPU: per-process CPU seconds over a run, grouped by Ray actor, from the kernel's accounting.

Why: an engine below its roofline on a shared node was starved by "the node's other work"; the bench must name that
work (which actor, which server), not list the usual suspects. A thread samples every process's user + system time
(``/proc/<pid>/stat``) and its title (``/proc/<pid>/cmdline``: Ray titles its workers ``ray::<Actor>``, vLLM its
``VLLM::<process>``) once a period; a process is charged to its nearest ``ray::`` ancestor (an engine's server and
its children to the Serve replica that started it). Linux only: elsewhere there are no samples and no attribution.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from serving import node_cpu_s

_PROC = Path("/proc")
_RAY_ACTOR = re.compile(r"^(ray::[^.\s]+)")  # ``ray::PoolClient.run`` -> ``ray::PoolClient``


@dataclass(frozen=True)
class _Proc:
    ppid: int
    ticks: int
    title: str


def _title(pid: int, comm: str) -> str:
    try:
        raw = (_PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        raw = b""
    args = [a for a in raw.decode(errors="replace").split("\0") if a]
    if not args:
        return comm  # a kernel thread, or a process gone between the two reads
    if (m := _RAY_ACTOR.match(args[0])) or args[0].startswith("VLLM::"):
        return m.group(1) if m else args[0].split()[0]
    exe = os.path.basename(args[0].split()[0])
    if exe.startswith("python") and len(args) > 2 and args[1] == "-m":
        return f"python -m {args[2]}"
    return exe


def snapshot() -> dict[int, _Proc]:
    """Every live process's parent, CPU ticks so far (its reaped children's included) and title."""
    out: dict[int, _Proc] = {}
    for d in _PROC.iterdir() if _PROC.is_dir() else ():
        if not d.name.isdigit():
            continue
        try:
            text = (d / "stat").read_text()
        except OSError:
            continue
        comm, _, rest = text.partition(" (")[2].rpartition(")")
        f = rest.split()
        # utime stime, and cutime cstime: a child that ended and was reaped is charged to its parent
        ticks = int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])
        out[int(d.name)] = _Proc(ppid=int(f[1]), ticks=ticks, title=_title(int(d.name), comm))
    return out


def group_of(pid: int, procs: dict[int, _Proc], owners: dict[int, str] | None = None) -> str:
    """The process's nearest ``ray::`` ancestor-or-self title (its own title when it has none); a process in
    ``owners`` (or below one) is its owner's, whoever started it (an engine server the driver pre-started)."""
    p, seen = pid, set()
    while p in procs and p not in seen:
        seen.add(p)
        if owners and p in owners:
            return owners[p]
        if procs[p].title.startswith("ray::"):
            return procs[p].title
        p = procs[p].ppid
    return procs[pid].title


def cores_by_group(a: tuple[float, dict[int, _Proc]], b: tuple[float, dict[int, _Proc]],
                   owners: dict[int, str] | None = None) -> dict[str, float]:  # fmt: skip
    """Mean cores each group used between two snapshots; a process born between them counts from 0, one that ended
    between them is its parent's once reaped (else seen in neither)."""
    (ta, pa), (tb, pb) = a, b
    span, hz = tb - ta, float(os.sysconf("SC_CLK_TCK"))
    out: dict[str, float] = {}
    if span <= 0:
        return out
    for pid, p in pb.items():
        d = p.ticks - (pa[pid].ticks if pid in pa and pa[pid].ticks <= p.ticks else 0)
        if d > 0:
            g = group_of(pid, pb, owners)
            out[g] = out.get(g, 0.0) + d / hz / span
    return out


class NodeCpuWatcher:
    """Samples :func:`snapshot` every ``period_s`` while the ``with`` block runs; :meth:`window` answers for any span
    inside it."""

    def __init__(self, period_s: float = 1.0) -> None:
        self.period_s = period_s
        self.samples: list[tuple[float, dict[int, _Proc]]] = []
        self.node_busy_s: list[float | None] = []
        self.owners: dict[int, str] = {}
        """Pid -> group for processes charged to someone other than their Ray ancestor (``group_of``)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="bench-node-cpu")

    def __enter__(self) -> NodeCpuWatcher:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def _sample(self) -> None:
        self.node_busy_s.append(node_cpu_s())
        self.samples.append((time.time(), snapshot()))

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self._sample()

    def window(self, start: float, end: float) -> dict[str, Any] | None:
        """Cores per group over [start, end] (unix times), from the last sample at or before ``start`` to the first
        at or after ``end``; None with fewer than two samples."""
        if len(self.samples) < 2:
            return None
        a = max((s for s in self.samples if s[0] <= start), key=lambda s: s[0], default=self.samples[0])
        b = min((s for s in self.samples if s[0] >= end), key=lambda s: s[0], default=self.samples[-1])
        if b[0] <= a[0]:
            return None
        return {"from": a[0], "to": b[0], "cores": cores_by_group(a, b, self.owners)}

    def run_total(self) -> dict[str, Any] | None:
        """Core-seconds per group over the whole watch, busiest first, and the node's busy core-seconds (``/proc/stat``:
        what no process could be charged, e.g. one that ended unreaped, is their difference)."""
        if len(self.samples) < 2 or self.node_busy_s[0] is None or self.node_busy_s[-1] is None:
            return None
        span = self.samples[-1][0] - self.samples[0][0]
        cores = cores_by_group(self.samples[0], self.samples[-1], self.owners)
        return {"span_s": round(span, 2), "cpus": os.cpu_count(),
                "busy_core_s": round(self.node_busy_s[-1] - self.node_busy_s[0], 1),
                "groups": [{"name": g, "core_s": round(c * span, 1)} for g, c in sorted(cores.items(), key=lambda x: -x[1])
                           if c * span >= 0.1]}  # fmt: skip


def others(groups: dict[str, float], engine_key: str, floor: float = 0.01) -> list[dict[str, Any]]:
    """The groups other than the engine's own (those whose title holds ``engine_key``, its replica id), busiest
    first; under ``floor`` cores they are left out."""
    rest = sorted(((g, c) for g, c in groups.items() if engine_key not in g and c >= floor), key=lambda x: -x[1])
    return [{"name": g, "cores": round(c, 3)} for g, c in rest]
