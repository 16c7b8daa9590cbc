"""An in-process engine run in a process of its own (``engine_kwargs.process: own``): the replica owns that
process as it owns llama-server (start, health, log, stop) and hands every call on to it over loopback.

Why: the driver can start the process before Ray (``pool.prestart``, the same handoff as engine servers), so the
engine's imports and weights load while Ray, Serve and the replica's worker start, on cores they leave idle. On a
2-core Xeon a transformers replica was up 6-7 s after its deploy call, about 4.5 s of it the engine's own imports and
load, all after Ray's start. The server side is ``serving._process_server``; its protocol is omnieval's own request
and result models, so the engine answers exactly as it does inside a replica (scoring and media included).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any, ClassVar, TypeVar

import httpx
from pydantic import BaseModel

from omnieval.core import OmnievalUserError, ReplicaDead, RequestFailed
from serving._engine import Engine
from serving._managed import ManagedServer, OwnsServer
from serving._prestart import claim
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

PROCESS_MODES = ("replica", "own")
_M = TypeVar("_M", bound=BaseModel)


def own_process(engine: str, engine_cls: Any, kwargs: dict[str, Any]) -> bool:
    """Does ``engine_kwargs.process`` put this engine in a process of its own? Checked: ``replica`` (the engine in
    its replica's process, the default) or ``own``, on an engine that takes the option."""
    if "process" not in getattr(engine_cls, "option_defaults", {}):
        return False
    mode = kwargs.get("process", "replica")
    if mode not in PROCESS_MODES:
        raise OmnievalUserError(f"engine {engine!r}: engine_kwargs.process must be one of {list(PROCESS_MODES)}, "
                                f"got {mode!r}")  # fmt: skip
    return mode == "own"


def process_answer(status: int, raw: bytes, out: type[_M], replica_id: str) -> _M:
    """An engine process's answer (``serving._process_server``): the result, or the failure it reports (422:
    the request failed, or the engine is gone)."""
    if status == 200:
        return out.model_validate_json(raw)
    try:
        err = json.loads(raw)
    except ValueError:
        err = {"message": raw[:300].decode(errors="replace")}
    if err.get("kind") == "replica_dead":
        raise ReplicaDead(str(err.get("message")), replica_id=replica_id)
    raise RequestFailed(f"HTTP {status}: {err.get('message')}", timeout=bool(err.get("timeout")))


class ProcessEngine(OwnsServer, Engine):
    """The engine ``target`` (an in-process ``Engine`` class) behind ``serving._process_server``."""

    name: ClassVar[str] = "process"
    prestartable: ClassVar[bool] = True
    """The driver may start this process before Ray for the replica to take over (``serving._prestart``)."""

    def __init__(self, *, replica_id: str, model: str, target: str, model_path: str, **kwargs: Any) -> None:
        from omnieval.core import import_target

        super().__init__(replica_id=replica_id, model=model)
        inner = {k: v for k, v in kwargs.items() if k != "process"}
        cls: Any = import_target(target)
        # built here only to check its options and read its slots: a wrong option fails the replica, not a process
        probe = cls(replica_id=replica_id, model=model, model_path=model_path, **inner)
        self.slots = probe.slots
        self._stats.engine = cls.name  # the engine's calibration and reports are its own, not the wrapper's
        self.startup_timeout_s = 600.0  # a cold start imports torch and loads weights: minutes on a slow disk
        self.timeout_s = 3600.0  # a request's deadline is the pool's (request_timeout_s); this only bounds a hang
        self._cmd = [sys.executable, "-m", "serving._process_server", "--engine", target, "--model", model,
                     "--model-path", model_path, "--kwargs", json.dumps(inner, sort_keys=True),
                     "--host", "{host}", "--port", "{port}"]  # fmt: skip
        self._server: ManagedServer | None = None
        self._client: httpx.AsyncClient | None = None
        self._version: str | None = None

    def new_server(self, bind_all: bool | None = None) -> ManagedServer:
        return ManagedServer(f"{self._stats.engine}-{self._stats.replica_id}", self._cmd, bind_all=bind_all)

    async def prestart(self) -> ManagedServer:
        """The driver's launch of this process, for a replica to take over (``serving._prestart``): on loopback
        without a key, as engine servers are pre-started (every replica of such a run is on this node)."""
        server = self.new_server(bind_all=False)
        server.launch()
        return server

    async def start(self) -> None:
        self._server = self.new_server()
        got = await asyncio.to_thread(claim, self._stats.model, self._server.prestart_key, self.startup_timeout_s)
        if got is not None:
            self._server.adopt(*got)
        else:
            self._server.launch()
        await self._server.wait_ready(self.startup_timeout_s)
        headers = {"Authorization": f"Bearer {self._server.api_key}"} if self._server.api_key else {}
        self._client = httpx.AsyncClient(base_url=self._server.local_url, timeout=self.timeout_s, headers=headers,
                                         limits=httpx.Limits(max_connections=None, max_keepalive_connections=64))  # fmt: skip
        r = await self._client.get("/health", timeout=10.0)
        self._version = r.json().get("version")

    def endpoint(self) -> Endpoint | None:
        """Clients send requests straight to the process, as to an engine's own server."""
        if self._server is None:
            return None
        return Endpoint(base_url=self._server.public_url + "/v1", served_model_name=self._stats.model,
                        api_key=self._server.api_key, node_ip=self._server.node_ip, dialect="omnieval",
                        scoring="omnieval")  # fmt: skip

    def version(self) -> str | None:
        return self._version

    async def _call(self, path: str, request: BaseModel, out: type[_M]) -> _M:
        if self._client is None or self._server is None:
            raise ReplicaDead("engine process not started", replica_id=self._stats.replica_id)
        if not self._server.alive():
            raise await self._dead()
        try:
            r = await self._client.post(path, content=request.model_dump_json(),
                                        headers={"content-type": "application/json"})  # fmt: skip
        except httpx.TimeoutException:
            raise RequestFailed(f"no answer from the engine process after {self.timeout_s:g}s", timeout=True) from None
        except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError) as e:
            if not await self.check_health():  # a killed process resets its connections before it is reaped
                raise await self._dead(e) from None
            raise RequestFailed(f"engine process connection error: {e!r}") from None
        return process_answer(r.status_code, r.content, out, self._stats.replica_id)

    async def _dead(self, why: Exception | None = None) -> ReplicaDead:
        """The replica's death, with the process's exit status once the kernel has it (moments after a kill)."""
        assert self._server is not None and self._server.proc is not None
        try:
            rc: int | None = await asyncio.to_thread(self._server.proc.wait, 2.0)
        except subprocess.TimeoutExpired:  # alive but not answering: ended by the replica's removal
            rc = None
        how = f"exited with {rc}" if rc is not None else f"stopped answering ({why!r})"
        return ReplicaDead(f"{self._stats.engine} engine process {how}: {self._server.failure_log()}",
                           replica_id=self._stats.replica_id)  # fmt: skip

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        with self._track():
            result = await self._call("/v1/generate", request, GenerationResult)
        return self._account(result)

    async def score(self, request: ScoreRequest) -> ScoreResult:
        with self._track():
            result = await self._call("/v1/score", request, ScoreResult)
        result.replica_id = self._stats.replica_id
        return result

    async def tokenize(self, request: TokenizeRequest) -> TokenizeResult:
        result = await self._call("/v1/tokenize", request, TokenizeResult)
        result.replica_id = self._stats.replica_id
        return result

    async def poll_stats(self) -> EngineStats:
        """The engine's own counters (busy time, batches, queue), under this replica's name; the replica's count
        where the process does not answer (the health check then judges it)."""
        mine = self.stats()
        if self._client is None:
            return mine
        try:
            r = await self._client.get("/stats", timeout=5.0)
            theirs = EngineStats.model_validate_json(r.content) if r.status_code == 200 else None
        except (httpx.HTTPError, OSError, ValueError):
            theirs = None
        if theirs is None:
            return mine
        return theirs.model_copy(update={"replica_id": mine.replica_id, "peak_clients": mine.peak_clients})

    async def check_health(self) -> bool:
        if self._client is None or not self.server_alive():
            return False
        try:
            return (await self._client.get("/health", timeout=5.0)).status_code == 200
        except (httpx.HTTPError, OSError):
            return False

    async def shutdown(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        if self._server is not None:
            await asyncio.to_thread(self._server.stop)
        self._server = None
