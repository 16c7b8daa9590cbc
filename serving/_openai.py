"""An external OpenAI-compatible server (vLLM, SGLang, llama-server, ...) as a pool engine."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, ClassVar, Literal, cast

import httpx

from omnieval.core import ReplicaDead, RequestFailed
from serving._engine import Engine, pop_known
from serving._features import ALL, EngineFeatures
from serving._scoring import ScoringDialect
from serving._types import Endpoint, GenerationRequest, GenerationResult, TokenLogprob

_DEFAULTS: dict[str, Any] = {"timeout_s": 300.0, "slots": 8, "max_connections": 256, "scoring": None,
                             "tokenizer": None}
SCORING_DIALECTS = ("vllm", "llamacpp", "sglang")


VIDEO_SAMPLING = ("num_frames", "sampling_strategy", "fps")


def _video_sampling(messages: list[dict[str, Any]], dialect: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Messages with plain OpenAI ``video_url`` parts, and the Record's clip sampling in the server's own terms
    (vLLM: ``media_io_kwargs.video``; one setting per request, so clips of one request must agree)."""
    wanted: dict[str, Any] = {}
    if not any(isinstance(m.get("content"), list) and any(p.get("type") == "video_url" for p in m["content"])
               for m in messages):  # fmt: skip
        return messages, {}
    out = []
    for m in messages:
        c = m.get("content")
        if not isinstance(c, list):
            out.append(m)
            continue
        parts = []
        for p in c:
            if p.get("type") == "video_url":
                v = dict(p["video_url"])
                got = {k: v.pop(k) for k in VIDEO_SAMPLING if k in v}
                if wanted and got != wanted:
                    raise RequestFailed(f"clips of one request ask for different sampling: {wanted} vs {got}")
                wanted = got
                p = {**p, "video_url": v}
            parts.append(p)
        out.append({**m, "content": parts})
    if dialect != "vllm" or not wanted:
        return out, {}
    strategy = wanted.get("sampling_strategy")
    if strategy == "keyframe":
        raise RequestFailed("vLLM samples clips uniformly or by fps; 'keyframe' sampling is not available there")
    video: dict[str, Any] = {}
    if wanted.get("num_frames"):
        video["num_frames"] = int(wanted["num_frames"])
    if strategy == "fps" and wanted.get("fps"):
        video["fps"] = wanted["fps"]
    return out, ({"media_io_kwargs": {"video": video}} if video else {})


def chat_payload(req: GenerationRequest, served_model_name: str, dialect: str = "openai") -> dict[str, Any]:
    """The ``/v1/chat/completions`` body for a request (shared by the engine and the pool's direct transport)."""
    o = req.options
    messages, extra = _video_sampling(req.messages, dialect)
    body: dict[str, Any] = {
        "model": served_model_name,
        "messages": messages,
        **extra,
        "temperature": o.temperature,
        "top_p": o.top_p,
        "max_tokens": o.max_tokens,
    }
    if o.stop:
        body["stop"] = o.stop
    if o.seed is not None:
        body["seed"] = o.seed
    if req.grammar is not None:
        if dialect == "vllm":
            body["structured_outputs"] = {"grammar": req.grammar}
        else:
            body["grammar"] = req.grammar
    if req.top_logprobs is not None:
        body["logprobs"] = True
        body["top_logprobs"] = req.top_logprobs
    return body


def completion_payload(req: GenerationRequest, served_model_name: str) -> dict[str, Any]:
    """The ``/v1/completions`` body for a raw-prompt request (no chat template; the server tokenizes the text as
    lm-eval's ``local-completions`` client has it do)."""
    o = req.options
    body: dict[str, Any] = {"model": served_model_name, "prompt": req.prompt, "temperature": o.temperature,
                            "top_p": o.top_p, "max_tokens": o.max_tokens}  # fmt: skip
    if o.stop:
        body["stop"] = o.stop
    if o.seed is not None:
        body["seed"] = o.seed
    return body


def request_route(
    req: GenerationRequest, served_model_name: str, dialect: str = "openai"
) -> tuple[str, dict[str, Any]]:
    """Path and body of a request on an OpenAI-compatible server: a chat, or a raw-prompt text completion."""
    if req.prompt is not None:
        return "/completions", completion_payload(req, served_model_name)
    return "/chat/completions", chat_payload(req, served_model_name, dialect)


def parse_completion(raw: bytes, request_id: str, latency_s: float) -> GenerationResult:
    """A chat or text completion response body → ``GenerationResult``."""
    try:
        data = json.loads(raw)
        choice = data["choices"][0]
    except (ValueError, KeyError, IndexError, TypeError) as e:
        raise RequestFailed(f"malformed response ({e!r}): {raw[:200]!r}") from None
    if "message" in choice or "text" not in choice:
        return parse_chat_completion(raw, request_id, latency_s)
    usage = data.get("usage") or {}
    return GenerationResult(
        request_id=request_id, text=_decode_text(choice.get("text")), finish_reason=choice.get("finish_reason"),
        prompt_tokens=int(usage.get("prompt_tokens") or 0), completion_tokens=int(usage.get("completion_tokens") or 0),
        engine_latency_s=latency_s,
    )  # fmt: skip


def _token_logprobs(choice: dict[str, Any]) -> list[TokenLogprob] | None:
    content = (choice.get("logprobs") or {}).get("content")
    if not content:
        return None
    out = []
    for t in content:
        top: dict[str, float] = {}
        for alt in t.get("top_logprobs") or []:
            tok, lp = alt["token"], float(alt["logprob"])
            top[tok] = max(lp, top.get(tok, lp))
        out.append(TokenLogprob(token=t["token"], logprob=float(t["logprob"]), top=top))
    return out


def parse_chat_completion(raw: bytes, request_id: str, latency_s: float) -> GenerationResult:
    """A chat completion response body → ``GenerationResult``; a malformed one is a ``RequestFailed``."""
    try:
        data = json.loads(raw)
        choice = data["choices"][0]
        msg = choice.get("message") or {}
        text = _decode_text(msg.get("content"))
        usage = data.get("usage") or {}
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
        if cached is None:  # llama-server also reports it as timings.cache_n
            cached = (data.get("timings") or {}).get("cache_n")
        return GenerationResult(
            request_id=request_id,
            text=text,
            reasoning_content=msg.get("reasoning_content"),
            finish_reason=choice.get("finish_reason"),
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            cached_prompt_tokens=int(cached) if isinstance(cached, (int, float)) else None,
            engine_latency_s=latency_s,
            logprobs=_token_logprobs(choice),
        )
    except RequestFailed:
        raise
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
        raise RequestFailed(f"malformed response ({e!r}): {raw[:200]!r}") from None


def _decode_text(raw: Any) -> str:
    if raw is None:
        return ""
    if not isinstance(raw, str):
        raise RequestFailed(f"engine returned non-text content of type {type(raw).__name__}")
    return raw


class OpenAIEngine(Engine):
    """Talks ``/v1/chat/completions``; the server does the batching, we only keep many requests in flight."""

    option_defaults: ClassVar[dict[str, Any]] = _DEFAULTS

    name: ClassVar[str] = "openai"
    cpu_bound: ClassVar[bool] = False
    dialect: ClassVar[Literal["openai", "vllm"]] = "openai"
    """Request extensions the server takes (see ``Endpoint.dialect``)."""

    @classmethod
    def features(cls, model_path: Path | None, kwargs: dict[str, Any]) -> EngineFeatures:
        """An external server says nothing of its model's inputs: trusted with every modality unless the suite
        narrows ``models[].modalities`` (engines that run their own server override this)."""
        return EngineFeatures(ALL.modalities, True, "an external server (set models[].modalities to check it)")

    @classmethod
    def scoring(cls, kwargs: dict[str, Any]) -> str | None:
        """An external server scores only when the suite says which server it is (``engine_kwargs.scoring``:
        vllm, sglang or llamacpp): the OpenAI API itself has no prompt log-probabilities."""
        got = kwargs.get("scoring")
        if got is not None and got not in SCORING_DIALECTS:
            from omnieval.core import OmnievalUserError

            raise OmnievalUserError(f"engine 'openai': engine_kwargs.scoring must be one of {list(SCORING_DIALECTS)} "
                                    f"(the server behind the endpoint) or unset, got {got!r}")  # fmt: skip
        return got

    def __init__(
        self,
        *,
        replica_id: str,
        model: str,
        base_url: str,
        served_model_name: str | None = None,
        api_key_env: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(replica_id=replica_id, model=model)
        opts = pop_known(kwargs, self.name, _DEFAULTS)
        self.base_url = base_url.rstrip("/")
        self.served_model_name = served_model_name or model
        self.slots = int(opts["slots"])
        self.timeout_s = float(opts["timeout_s"])
        self._api_key = os.environ.get(api_key_env, "") if api_key_env else ""
        self._max_connections = int(opts["max_connections"])
        self._client: httpx.AsyncClient | None = None
        self._server_version: str | None = None
        self.node_ip: str | None = None
        """Set by managed servers (the Ray node's IP); None marks a server outside the cluster."""
        tok = opts["tokenizer"]
        self._stats.tokenizer_dir = str(Path(tok).expanduser()) if tok and self.name == "openai" else None
        """An external server's tokenizer folder as the suite gives it (lm-eval's ``tokenizer=``): clients that
        read it tokenize locally once it tokenizes a probe exactly as the server does."""
        self.scoring_dialect: ScoringDialect | None = cast("ScoringDialect | None", type(self).scoring(opts) if self.name == "openai" else None)

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    async def start(self) -> None:
        limits = httpx.Limits(max_connections=self._max_connections, max_keepalive_connections=self._max_connections)
        self._client = httpx.AsyncClient(
            base_url=self.base_url, timeout=self.timeout_s, limits=limits, headers=self._headers()
        )
        try:
            r = await self._client.get("/models", timeout=10.0)
            r.raise_for_status()
        except (httpx.HTTPError, OSError) as e:
            raise ReplicaDead(f"endpoint {self.base_url} is unreachable ({e!r}); is the server running?") from None

    async def check_health(self) -> bool:
        assert self._client is not None
        try:
            r = await self._client.get("/models", timeout=5.0)
            return r.status_code == 200
        except (httpx.HTTPError, OSError):
            return False

    def endpoint(self) -> Endpoint | None:
        return Endpoint(base_url=self.base_url, served_model_name=self.served_model_name, api_key=self._api_key or None,
                        node_ip=self.node_ip, scoring=self.scoring_dialect)  # fmt: skip

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        if self._client is None:
            raise ReplicaDead("engine not started", replica_id=self._stats.replica_id)
        t0 = time.monotonic()
        with self._track():
            try:
                path, body = request_route(request, self.served_model_name, self.dialect)
                r = await self._client.post(path, json=body)
            except httpx.TimeoutException:
                raise RequestFailed(f"timeout after {self.timeout_s}s", timeout=True) from None
            except (httpx.ConnectError, httpx.RemoteProtocolError) as e:
                if not await self.check_health():
                    raise ReplicaDead(f"{self.base_url} stopped answering: {e!r}") from None
                raise RequestFailed(f"connection error: {e!r}") from None
            if r.status_code >= 400:
                raise RequestFailed(f"HTTP {r.status_code}: {r.text[:300]}")
            result = parse_completion(r.content, request.request_id, time.monotonic() - t0)
        return self._account(result)

    async def shutdown(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
