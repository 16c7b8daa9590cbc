"""A run's life outside a terminal: ``ray job stop`` (SIGTERM) and Ctrl-C (SIGINT) cancel it cleanly.

The signal becomes ``RunCancelled`` in the driver's main thread: dispatch stops where it is, the checkpoint keeps
every Record already answered, the run's Serve applications and engines are released (unless ``--keep-pool``), the
manifest says ``cancelled``, and the CLI exits 128 + the signal (143 for SIGTERM, 130 for SIGINT); ``omnieval run
--resume`` finishes the run later with no sample inferred twice.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

TICK_S = 3.0
"""How often the heartbeat thread runs ``on_tick`` (the beats themselves come every quarter of the grace)."""


class RunCancelled(BaseException):  # noqa: N818 - a BaseException like KeyboardInterrupt: not caught as an error
    """The run was stopped by a signal; ``exit_code`` is 128 + the signal number."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def cancelled_by(e: BaseException | None) -> RunCancelled | None:
    """The ``RunCancelled`` behind ``e``: raised inside a Ray call the signal handler's exception comes back wrapped
    (a ``SystemError`` whose cause it is)."""
    seen = 0
    while e is not None and seen < 8:
        if isinstance(e, RunCancelled):
            return e
        e = e.__cause__ or e.__context__
        seen += 1
    return None


_active: tuple[tuple[int, ...], Callable[[int, FrameType | None], None]] | None = None
"""The signals and handler of the ``cancel_on_signals`` block in force, for ``reinstall``."""


def reinstall() -> None:
    """Put the cancel handlers back after something replaced them: ``ray.init`` installs Ray's own SIGTERM handler
    in the driver (which aborts the process), so the runner calls this once Ray is up."""
    if _active is not None and threading.current_thread() is threading.main_thread():
        sigs, handler = _active
        for s in sigs:
            signal.signal(s, handler)


@contextmanager
def cancel_on_signals(signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)) -> Iterator[None]:
    """Within the block, the signals raise ``RunCancelled`` in the main thread (once; a second one is ignored while
    the run cleans up). Outside the main thread nothing is installed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    fired = False

    def handler(signum: int, frame: FrameType | None) -> None:
        nonlocal fired
        if fired:
            return
        fired = True
        raise RunCancelled(signum)

    global _active
    old = {s: signal.signal(s, handler) for s in signals}
    _active = (signals, handler)
    try:
        yield
    finally:
        _active = None
        for s, h in old.items():
            signal.signal(s, h)


class Heartbeat:
    """Tells the pool controller, every quarter of ``grace_s``, that this run is alive: a driver that dies without
    releasing (SIGKILL, a lost node) stops the heartbeats, and the controller releases its replicas after
    ``grace_s``. ``keep()`` hands the replicas over to nobody's lease (``--keep-pool``)."""

    def __init__(self, controller: Any, run_id: str, grace_s: float, on_tick: Callable[[], None] | None = None) -> None:
        self.controller = controller
        self.run_id = run_id
        self.grace_s = grace_s
        self.on_tick = on_tick
        """Called every few seconds from the heartbeat thread (the driver's watch on its replicas' failures)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="omnieval-heartbeat")

    def start(self) -> Heartbeat:
        self.controller.heartbeat.remote(self.run_id, self.grace_s)
        self._thread.start()
        return self

    def _loop(self) -> None:
        period = max(0.5, self.grace_s / 4)
        tick = min(period, TICK_S)
        last = time.monotonic()
        while not self._stop.wait(tick):
            if time.monotonic() - last >= period - 1e-3:
                last = time.monotonic()
                try:
                    self.controller.heartbeat.remote(self.run_id, self.grace_s)
                except Exception as e:  # noqa: BLE001 - the next beat retries; the grace covers a few misses
                    logging.getLogger("omnieval").warning("heartbeat to the pool controller failed: %r", e)
            if self.on_tick is not None:
                try:
                    self.on_tick()
                except Exception as e:  # noqa: BLE001 - a report that failed must not stop the heartbeats
                    logging.getLogger("omnieval").debug("heartbeat tick: %r", e)

    def stop(self, keep: bool = False) -> None:
        self._stop.set()
        if keep:
            import ray

            ray.get(self.controller.end_lease.remote(self.run_id))
