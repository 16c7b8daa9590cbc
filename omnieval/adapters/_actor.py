"""Framework client actors: each framework runs in its own actor, optionally in its own environment.

Frameworks that conflict (lm-eval vs lmms-eval pins) never share an interpreter: a suite can give each framework a
Ray ``runtime_env`` — typically ``py_executable`` of a prepared venv — and its actor starts there.
"""

from __future__ import annotations

import time
from typing import Any

import ray

from omnieval.adapters._base import FrameworkResult
from omnieval.core import GenerationOptions, PoolConfig


@ray.remote(num_cpus=0)
class FrameworkClient:
    def __init__(self, controller: Any, pool_cfg: PoolConfig, seed: int = 0, cache_path: str | None = None) -> None:
        self.controller = controller
        self.pool_cfg = pool_cfg
        self.seed = seed
        self.cache_path = cache_path
        from pool import yield_cpu

        yield_cpu(pool_cfg.client_nice)  # before the framework's imports, the largest share of its CPU

    def run(self, framework: str, *, task: str, options: dict[str, Any], model: str, limit: int | None,
            generation: GenerationOptions, workdir: str | None = None) -> FrameworkResult:  # fmt: skip
        """``workdir``: the driver's working directory, where relative paths inside task files resolve (as for the
        framework's own CLI run there), when this node has it."""
        import os

        from omnieval.adapters import ADAPTERS
        from omnieval.adapters._bridge import PoolBridge

        if workdir and os.path.isdir(workdir):
            os.chdir(workdir)
        adapter = ADAPTERS.get(framework)()
        bridge = PoolBridge(model, self.controller, self.pool_cfg, seed=self.seed, cache_path=self.cache_path)
        try:
            res = adapter.run(task=task, options=options, model=model, bridge=bridge, limit=limit, generation=generation)
            return res.model_copy(update={"finished_at": time.time()})
        finally:
            bridge.close()

    def environment(self) -> dict[str, str]:
        """Interpreter and framework versions this actor sees (proves environments are separate)."""
        import importlib.metadata as md
        import sys

        out = {"python": sys.executable}
        for pkg in ("lm-eval", "lmms-eval", "ms-vlmeval", "torch", "transformers"):
            try:
                out[pkg] = md.version(pkg)
            except md.PackageNotFoundError:
                pass
        return out
