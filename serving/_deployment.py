"""The Ray Serve deployment that wraps any ``Engine``: one Serve application per pool replica.

One app per replica (rather than one deployment with N replicas and Serve's own router) lets the pool choose the
replica per request with its own policies, health filter and circuit breaker, and add or drop single replicas.
"""

from __future__ import annotations

from ray import serve

from serving._host import EngineHost
from serving._types import (
    EngineSpec,
    EngineStats,
    GenerationRequest,
    GenerationResult,
    ScoreRequest,
    ScoreResult,
    TokenizeRequest,
    TokenizeResult,
)


@serve.deployment(
    max_ongoing_requests=4096,  # the engine queues; the pool's in-flight cap is the real limit
    health_check_period_s=5,
    health_check_timeout_s=30,
    graceful_shutdown_timeout_s=20,
    # Serve's default re-checks for ongoing requests every 2 s before a replica stops, so every release (a run's
    # end) waited 2 s or more for a replica the pool had already drained
    graceful_shutdown_wait_loop_s=0.2,
)
class EngineReplica:
    async def __init__(self, spec: EngineSpec) -> None:  # type: ignore[misc]  # Serve awaits an async constructor
        self.spec = spec
        self.host = EngineHost(spec)
        await self.host.start()

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        return await self.host.engine.generate(request)

    async def score(self, request: ScoreRequest) -> ScoreResult:
        return await self.host.engine.score(request)

    async def tokenize(self, request: TokenizeRequest) -> TokenizeResult:
        return await self.host.engine.tokenize(request)

    async def stats(self) -> EngineStats:
        return await self.host.stats()

    async def pid(self) -> int | None:
        """PID of the engine's server process (for failure-injection tests and ops)."""
        return getattr(self.host.engine, "pid", None)

    async def check_health(self) -> None:
        if not await self.host.engine.check_health():
            raise RuntimeError(f"engine of replica {self.spec.replica_id} is unhealthy")

    async def __del__(self) -> None:
        await self.host.engine.shutdown()
