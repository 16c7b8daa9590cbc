"""Bring a run's models up in the background and say, per model, when its replicas are ready.

Why: a run that waits for every model before sending anything idles its fast engines for as long as the slowest one
loads (a transformers replica is up in seconds, vLLM in 40). With ``ModelStarts`` the runner dispatches each model's
Records the moment its own replicas are healthy, and the slow engine's load overlaps the others' work.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Any, Literal

log = logging.getLogger("omnieval")


class ModelStarts:
    """``controller.ensure_model`` for each model, all at once (``parallel``) or one after another
    (``sequential``, for a node too small to load two engines at once), from one background thread. A model is
    ready when its first replica is healthy (``controller.wait_healthy``): its Records flow to that one while its
    other replicas still load."""

    def __init__(self, controller: Any, starts: list[tuple[Any, str, dict[str, Any]]],
                 mode: Literal["parallel", "sequential"] = "parallel") -> None:  # fmt: skip
        self.controller, self.starts, self.mode = controller, starts, mode
        self.t0 = time.monotonic()
        self.up_s: dict[str, float] = {}
        """Model -> seconds from ``start()`` to its first replica healthy (its dispatch starts then)."""
        self.all_up_s: dict[str, float] = {}
        """Model -> seconds from ``start()`` to all its replicas settled (healthy, or failed to start)."""
        self.errors: dict[str, BaseException] = {}
        """Model -> why none of its replicas came up: the run cannot evaluate it."""
        self.late_errors: dict[str, BaseException] = {}
        """Model -> why one of its replicas failed to start after another was already serving (logged; the run goes
        on with the healthy ones, as with a failed scale-out)."""
        self._events = {m.name: threading.Event() for m, _, _ in starts}
        self._done = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="omnieval-model-starts")

    @property
    def models(self) -> list[str]:
        return list(self._events)

    def start(self) -> ModelStarts:
        self.t0 = time.monotonic()
        self._thread.start()
        return self

    def _ready(self, name: str) -> None:
        if not self._events[name].is_set():
            self.up_s[name] = time.monotonic() - self.t0
            self._events[name].set()

    def _settled(self, name: str, ref: Any, start_id: str) -> None:
        """``ensure_model`` of ``name`` returned or raised."""
        import ray

        try:
            ray.get(ref)
        except BaseException as e:  # noqa: BLE001 - handed to whoever waits for this model
            # its first-healthy answer may not have been read yet: ask again (the start has ended, so at once)
            if not self._events[name].is_set() and ray.get(self.controller.wait_healthy.remote(name, start_id, 1, 0.0)):
                self._ready(name)
            if self._events[name].is_set():
                self.late_errors[name] = e
                log.warning("a replica of %s failed to start while another serves it; the run goes on with the "
                            "healthy ones: %s", name, e)  # fmt: skip
            else:
                self.errors[name] = e
        self.all_up_s[name] = time.monotonic() - self.t0
        self._ready(name)

    def _launch(self, args: tuple[Any, str, dict[str, Any]]) -> dict[Any, tuple[str, str, str]]:
        model = args[0]
        start_id = uuid.uuid4().hex
        ensure = self.controller.ensure_model.remote(*args, parallel=self.mode == "parallel", start_id=start_id)
        first = self.controller.wait_healthy.remote(model.name, start_id, 1, model.deploy_timeout_s or 900.0)
        return {ensure: (model.name, "ensure", start_id), first: (model.name, "first", start_id)}

    def _wait(self, pending: dict[Any, tuple[str, str, str]]) -> None:
        """Until ``pending``'s ensure calls settle (or a stop): each model is ready at its first healthy replica."""
        import ray

        while any(kind == "ensure" for _, kind, _ in pending.values()) and not self._stop.is_set():
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
            for ref in ready:
                name, kind, start_id = pending.pop(ref)
                if kind == "ensure":
                    self._settled(name, ref, start_id)
                elif ray.get(ref) >= 1:  # 0: no replica came up; its ensure call says why
                    self._ready(name)

    def _run(self) -> None:
        try:
            if self.mode == "sequential":
                for args in self.starts:
                    if self._stop.is_set():
                        break
                    self._wait(self._launch(args))
                    if args[0].name in self.errors:
                        break  # the run fails on it: starting the next engine would only be released again
                return
            pending: dict[Any, tuple[str, str, str]] = {}
            for args in self.starts:
                pending.update(self._launch(args))
            self._wait(pending)
        finally:
            for name, ev in self._events.items():  # a model never started (stopped, or after a failure) is settled
                if not ev.is_set():
                    self.errors.setdefault(name, RuntimeError(f"model {name!r} was not started: the run stopped"))
                    ev.set()
            self._done.set()

    def wait(self, model: str, stop: threading.Event | None = None) -> None:
        """Until ``model``'s replicas are healthy; raises its start's error. ``stop`` ends the wait early."""
        ev = self._events[model]
        while not ev.wait(0.5):
            if stop is not None and stop.is_set():
                raise RuntimeError("the run stopped")
        if model in self.errors:
            raise self.errors[model]

    def wait_settled(self) -> None:
        """Until every model's start has ended (its replicas healthy or failed), without raising."""
        self._done.wait()

    def first_error(self) -> BaseException | None:
        return next(iter(self.errors.values()), None)

    def wait_all(self) -> None:
        """Until every model is up; raises the first start's error. Polled, so a signal's handler runs meanwhile."""
        while not self._done.wait(0.5):
            if (e := self.first_error()) is not None:
                raise e
        if (e := self.first_error()) is not None:
            raise e

    def stop(self) -> None:
        self._stop.set()
