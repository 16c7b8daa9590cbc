"""The ``Engine`` seam every backend implements (llama.cpp, vLLM, SGLang, transformers, external OpenAI server).

Errors: ``generate`` raises ``RequestFailed`` for a recoverable per-request failure and ``ReplicaDead`` when the
engine itself is gone; the pool retries the first and replaces the replica on the second.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from serving._features import TEXT, EngineFeatures
from serving._types import (
    Endpoint,
    EngineStats,
    GenerationRequest,
    GenerationResult,
    ScoreRequest,
    ScoreResult,
    TokenizeRequest,
    TokenizeResult,
)


class Engine(ABC):
    """Lifecycle: ``start`` → many concurrent ``generate`` → ``shutdown``; ``check_health`` may run any time."""

    name: ClassVar[str]
    slots: int = 1
    option_defaults: ClassVar[dict[str, Any]] = {}
    """Every ``engine_kwargs`` key the engine takes, with its default (None: the engine's or server's own); the
    README's engine-options list is checked against it, so neither can drift."""
    tp_kwarg: ClassVar[str | None] = None
    """The engine_kwargs key of its tensor-parallel degree (vLLM ``tensor_parallel_size``, SGLang ``tp_size``),
    filled from ``resources.tensor_parallel_size``; None: the engine uses the GPUs it sees as they are."""
    cpu_bound: ClassVar[bool] = True
    """Whether the engine computes on its node's CPU cores when it has no GPU (False: a timing model, an engine
    that answers at once, a remote server), so that CPU engines sharing a node count it (``omnieval._cpu_share``)."""
    cpu_threads_option: ClassVar[str | None] = None
    """The engine_kwargs key of its compute threads, which omnieval fills in (when unset) with the engine's share
    of a node other CPU engines also use; None: the engine sizes itself."""

    def __init__(self, *, replica_id: str, model: str) -> None:
        self._stats = EngineStats(replica_id=replica_id, engine=self.name, model=model)
        self._busy_since: float | None = None

    @classmethod
    def features(cls, model_path: Path | None, kwargs: dict[str, Any]) -> EngineFeatures:
        """The modalities this engine takes for these weights, decided without starting it (the runner's
        preflight): override where an engine can do more than text."""
        return TEXT

    @classmethod
    def scoring(cls, kwargs: dict[str, Any]) -> str | None:
        """How this engine scores log-likelihoods (lm-eval's ``loglikelihood``), decided without starting it: a
        server dialect of ``serving._scoring`` (``vllm``, ``llamacpp``, ``sglang``), ``forward`` (an in-process
        forward pass), or None: it cannot, and a suite that needs it fails at preflight."""
        return None

    async def score(self, request: ScoreRequest) -> ScoreResult:
        """Log-likelihoods of the request's continuations (engines without a server of their own; a server's
        replicas are scored over HTTP by the pool)."""
        from omnieval.core import RequestFailed

        raise RequestFailed(f"engine {self.name!r} cannot score log-likelihoods")

    async def tokenize(self, request: TokenizeRequest) -> TokenizeResult:
        """Token ids of a text with the served model's tokenizer, no special tokens added."""
        from omnieval.core import RequestFailed

        raise RequestFailed(f"engine {self.name!r} does not tokenize")

    @abstractmethod
    async def start(self) -> None:
        """Load the model / launch the server; return only when it can serve."""

    @abstractmethod
    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """Serve one request; many run concurrently and the engine batches them."""

    async def check_health(self) -> bool:
        return True

    async def shutdown(self) -> None:
        return None

    def version(self) -> str | None:
        return None

    def endpoint(self) -> Endpoint | None:
        """The engine's own OpenAI-compatible server, if it runs one: the pool then sends requests there over HTTP
        and ``generate`` is only the fallback path. Engines without a server return None (Serve handle calls)."""
        return None

    def log_location(self) -> str | None:
        """``host:path`` of the engine's own log, for failure reports; None when it writes none of its own."""
        return None

    def log_tail(self, n: int = 5) -> str:
        """The last ``n`` lines of that log, joined with `` | ``."""
        return ""

    def stats(self) -> EngineStats:
        s = self._stats.model_copy()
        s.slots = self.slots
        s.queue_depth = max(0, s.in_flight - self.slots)
        if self._busy_since is not None:
            s.busy_s += time.monotonic() - self._busy_since
        return s

    async def poll_stats(self) -> EngineStats:
        """Stats for the controller's health pass; engines whose server counts its own load merge that in."""
        return self.stats()

    @contextmanager
    def _track(self) -> Iterator[None]:
        """Count in-flight requests and busy time around a request."""
        st = self._stats
        if st.in_flight == 0:
            self._busy_since = time.monotonic()
        st.in_flight += 1
        st.peak_in_flight = max(st.peak_in_flight, st.in_flight)
        try:
            yield
        except BaseException:
            st.failed += 1
            raise
        else:
            st.completed += 1
        finally:
            st.in_flight -= 1
            if st.in_flight == 0 and self._busy_since is not None:
                st.busy_s += time.monotonic() - self._busy_since
                self._busy_since = None

    def _account(self, result: GenerationResult) -> GenerationResult:
        self._stats.output_tokens += result.completion_tokens
        self._stats.prompt_tokens += result.prompt_tokens
        result.replica_id = self._stats.replica_id
        return result


def engine_kwargs_error(engine: str, unknown: set[str], allowed: set[str]) -> str:
    return f"engine {engine!r}: unknown engine_kwargs {sorted(unknown)}; allowed: {sorted(allowed)}"


def split_passthrough(
    engine: str, kwargs: dict[str, Any], fields: dict[str, Any], own: dict[str, Any], *, extra_key: str, what: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the server's own arguments, omnieval's options) of an engine that passes ``engine_kwargs`` through to its
    server (vLLM's ``AsyncEngineArgs``, SGLang's ``ServerArgs``): the named ``fields`` that are set, then any other
    field of ``what`` under ``extra_key``; ``own`` over its defaults. An unknown key, a non-mapping ``extra_key`` or a
    field set both ways is a user error."""
    from omnieval.core import OmnievalUserError

    allowed = set(fields) | set(own)
    unknown = set(kwargs) - allowed
    if unknown:
        raise OmnievalUserError(
            engine_kwargs_error(engine, unknown, allowed) + f"; other {what} fields go in {extra_key}: {{...}}"
        )
    extra = kwargs.get(extra_key) or {}
    if not isinstance(extra, dict):
        raise OmnievalUserError(f"engine {engine!r}: {extra_key} must be a mapping of {what} fields")
    clash = set(extra) & set(fields)
    if clash:
        raise OmnievalUserError(f"engine {engine!r}: set {sorted(clash)} directly in engine_kwargs, not in {extra_key}")
    args = {k: v for k, v in kwargs.items() if k in fields and v is not None} | dict(extra)
    return args, {**own, **{k: v for k, v in kwargs.items() if k in own}}


def pop_known(kwargs: dict[str, Any], engine: str, allowed: dict[str, Any]) -> dict[str, Any]:
    """Defaults overlaid with ``kwargs``; an unknown key is a user error, never silently dropped."""
    from omnieval.core import OmnievalUserError

    unknown = set(kwargs) - set(allowed)
    if unknown:
        raise OmnievalUserError(engine_kwargs_error(engine, unknown, set(allowed)))
    return {**allowed, **kwargs}
