"""INSTANT server — no model runs: an OpenAI-compatible HTTP server that answers every chat (or text) completion at
once.

Why it exists: to measure the pool's own line rate (``omnieval bench pool``), the engine behind it must cost nothing.
It speaks just enough HTTP/1.1 (keep-alive, Content-Length bodies) on a bare asyncio protocol to be far faster than
any client in front of it; every answer says it is not a model (``INSTANT_TEXT``). Run it as an external endpoint
(``python -m serving._instant --port 8000``) or as a managed replica (engine ``instant``); never for evaluations.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any, ClassVar, Literal

from serving._features import ALL, EngineFeatures
from serving._managed import ServerEngine

INSTANT_TEXT = "[INSTANT SERVER OUTPUT: no model was run]"
"""The content of every answer, so an instant-server record can never pass for a model prediction."""


def _response(status: str, body: bytes, content_type: str = "application/json") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def _completion(max_tokens: int) -> bytes:
    return json.dumps({
        "id": "instant", "object": "chat.completion", "created": int(time.time()), "model": "instant",
        "choices": [{"index": 0, "finish_reason": "length",
                     "message": {"role": "assistant", "content": INSTANT_TEXT}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": max_tokens, "total_tokens": 1 + max_tokens},
    }).encode()  # fmt: skip


def _text_completion(max_tokens: int) -> bytes:
    return json.dumps({
        "id": "instant", "object": "text_completion", "created": int(time.time()), "model": "instant",
        "choices": [{"index": 0, "finish_reason": "length", "text": INSTANT_TEXT}],
        "usage": {"prompt_tokens": 1, "completion_tokens": max_tokens, "total_tokens": 1 + max_tokens},
    }).encode()  # fmt: skip


def _text_completion_stream(max_tokens: int) -> bytes:
    """Server-sent events of a streamed text completion: one chunk per token (all written at once), then usage."""
    head: dict[str, Any] = {"id": "instant", "object": "text_completion", "model": "instant"}
    usage = {"prompt_tokens": 1, "completion_tokens": max_tokens, "total_tokens": 1 + max_tokens}
    events = [head | {"choices": [{"index": 0, "text": INSTANT_TEXT if i == 0 else "."}]} for i in range(max_tokens)]
    events.append(head | {"choices": [], "usage": usage})
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode() + b"data: [DONE]\n\n"


def _tokens(text: str) -> list[int]:
    """The INSTANT tokenizer: one token per character (its code point), so ``enc(a)`` is a prefix of ``enc(a + b)``."""
    return [ord(c) for c in text]


def _scored_completion(prompts: list[list[int]]) -> bytes:
    """vLLM's reply to ``prompt_logprobs: 1``: every prompt token after the first at log-probability -1, rank 1."""
    choices = []
    for i, ids in enumerate(prompts):
        entries = "".join(f',{{"{t}":{{"logprob":-1.0,"rank":1}}}}' for t in ids[1:])
        choices.append(f'{{"index":{i},"text":"","finish_reason":"length","prompt_logprobs":[null{entries}]}}')
    n = sum(len(p) for p in prompts)
    usage = f'{{"prompt_tokens":{n},"completion_tokens":{len(prompts)},"total_tokens":{n + len(prompts)}}}'
    body = f'{{"id":"instant","object":"text_completion","model":"instant","choices":[{",".join(choices)}],"usage":{usage}}}'
    return body.encode()


_MODELS = json.dumps({"object": "list", "data": [{"id": "instant", "object": "model"}]}).encode()


class _Protocol(asyncio.Protocol):
    def __init__(self, api_key: str | None, counter: list[int]) -> None:
        self.buf = b""
        self.api_key = api_key
        self.counter = counter
        self.transport: asyncio.Transport | None = None
        self._cache: dict[int, bytes] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].decode("latin-1")
            lines = head.split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
            n = int(headers.get("content-length", "0"))
            if len(self.buf) < end + 4 + n:
                return
            body = self.buf[end + 4 : end + 4 + n]
            self.buf = self.buf[end + 4 + n :]
            assert self.transport is not None
            self.transport.write(self._answer(lines[0], headers, body))

    def _answer(self, request_line: str, headers: dict[str, str], body: bytes) -> bytes:
        method, _, rest = request_line.partition(" ")
        path = rest.partition(" ")[0]
        if path == "/health":
            return _response("200 OK", b'{"status":"ok"}')
        if self.api_key is not None and headers.get("authorization", "").partition(" ")[2] != self.api_key:
            return _response("401 Unauthorized", b'{"error":"invalid api key"}')
        if method == "GET" and path in ("/v1/models", "/models"):
            return _response("200 OK", _MODELS)
        if method == "POST" and path in ("/v1/chat/completions", "/chat/completions"):
            try:
                max_tokens = int(json.loads(body).get("max_tokens") or 1)
            except (ValueError, AttributeError):
                return _response("400 Bad Request", b'{"error":"body is not a JSON object"}')
            self.counter[0] += 1
            out = self._cache.get(max_tokens)
            if out is None:
                out = self._cache[max_tokens] = _response("200 OK", _completion(max_tokens))
            return out
        if method == "POST" and path == "/tokenize":  # vLLM's shape: {"prompt"} -> {"tokens"}
            try:
                toks = _tokens(str(json.loads(body)["prompt"]))
            except (ValueError, KeyError, TypeError):
                return _response("400 Bad Request", b'{"error":"tokenize takes {\\"prompt\\": text}"}')
            return _response("200 OK", json.dumps({"tokens": toks, "count": len(toks)}).encode())
        if method == "POST" and path in ("/v1/completions", "/completions"):  # legacy completions (engine probes)
            try:
                req = json.loads(body)
                max_tokens = max(1, int(req.get("max_tokens") or 1))
            except (ValueError, AttributeError):
                return _response("400 Bad Request", b'{"error":"body is not a JSON object"}')
            self.counter[0] += 1
            if req.get("logprob_token_ids"):  # one-token choices, as vLLM answers them
                ids = [int(t) for t in req["logprob_token_ids"]]
                top = ",".join(f'"token_id:{t}":-1.0' for t in ids)
                scored = (f'{{"id":"instant","object":"text_completion","model":"instant","choices":[{{"index":0,'
                        f'"text":"","finish_reason":"length","logprobs":{{"tokens":["token_id:{ids[0]}"],'
                        f'"token_logprobs":[-1.0],"top_logprobs":[{{{top}}}],"text_offset":[0]}}}}]}}')  # fmt: skip
                return _response("200 OK", scored.encode())
            if req.get("prompt_logprobs") is not None:  # scoring, as vLLM answers it
                prompt = req.get("prompt")
                prompts = prompt if prompt and isinstance(prompt[0], list) else [prompt]
                if not all(isinstance(p, list) for p in prompts):
                    return _response("400 Bad Request", b'{"error":"the INSTANT server scores token-id prompts"}')
                return _response("200 OK", _scored_completion(prompts))
            if req.get("stream"):
                return _response("200 OK", _text_completion_stream(max_tokens), "text/event-stream")
            return _response("200 OK", _text_completion(max_tokens))
        return _response("404 Not Found", b'{"error":"not found"}')


async def serve(host: str, port: int, api_key: str | None = None) -> None:
    counter = [0]
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Protocol(api_key, counter), host, port, backlog=1024)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m serving._instant", description=__doc__)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--api-key", default=None)
    a = p.parse_args(argv)
    try:
        asyncio.run(serve(a.host, a.port, a.api_key))
    except KeyboardInterrupt:
        pass


class InstantEngine(ServerEngine):
    """INSTANT (no model): a replica that owns an instant server process, for line-rate benchmarks only."""

    name: ClassVar[str] = "instant"
    cpu_bound: ClassVar[bool] = False
    score_dialect: ClassVar[Literal["vllm", "llamacpp", "sglang"] | None] = "vllm"

    @classmethod
    def features(cls, model_path: Path | None, kwargs: dict[str, Any]) -> EngineFeatures:
        """No model behind it: every modality is answered (line-rate studies)."""
        return ALL

    def __init__(self, *, replica_id: str, model: str, model_path: str | None = None, **kwargs: Any) -> None:
        super().__init__(replica_id=replica_id, model=model, **kwargs)
        self.startup_timeout_s = 60.0
        self._stats.prefix_token_id = 0

    def version(self) -> str | None:
        return "instant (no model)"

    def server_command(self) -> list[str]:
        return [sys.executable, "-m", "serving._instant", "--host", "{host}", "--port", "{port}"]


if __name__ == "__main__":
    main()
