"""Which of a run's engine servers the driver starts before Ray (``pool.prestart``; the mechanism and its handoff
to the replicas: ``serving/_prestart.py``)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from omnieval.core import ModelConfig, SuiteConfig

log = logging.getLogger("omnieval")


def why_not(suite: SuiteConfig, keep_pool: bool) -> str | None:
    """Why this run cannot pre-start any server (None: it can)."""
    from cluster import runtime_env_of, starts_local_ray
    from serving import prestart_supported

    if not suite.pool.prestart:
        return "pool.prestart is off"
    if keep_pool:
        return "the pool is kept after the run, and a pre-started server dies with the driver (--keep-pool)"
    if suite.pool.start_models != "parallel":
        return "pool.start_models is sequential"
    if not starts_local_ray(suite.ray):
        return "the run joins a Ray cluster it did not start (its replicas may be on other nodes)"
    if runtime_env_of(suite.ray):
        return "ray.runtime_env gives the replicas an environment the driver does not have"
    if not prestart_supported():
        return "this system has no pidfds (Linux 5.3+)"
    return None


def eligible(m: ModelConfig) -> bool:
    """A model whose replicas launch a server the driver can launch identically: a ``ServerEngine`` that allows it,
    or an in-process engine in a process of its own (``engine_kwargs.process: own``), on CPUs (which GPU a replica
    gets is Ray's choice), on any node (no resource that picks one)."""
    from serving import ENGINES, ServerEngine, own_process

    cls = ENGINES.get(m.engine)
    r = m.resources
    server = isinstance(cls, type) and issubclass(cls, ServerEngine) and cls.prestartable
    return ((server or own_process(m.engine, cls, m.engine_kwargs)) and m.replicas > 0 and m.source.kind != "endpoint" and r.num_gpus == 0
            and not r.custom and r.accelerator_type is None)  # fmt: skip


def prestart_engines(suite: SuiteConfig, needed: set[str], *, keep_pool: bool) -> Any:
    """Start the servers of ``needed`` models' replicas now; the ``PrestartSet`` (None when nothing is started)."""
    models = [m for m in suite.models if m.name in needed and eligible(m)]
    if not models:
        return None
    reason = why_not(suite, keep_pool)
    if reason is not None:
        log.debug("engine servers not pre-started: %s", reason)
        return None
    from serving import PrestartSet

    ps = PrestartSet()
    launches = [(ps.reserve(m.name, m.replicas), _launcher(m)) for m in models]
    return ps.start(launches)


def _launcher(m: ModelConfig) -> Any:
    def make() -> Any:
        from pool import engine_kwargs_with_tp
        from serving import ENGINES, build_engine

        engine, _ = build_engine(str(ENGINES.target(m.engine)), replica_id=f"{m.name}-prestart", model=m.name,
                                 source=m.source, engine_kwargs=engine_kwargs_with_tp(m))  # fmt: skip
        return asyncio.run(engine.prestart())  # type: ignore[attr-defined]

    return make
