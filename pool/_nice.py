"""Client actors yield the node's CPU to the engines they feed.

Why: on a node shared with engines (one machine, or clients placed beside replicas) a client's work — a framework's
imports, tokenising, building requests — competes with the engine that decides the run's length. A client only
needs the time the engines leave idle: an engine waiting for requests is not runnable, so its clients then get the
cores. Niceness is per thread on Linux and a thread inherits its creator's, so every thread this process already
has is set (Ray's own, an async actor's event loop) and the ones started later follow.
"""

from __future__ import annotations

import os


def yield_cpu(nice: int) -> int:
    """Give every thread of this process niceness ``nice`` at least (never raises it back: that needs privilege);
    returns how many threads were set."""
    if not hasattr(os, "setpriority"):
        return 0
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:  # no /proc: this thread only, which the threads it starts inherit
        tids = [0]
    n = 0
    for tid in tids:
        try:
            if os.getpriority(os.PRIO_PROCESS, tid) < nice:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
                n += 1
        except OSError:  # the thread ended meanwhile
            continue
    return n
