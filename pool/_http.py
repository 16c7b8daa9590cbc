"""Direct HTTP to a replica's own server (OpenAI-compatible, or an engine process of omnieval's own): pooled
keep-alive connections, no Ray hop per request.

aiohttp rather than httpx: on this 2-core machine its client costs about a third of httpx's CPU per request, which
is the difference between the pool keeping a fast engine busy and idling it.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import TypeVar

import aiohttp
from pydantic import BaseModel

from omnieval.core import ReplicaDead, RequestFailed
from serving import (
    Endpoint,
    GenerationRequest,
    GenerationResult,
    ScoreRequest,
    ScoreResult,
    ScoringDialect,
    TokenizeRequest,
    TokenizeResult,
    parse_completion,
    parse_scores,
    parse_tokens,
    process_answer,
    request_route,
    root_url,
    score_bodies,
    tokenize_body,
)

_M = TypeVar("_M", bound=BaseModel)


class HttpTransport:
    """One connection pool per client (per event loop), shared by every replica it talks to."""

    def __init__(self, timeout_s: float, client_ip: str | None) -> None:
        self.timeout_s = timeout_s
        self.client_ip = client_ip
        self._session: aiohttp.ClientSession | None = None
        self._headers: dict[Endpoint, dict[str, str]] = {}

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # keep-alive shorter than llama-server's/uvicorn's idle timeout, so a reused connection is never one
            # the server is closing (which would look like a dead replica)
            conn = aiohttp.TCPConnector(limit=0, keepalive_timeout=4.0, enable_cleanup_closed=True)
            self._session = aiohttp.ClientSession(connector=conn, json_serialize=json.dumps,
                                                  timeout=aiohttp.ClientTimeout(total=self.timeout_s))  # fmt: skip
        return self._session

    def _hdrs(self, ep: Endpoint) -> dict[str, str]:
        h = self._headers.get(ep)
        if h is None:
            h = {"Content-Type": "application/json"}
            if ep.api_key:
                h["Authorization"] = f"Bearer {ep.api_key}"
            self._headers[ep] = h
        return h

    async def _send(self, ep: Endpoint, url: str, body: bytes, replica_id: str) -> tuple[int, bytes]:
        """POST; the status and body, ``RequestFailed`` when no answer came, ``ReplicaDead`` when the server is
        gone."""
        session = self._open()
        try:
            async with session.post(url, data=body, headers=self._hdrs(ep)) as resp:
                return resp.status, await resp.read()
        except asyncio.TimeoutError:
            raise RequestFailed(f"timeout after {self.timeout_s:g}s", timeout=True) from None
        except (aiohttp.ClientConnectionError, OSError) as e:
            if await self._alive(ep):  # e.g. a connection dropped mid-flight by a server that still answers
                raise RequestFailed(f"connection error: {e!r}") from None
            raise ReplicaDead(f"{url} stopped answering: {e!r}", replica_id=replica_id) from None

    async def _post(self, ep: Endpoint, url: str, body: bytes, replica_id: str) -> bytes:
        """POST and return the body; an error status is a ``RequestFailed``."""
        status, raw = await self._send(ep, url, body, replica_id)
        if status >= 400:
            raise RequestFailed(f"HTTP {status}: {raw[:300].decode(errors='replace')}")
        return raw

    async def _native(self, ep: Endpoint, path: str, request: BaseModel, out: type[_M], replica_id: str) -> _M:
        """A request to an engine's own process (``Endpoint.dialect`` ``omnieval``: ``serving._process_server``),
        its own models both ways (``process_answer`` reads the answer, as the replica does)."""
        url = ep.url_for(self.client_ip) + path
        status, raw = await self._send(ep, url, request.model_dump_json().encode(), replica_id)
        return process_answer(status, raw, out, replica_id)

    async def chat(self, ep: Endpoint, request: GenerationRequest, replica_id: str) -> GenerationResult:
        """One chat (or raw-prompt text) completion."""
        if ep.dialect == "omnieval":
            res = await self._native(ep, "/generate", request, GenerationResult, replica_id)
            res.replica_id = replica_id
            return res
        base = ep.url_for(self.client_ip)
        path, payload = request_route(request, ep.served_model_name, ep.dialect)
        t0 = time.monotonic()
        raw = await self._post(ep, base + path, json.dumps(payload).encode(), replica_id)
        res = parse_completion(raw, request.request_id, time.monotonic() - t0)
        res.replica_id = replica_id
        return res

    def _scoring(self, ep: Endpoint) -> ScoringDialect:
        if ep.scoring is None:
            raise RequestFailed(f"the server at {ep.base_url} cannot score log-likelihoods")
        assert ep.scoring != "omnieval"  # answered by ``_native``
        return ep.scoring

    async def tokenize(self, ep: Endpoint, request: TokenizeRequest, replica_id: str) -> TokenizeResult:
        """The text's token ids from the server's own tokenizer (no special tokens)."""
        if ep.scoring == "omnieval":
            tok = await self._native(ep, "/tokenize", request, TokenizeResult, replica_id)
            tok.replica_id = replica_id
            return tok
        body = tokenize_body(self._scoring(ep), request.text, ep.served_model_name)
        url = root_url(ep.url_for(self.client_ip)) + "/tokenize"
        toks = parse_tokens(await self._post(ep, url, json.dumps(body).encode(), replica_id))
        return TokenizeResult(request_id=request.request_id, tokens=toks, replica_id=replica_id)

    async def score(self, ep: Endpoint, request: ScoreRequest, replica_id: str) -> ScoreResult:
        """Log-likelihoods of the request's continuations (one HTTP request, or one per continuation for a server
        that scores by forced decoding: sent one after another, so each reuses the context's cached prefix)."""
        if ep.scoring == "omnieval":
            scored = await self._native(ep, "/score", request, ScoreResult, replica_id)
            scored.replica_id = replica_id
            return scored
        dialect = self._scoring(ep)
        root = root_url(ep.url_for(self.client_ip))
        t0 = time.monotonic()
        try:
            raws = [await self._post(ep, root + path, json.dumps(body).encode(), replica_id)
                    for path, body in score_bodies(dialect, request, ep.served_model_name)]  # fmt: skip
        except RequestFailed as e:
            if dialect == "llamacpp" and "grammar" in str(e):
                raise RequestFailed(f"{e} (llama-server scores by forcing the continuation's tokens; it cannot force "
                                    "an end-of-generation token, which this continuation holds)", timeout=e.timeout) from None  # fmt: skip
            raise
        choices = parse_scores(dialect, raws, request)
        n = len(request.context) + sum(len(c) for c in request.continuations)
        return ScoreResult(request_id=request.request_id, choices=choices, prompt_tokens=n,
                           engine_latency_s=time.monotonic() - t0, replica_id=replica_id)  # fmt: skip

    async def _alive(self, ep: Endpoint) -> bool:
        try:
            async with self._open().get(ep.url_for(self.client_ip) + "/models", headers=self._hdrs(ep),
                                        timeout=aiohttp.ClientTimeout(total=2.0)) as r:  # fmt: skip
                return r.status == 200
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError):
            return False

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
