"""A private local Ray started at a lower CPU priority than the driver and the engine servers it pre-started.

Why: on a CPU node the run's length is its engines' load and work. A local Ray's start-up (its GCS, raylet, agents
and first workers, ~5 CPU-seconds of imports on 2 cores) otherwise competes as an equal with the engine servers the
driver started just before it (``pool.prestart``), and its control loops with their work after. Every process of
that Ray inherits the niceness of the thread that started it (Linux niceness is per thread, and the raylet's
workers inherit the raylet's), so ``ray.init`` runs in a thread of its own at that niceness: the driver's other
threads, and the servers they started, keep theirs.

That thread lives as long as the process: Ray asks the kernel to end its GCS and raylet when the *thread* that
forked them ends (``PR_SET_PDEATHSIG``), so a thread that returned after ``ray.init`` would take the cluster down
with it. One thread per niceness serves every later start too (a bench starts a Ray per run).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from concurrent.futures import Future
from typing import Any

import ray


class _NoSignalNote(logging.Filter):
    """Ray notes that it set no SIGTERM handler from a thread that is not the main one. The driver's own handler
    (``omnieval._lifecycle``) is the one a run uses anyway, so the note only worries the reader."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "SIGTERM handler is not set" not in record.getMessage()


_starters: dict[int, _Starter] = {}
_lock = threading.Lock()


class _Starter:
    def __init__(self, nice: int) -> None:
        self.nice = nice
        self.jobs: queue.SimpleQueue[tuple[dict[str, Any], Future[None]]] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name=f"omnieval-ray-start-nice{nice}", daemon=True).start()

    def _serve(self) -> None:
        logging.getLogger("ray._private.worker").addFilter(_NoSignalNote())
        if hasattr(os, "setpriority"):
            # this thread only (0: the caller, which on Linux is a thread); never below what it has (that needs
            # privilege, and a driver started niced stays so)
            os.setpriority(os.PRIO_PROCESS, 0, max(self.nice, os.getpriority(os.PRIO_PROCESS, 0)))
        while True:
            kwargs, done = self.jobs.get()
            try:
                ray.init(**kwargs)
                done.set_result(None)
            except BaseException as e:  # noqa: BLE001 - raised in the caller's thread
                done.set_exception(e)


def init_niced(nice: int, **kwargs: Any) -> None:
    """``ray.init(**kwargs)`` from a thread at niceness ``nice``: the processes of the Ray it starts run at it."""
    with _lock:
        starter = _starters.get(nice) or _starters.setdefault(nice, _Starter(nice))
    done: Future[None] = Future()
    starter.jobs.put((kwargs, done))
    done.result()
