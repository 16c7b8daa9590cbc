"""Framework tasks that run in the driver's own environment, in one driver thread started before Ray.

Why: a framework actor can start only once Ray is up, and then pays a worker's start and the transfer of every
Record back. lm-eval's own work (importing its task modules, loading the data, rendering every prompt) needs
neither Ray nor the pool, so it runs here while Ray starts and the engines load; its first batch of requests waits
for the pool (``attach``). Tasks run one after another, as ``lm_eval`` runs a task list, so lm-eval's global seeds
are never shared between two tasks at once. A framework given its own interpreter (``frameworks.<name>.python``)
runs in a child process of that interpreter started here too (``_subproc``), its bridge calls answered by this
process; only when the interpreter is not on the driver's node does it run in a framework client actor there.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from omnieval.adapters._base import FrameworkResult
from omnieval.core import GenerationOptions, PoolConfig


@dataclass
class InlineTask:
    key: str
    model: str
    framework: str
    task: str
    options: dict[str, Any]
    limit: int | None
    generation: GenerationOptions
    python: str | None = None
    """The framework's own interpreter (``frameworks.<name>.python``): the task runs in a child process of it."""
    env: dict[str, str] = field(default_factory=dict)
    """The framework's ``env_vars``, for that child process."""
    future: Future[FrameworkResult] = field(default_factory=Future)


class _LazyBridge:
    """A ``PoolBridge`` built on the first request, once the driver has attached the pool. First requests may come
    from several threads at once (VLMEvalKit's, or a framework process's calls each answered on its own thread):
    one bridge is built, under a lock."""

    def __init__(self, owner: InlineRunner, model: str, key: str) -> None:
        self.owner = owner
        self.model = model
        self.key = key
        self.bridge: Any = None
        self._lock = threading.Lock()

    def _ensure(self) -> Any:
        with self._lock:
            if self.bridge is None:
                self.owner.ready.wait()
                if self.owner.controller is None:
                    raise RuntimeError("the pool did not come up; see the run's error")
                from omnieval.adapters._bridge import PoolBridge

                self.bridge = PoolBridge(self.model, self.owner.controller, self.owner.pool_cfg, seed=self.owner.seed,
                                         cache_path=self.owner.cache_path)  # fmt: skip
            return self.bridge

    def _expect(self, n: int) -> None:
        progress, key = self.owner.progress, (self.model, self.key)
        if progress is not None:  # the framework's request count is known now: the run's progress shows it
            progress.expect(key, n)
            self.bridge.on_result = lambda res: progress.advance_counts(
                {key: 1}, tokens=0 if isinstance(res, BaseException) else res.completion_tokens
            )

    def generate(self, requests: list[Any]) -> list[Any]:
        self._ensure()
        self._expect(len(requests))
        return list(self.bridge.generate(requests))

    def score(self, requests: list[Any]) -> list[Any]:
        self._ensure()
        self._expect(len(requests))
        return list(self.bridge.score(requests))

    def tokenize(self, texts: list[str]) -> list[Any]:
        return list(self._ensure().tokenize(texts))

    def prefix_token_id(self) -> int | None:
        return self._ensure().prefix_token_id()  # type: ignore[no-any-return]

    def close(self) -> None:
        if self.bridge is not None:
            self.bridge.close()


class InlineRunner:
    """One daemon thread running the queued framework tasks of the driver's environment in order, and one per task
    of another interpreter (each in its own process); ``attach`` lets their requests flow."""

    def __init__(self, tasks: list[InlineTask], *, pool_cfg: PoolConfig, seed: int, cache_path: str | None,
                 env: dict[str, str]) -> None:  # fmt: skip
        self.tasks = tasks
        self.pool_cfg = pool_cfg
        self.seed = seed
        self.cache_path = cache_path
        self.ready = threading.Event()
        self.controller: Any = None
        self.progress: Any = None
        """The run's ``RunProgress`` once it exists: framework requests are counted in it as they finish."""
        os.environ.update(env)  # the frameworks' env_vars (e.g. HF_DATASETS_OFFLINE) before they import anything
        self._thread = threading.Thread(target=self._run_all, daemon=True, name="omnieval-frameworks")
        self._children: list[Any] = []
        self._lock = threading.Lock()
        self._abandoned = False

    def start(self) -> InlineRunner:
        if any(t.python is None for t in self.tasks):
            self._thread.start()
        for t in self.tasks:
            if t.python is not None:
                threading.Thread(target=self._run_child, args=(t,), daemon=True,
                                 name=f"omnieval-{t.framework}-process").start()  # fmt: skip
        return self

    def attach(self, controller: Any) -> None:
        """The pool is up: requests may go out."""
        self.controller = controller
        self.ready.set()

    def abandon(self) -> None:
        """The run failed or was cancelled: waiting tasks fail instead of waiting forever, and the frameworks' own
        processes end (nothing will read their results)."""
        self.ready.set()
        with self._lock:
            self._abandoned = True
            children = list(self._children)
        for proc in children:
            if proc.poll() is None:
                proc.kill()

    def _started(self, proc: Any) -> None:
        with self._lock:
            self._children.append(proc)
            if not self._abandoned:
                return
        proc.kill()  # started while the run was failing

    def _run_child(self, t: InlineTask) -> None:
        from omnieval.adapters._subproc import run_in_interpreter

        assert t.python is not None
        bridge = _LazyBridge(self, t.model, t.key)
        kwargs = dict(task=t.task, options=t.options, model=t.model, limit=t.limit, generation=t.generation)
        try:
            t.future.set_result(run_in_interpreter(t.python, t.framework, kwargs, bridge, env=t.env,
                                                   nice=self.pool_cfg.client_nice, on_start=self._started))  # fmt: skip
        except BaseException as e:  # noqa: BLE001 - handed to the driver, which makes it the task's error row
            t.future.set_exception(e)
        finally:
            bridge.close()

    def _run_all(self) -> None:
        from omnieval.adapters import ADAPTERS

        for t in self.tasks:
            if t.python is not None:
                continue
            bridge = _LazyBridge(self, t.model, t.key)
            try:
                adapter = ADAPTERS.get(t.framework)()
                res = adapter.run(task=t.task, options=t.options, model=t.model, bridge=bridge, limit=t.limit,
                                  generation=t.generation)  # fmt: skip
                t.future.set_result(res.model_copy(update={"finished_at": time.time()}))
            except BaseException as e:  # noqa: BLE001 - handed to the driver, which makes it the task's error row
                t.future.set_exception(e)
            finally:
                bridge.close()
