"""Direct HTTP to a replica's own OpenAI-compatible server: pooled keep-alive connections, no Ray hop per request.

aiohttp rather than httpx: on this 2-core machine its client costs about a third of httpx's CPU per request, which
is the difference between the pool keeping a fast engine busy and idling it.
"""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp

from omnieval.core import ReplicaDead, RequestFailed
from serving import Endpoint, GenerationRequest, GenerationResult, parse_completion, request_route


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

    async def chat(self, ep: Endpoint, request: GenerationRequest, replica_id: str) -> GenerationResult:
        """One chat (or raw-prompt text) completion; ``RequestFailed`` for a failed request, ``ReplicaDead`` when the
        server is gone."""
        session = self._open()
        base = ep.url_for(self.client_ip)
        path, payload = request_route(request, ep.served_model_name, ep.dialect)
        body = json.dumps(payload).encode()
        t0 = time.monotonic()
        try:
            async with session.post(base + path, data=body, headers=self._hdrs(ep)) as resp:
                raw = await resp.read()
                status = resp.status
        except asyncio.TimeoutError:
            raise RequestFailed(f"timeout after {self.timeout_s:g}s", timeout=True) from None
        except (aiohttp.ClientConnectionError, OSError) as e:
            if await self._alive(ep):  # e.g. a connection dropped mid-flight by a server that still answers
                raise RequestFailed(f"connection error: {e!r}") from None
            raise ReplicaDead(f"{base} stopped answering: {e!r}", replica_id=replica_id) from None
        if status >= 400:
            raise RequestFailed(f"HTTP {status}: {raw[:300].decode(errors='replace')}")
        res = parse_completion(raw, request.request_id, time.monotonic() - t0)
        res.replica_id = replica_id
        return res

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
