"""Bring a run's models up in the background and say, per model, when its replicas are ready.

Why: a run that waits for every model before sending anything idles its fast engines for as long as the slowest one
loads (a transformers replica is up in seconds, vLLM in 40). With ``ModelStarts`` the runner dispatches each model's
Records the moment its own replicas are healthy, and the slow engine's load overlaps the others' work.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Literal


class ModelStarts:
    """``controller.ensure_model`` for each model, all at once (``parallel``) or one after another
    (``sequential``, for a node too small to load two engines at once), from one background thread."""

    def __init__(self, controller: Any, starts: list[tuple[Any, str, dict[str, Any]]],
                 mode: Literal["parallel", "sequential"] = "parallel") -> None:  # fmt: skip
        self.controller, self.starts, self.mode = controller, starts, mode
        self.t0 = time.monotonic()
        self.up_s: dict[str, float] = {}
        """Model -> seconds from ``start()`` to its replicas healthy."""
        self.errors: dict[str, BaseException] = {}
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

    def _settle(self, name: str, ref: Any) -> None:
        import ray

        try:
            ray.get(ref)
        except BaseException as e:  # noqa: BLE001 - handed to whoever waits for this model
            self.errors[name] = e
        self.up_s.setdefault(name, time.monotonic() - self.t0)
        self._events[name].set()

    def _run(self) -> None:
        import ray

        try:
            if self.mode == "sequential":
                for args in self.starts:
                    if self._stop.is_set():
                        break
                    ref = self.controller.ensure_model.remote(*args)
                    self._settle(args[0].name, ref)
                    if args[0].name in self.errors:
                        break  # the run fails on it: starting the next engine would only be released again
                return
            pending = {self.controller.ensure_model.remote(*a): a[0].name for a in self.starts}
            while pending and not self._stop.is_set():
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
                for ref in ready:
                    self._settle(pending.pop(ref), ref)
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
