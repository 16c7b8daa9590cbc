"""Evaluation client actors: take chunks of Records, keep replicas saturated, return completed Records."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import ray

from omnieval.core import (
    ErrorKind,
    OmnievalUserError,
    Output,
    PoolConfig,
    Record,
    RecordError,
    RequestFailed,
    TextOutput,
    Usage,
    clip,
)
from pool._cache import ResponseCache, lookup_response
from pool._dispatch import Dispatcher, import_serve_soon
from pool._nice import yield_cpu
from pool._types import ChunkResult, decode_records, encode_records
from schedulers import RoutingRequest
from serving import GenerationRequest, GenerationResult, prompt_text, to_openai

MAX_OUTPUT_CHARS = 1_000_000
"""Longer generations are truncated and flagged; a runaway engine must not blow up the artifact."""


def _error_kind(e: BaseException) -> ErrorKind:
    if isinstance(e, RequestFailed):
        return "timeout" if e.timeout else "request_failed"
    return "replica_dead"


@ray.remote(num_cpus=0)
class EvalClient:
    """Async actor; concurrent ``run`` calls share one dispatcher per model, so caps hold across chunks."""

    def __init__(
        self, controller: Any, pool_cfg: PoolConfig, seed: int = 0, client_id: int = 0,
        cache_path: str | None = None, video_inputs: dict[str, str] | None = None,
    ) -> None:  # fmt: skip
        self.controller = controller
        self.cfg = pool_cfg
        self.cache = ResponseCache(cache_path) if cache_path else None
        self.cache_hits = 0
        self.seed = seed * 1000 + client_id
        self.client_id = client_id
        self.video_inputs = video_inputs or {}
        """Per model: ``frames`` sends clips as sampled images (the runner's preflight decided)."""
        self._dispatchers: dict[str, Dispatcher] = {}
        self._actor_id = ray.get_runtime_context().get_actor_id() or f"client-{client_id}"
        yield_cpu(pool_cfg.client_nice)
        import_serve_soon()  # its dispatchers are made at the first Record, when the replica may already be up

    def _dispatcher(self, model: str) -> Dispatcher:
        if model not in self._dispatchers:
            self._dispatchers[model] = Dispatcher(model, self.controller, self.cfg, seed=self.seed,
                                                  client_id=f"{self._actor_id}/{model}", siblings=self.cfg.clients)  # fmt: skip
        return self._dispatchers[model]

    async def _one(self, rec: Record) -> Record:
        d = self._dispatcher(rec.model)
        try:
            messages = to_openai(rec.messages, video_input=self.video_inputs.get(rec.model, "native"))  # type: ignore[arg-type]
        except (OmnievalUserError, OSError) as e:  # a missing or undecodable media file fails this sample only
            rec.error = RecordError(kind="bad_input", message=clip(str(e)), attempts=0)
            return rec
        req = GenerationRequest(
            request_id=f"{rec.model}/{rec.benchmark}/{rec.index}", messages=messages, options=rec.generation_options,
            grammar=rec.generation_options.grammar,
        )
        routing = RoutingRequest(
            model=rec.model, prompt_text=prompt_text(messages), est_tokens=rec.generation_options.max_tokens
        )
        t0 = time.monotonic()
        cached = await lookup_response(self.cache, d, messages, rec.generation_options)
        if cached.hit is not None:
            self.cache_hits += 1
            rec.meta["cache_hit"] = True
            return self._fill(rec, cached.hit, t0, attempts=0)
        try:
            res, attempts, t0 = await d.submit(req, routing)
        except Exception as e:  # noqa: BLE001 - any exhausted failure is recorded on the sample, never dropped
            cause = getattr(e, "cause", None) or e
            rec.error = RecordError(
                kind=_error_kind(cause), message=clip(str(cause)), attempts=self.cfg.max_retries + 1
            )
            rec.latency = time.monotonic() - t0
            return rec
        cached.store(res)
        return self._fill(rec, res, t0, attempts)

    def _fill(self, rec: Record, res: GenerationResult, t0: float, attempts: int) -> Record:
        text = res.text
        if len(text) > MAX_OUTPUT_CHARS:
            text = text[:MAX_OUTPUT_CHARS]
            rec.meta["truncated_output"] = True
        rec.output = Output(
            text=TextOutput(prediction=[text]),
            reasoning_content=res.reasoning_content,
            finish_reason=res.finish_reason,
            usage=Usage(prompt_tokens=res.prompt_tokens, completion_tokens=res.completion_tokens),
            replica=res.replica_id,
        )
        rec.latency = time.monotonic() - t0
        if attempts > 1:
            rec.meta["attempts"] = attempts
        return rec

    async def run(self, records: list[Record]) -> list[Record]:
        out = list(await asyncio.gather(*(self._one(r) for r in records)))
        for d in self._dispatchers.values():  # the controller's view (load, served counts) is complete when idle
            if d.idle:
                await d.flush()
        return out

    async def run_lines(self, payload: bytes) -> ChunkResult:
        """``run`` with Records as JSON lines both ways (the runner's path: no pickled pydantic objects)."""
        out = await self.run(decode_records(payload))
        return ChunkResult.of(out, lines=encode_records(out))

    def ready(self) -> bool:
        """Answers once the actor is up (the runner times inference from there)."""
        return True

    def dispatch_stats(self) -> dict[str, Any]:
        return {"cache_hits": self.cache_hits, "models": {m: dict(d.stats) for m, d in self._dispatchers.items()}}
