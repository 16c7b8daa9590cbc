"""Probe an engine's own OpenAI-compatible ``/v1/completions`` endpoint: per-request timings and its batching gain.

No pool, no Ray: requests go straight to the server with httpx, so what is measured is the engine alone. Used by
``omnieval bench calibrate --engine vllm`` (decode step and prefill times for the SIMULATED engine's profile) and by
the benches that report how much an engine gains from continuous batching (``batching_gain``).

Every request asks for exactly ``max_tokens`` output tokens (``ignore_eos``, greedy), so output lengths do not depend
on what the model says. ``ignore_eos`` is a vLLM / llama-server extension of the OpenAI body; a server that does not
know it may stop early, which the token counts from ``usage`` then show.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

import httpx

DEFAULT_PROMPT = "Write a long story about a lighthouse keeper who finds a message in a bottle."


@dataclass(frozen=True)
class RequestTiming:
    """One completion as the client saw it; times in seconds from when the request was sent."""

    prompt_tokens: int
    completion_tokens: int
    first_token_s: float
    """Time to the first streamed token (prefill + one step + HTTP); equals ``total_s`` for a non-streamed request."""
    total_s: float

    @property
    def step_s(self) -> float | None:
        """Mean time per decode step after the first token; None with fewer than 2 tokens or no streaming."""
        if self.completion_tokens < 2 or self.total_s <= self.first_token_s:
            return None
        return (self.total_s - self.first_token_s) / (self.completion_tokens - 1)


def completions_url(base_url: str) -> str:
    """``.../v1/completions`` for a server root or an OpenAI base URL (ending in ``/v1``)."""
    u = base_url.rstrip("/")
    return u + "/completions" if u.endswith("/v1") else u + "/v1/completions"


def _body(model: str, prompt: str, max_tokens: int, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0,
                            "ignore_eos": True}  # fmt: skip
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    return body


async def timed_completion(client: httpx.AsyncClient, url: str, model: str, prompt: str, max_tokens: int, *,
                           stream: bool = False) -> RequestTiming:  # fmt: skip
    """One ``/v1/completions`` request. ``stream=True`` reads server-sent events to time the first token; token
    counts come from ``usage`` (streamed with ``include_usage``), else from the number of non-empty chunks."""
    t0 = time.perf_counter()
    if not stream:
        r = await client.post(url, json=_body(model, prompt, max_tokens, False))
        r.raise_for_status()
        total = time.perf_counter() - t0
        usage = r.json().get("usage") or {}
        return RequestTiming(int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", max_tokens)),
                             total, total)  # fmt: skip
    first: float | None = None
    chunks = 0
    usage = {}
    async with client.stream("POST", url, json=_body(model, prompt, max_tokens, True)) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            event = json.loads(data)
            if event.get("usage"):
                usage = event["usage"]
            if any(c.get("text") for c in event.get("choices") or ()):
                chunks += 1
                if first is None:
                    first = time.perf_counter() - t0
    total = time.perf_counter() - t0
    return RequestTiming(int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", chunks)),
                         total if first is None else first, total)  # fmt: skip


async def concurrent_completions(client: httpx.AsyncClient, url: str, model: str, prompts: list[str], max_tokens: int,
                                 *, stream: bool = False) -> tuple[list[RequestTiming], float]:  # fmt: skip
    """All ``prompts`` at once; their timings and the wall time of the whole batch."""
    t0 = time.perf_counter()
    res = await asyncio.gather(*(timed_completion(client, url, model, p, max_tokens, stream=stream) for p in prompts))
    return list(res), time.perf_counter() - t0


def client_for(concurrency: int, api_key: str | None = None, timeout_s: float = 600.0) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=max(1, concurrency), max_keepalive_connections=max(1, concurrency))
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.AsyncClient(timeout=timeout_s, limits=limits, headers=headers)


async def abatching_gain(base_url: str, model: str, *, concurrency: int = 16, max_tokens: int = 64,
                         prompt: str = DEFAULT_PROMPT, api_key: str | None = None) -> dict[str, Any]:  # fmt: skip
    """``batching_gain`` inside a running event loop."""
    url = completions_url(base_url)
    async with client_for(concurrency, api_key) as c:
        await timed_completion(c, url, model, prompt, 4)  # warm-up: first-request costs are not the engine's rate
        (one,), wall_1 = await concurrent_completions(c, url, model, [prompt], max_tokens)
        # a distinct prefix per request, so concurrent requests are distinct sequences (not one cached prompt)
        sat, wall_n = await concurrent_completions(c, url, model, [f"{i}. {prompt}" for i in range(concurrency)],
                                                   max_tokens)  # fmt: skip
    tok_1 = one.completion_tokens / wall_1
    tok_n = sum(t.completion_tokens for t in sat) / wall_n
    return {
        "tok_s_1": tok_1,
        "tok_s_saturated": tok_n,
        "concurrency": concurrency,
        "ratio": tok_n / tok_1 if tok_1 > 0 else 0.0,
        "max_tokens": max_tokens,
        "wall_1_s": wall_1,
        "wall_saturated_s": wall_n,
        "completion_tokens_saturated": sum(t.completion_tokens for t in sat),
    }


def batching_gain(base_url: str, model: str, *, concurrency: int = 16, max_tokens: int = 64,
                  prompt: str = DEFAULT_PROMPT, api_key: str | None = None) -> dict[str, Any]:  # fmt: skip
    """An engine's own gain from batching: output tok/s with ``concurrency`` requests in flight ÷ with one.

    ``base_url`` is the server root or its OpenAI base (``.../v1``); ``model`` the served model name. After one short
    warm-up request, a single request of ``max_tokens`` tokens gives ``tok_s_1`` and ``concurrency`` simultaneous
    ones (each with its own prompt prefix) give ``tok_s_saturated`` (all their tokens over the batch's wall time).
    Returns ``{"tok_s_1", "tok_s_saturated", "concurrency", "ratio"}`` plus the raw walls and token counts. One
    measurement, no repeats: on a shared machine, call it more than once and take the median.
    """
    return asyncio.run(abatching_gain(base_url, model, concurrency=concurrency, max_tokens=max_tokens, prompt=prompt,
                                      api_key=api_key))  # fmt: skip
