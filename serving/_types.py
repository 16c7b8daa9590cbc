"""Typed messages between client actors and replicas (never bare dicts or tuples)."""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from omnieval.core import GenerationOptions, ModelSource


class Endpoint(BaseModel):
    """Where client actors reach a replica's own OpenAI-compatible server over HTTP (no per-request Ray RPC).

    ``node_ip`` is the IP of the Ray node running the server, or None for an external endpoint; a client on the same
    node connects over loopback instead (``url_for``), so a server bound to every interface is reached locally.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    base_url: str
    """OpenAI base URL ending in ``/v1``, as reachable from other nodes (or as given, for an external server)."""
    served_model_name: str
    """The ``model`` field the server expects."""
    api_key: str | None = None
    """Bearer token (a per-replica secret for managed servers; the user's key for external ones)."""
    node_ip: str | None = None
    """IP of the Ray node hosting the server; None for a server outside the cluster."""
    dialect: Literal["openai", "vllm", "omnieval"] = "openai"
    """Request extensions the server takes beyond OpenAI's: ``vllm`` reads a clip's sampling from
    ``media_io_kwargs`` (the Record's ``num_frames`` / ``fps``); others get plain ``video_url`` parts.
    ``omnieval``: not OpenAI's API but omnieval's own request and result models (an in-process engine in a process
    of its own, ``serving._process_server``), so requests, scoring and tokenizing cross it unchanged."""
    scoring: Literal["vllm", "llamacpp", "sglang", "omnieval"] | None = None
    """How the server tokenizes and returns log-probabilities of given tokens (``serving._scoring``); None: it
    cannot score (generation only)."""

    def url_for(self, client_ip: str | None) -> str:
        """Base URL for a client on ``client_ip``: loopback when it shares the server's node."""
        if self.node_ip is not None and client_ip == self.node_ip:
            return self.base_url.replace(f"//{self.node_ip}:", "//127.0.0.1:", 1)
        return self.base_url


class GenerationRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    request_id: str
    """Unique id (model/benchmark/index/attempt) used in logs and for exactly-once accounting."""
    messages: list[dict[str, Any]]
    """OpenAI chat messages (content parts for media); empty for a raw ``prompt``."""
    options: GenerationOptions
    """Decoding options."""
    grammar: str | None = None
    """GBNF grammar the output must match (llama-server's ``grammar`` field; vLLM's ``structured_outputs``), for
    replies a program parses, such as a judge's verdict. None = free text."""
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    """Also return each generated token's log-probability and the ``top_logprobs`` most likely alternatives."""
    prompt: str | None = None
    """Raw text continued with no chat template (``/v1/completions``), as lm-eval's ``local-completions`` client
    sends a task with ``apply_chat_template`` off; None sends ``messages`` as a chat."""

    @model_validator(mode="after")
    def _one_input(self) -> GenerationRequest:
        if self.prompt is not None and self.messages:
            raise ValueError("a request carries chat messages or a raw prompt, not both")
        return self


class ScoreRequest(BaseModel):
    """Log-likelihood of continuations given one shared context, on token ids the served model's own tokenizer
    made (a multiple-choice document's choices travel together: one replica, one prefix)."""

    model_config = ConfigDict(extra="forbid")
    request_id: str
    """Unique id, as for generation."""
    context: list[int] = Field(min_length=1)
    """Context token ids (lm-eval puts the prefix token here when the context is empty)."""
    continuations: list[list[int]] = Field(min_length=1)
    """Token ids of each continuation, scored after ``context``."""


class TokenizeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    request_id: str
    """Unique id."""
    text: str
    """Text to tokenize with the served model's own tokenizer, no special tokens added."""


class TokenizeResult(BaseModel):
    model_config = ConfigDict(extra="forbid")
    request_id: str
    """Echo of the request id."""
    tokens: list[int]
    """Token ids."""
    replica_id: str = ""
    """Replica that answered."""
    completion_tokens: int = 0
    """Always 0 (pool accounting treats every result kind alike)."""


class ChoiceLogprob(BaseModel):
    """One continuation's score: what lm-eval's ``loglikelihood`` returns, plus the per-token detail."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    logprob: float
    """Sum of the continuation tokens' natural-log probabilities."""
    n_tokens: int
    """Continuation tokens scored."""
    is_greedy: bool
    """Every continuation token was the model's most likely next token."""
    token_logprobs: list[float] = Field(default_factory=list)
    """Each continuation token's log-probability, in order."""


class ScoreResult(BaseModel):
    model_config = ConfigDict(extra="forbid")
    request_id: str
    """Echo of the request id."""
    choices: list[ChoiceLogprob]
    """One per continuation, in the request's order."""
    prompt_tokens: int = 0
    """Tokens the engine read (context + continuations)."""
    engine_latency_s: float = 0.0
    """Seconds spent inside the replica."""
    replica_id: str = ""
    """Replica that served it."""
    completion_tokens: int = 0
    """Always 0 (nothing is generated); here so pool accounting treats both result kinds alike."""
    from_cache: bool = Field(default=False, exclude=True)
    """Answered from the response cache (never stored in it)."""


class TokenLogprob(BaseModel):
    """One generated token with its log-probability and the most likely alternatives at that position."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    token: str
    """Token text."""
    logprob: float
    """Natural-log probability of the token under the model (before sampling constraints)."""
    top: dict[str, float] = Field(default_factory=dict)
    """Alternative token text -> logprob (the chosen token included); a token text seen twice keeps its best."""


class GenerationResult(BaseModel):
    model_config = ConfigDict(extra="forbid")
    request_id: str
    """Echo of the request id."""
    text: str
    """Generated text."""
    reasoning_content: str | None = None
    """Separate reasoning trace if the engine returns one."""
    finish_reason: str | None = None
    """stop | length | ..."""
    prompt_tokens: int = 0
    """Prompt tokens."""
    completion_tokens: int = 0
    """Generated tokens."""
    engine_latency_s: float = 0.0
    """Seconds spent inside the replica."""
    replica_id: str = ""
    """Replica that served it."""
    cached_prompt_tokens: int | None = None
    """Prompt tokens reused from the engine's KV cache (None when the engine does not report it)."""
    logprobs: list[TokenLogprob] | None = None
    """Per-token log-probabilities, when the request asked for ``top_logprobs`` and the engine returns them."""
    from_cache: bool = Field(default=False, exclude=True)
    """Answered from the response cache, not inferred now (set by whoever read the cache; never stored in it), so
    throughput counts it as a cache hit rather than a request served."""


class EngineStats(BaseModel):
    model_config = ConfigDict(extra="forbid")
    replica_id: str
    """Replica id."""
    engine: str
    """Engine backend."""
    model: str
    """Suite model name."""
    healthy: bool = True
    """Last health check result."""
    in_flight: int = 0
    """Requests being served now."""
    peak_in_flight: int = 0
    """Most requests in flight at once since start (shows batching across clients and suites)."""
    peak_clients: int = 0
    """Most clients with requests in it at once (the pool's view; >1 means their requests were batched together)."""
    queue_depth: int = 0
    """Requests waiting for a batch slot (in_flight beyond the engine's slots)."""
    slots: int = 1
    """Concurrent sequences the engine batches."""
    completed: int = 0
    """Requests finished."""
    failed: int = 0
    """Requests failed."""
    output_tokens: int = 0
    """Generated tokens since start."""
    prompt_tokens: int = 0
    """Prompt tokens prefilled since start (the engine's own count where its server keeps one)."""
    cached_prompt_tokens: int = 0
    """Of ``prompt_tokens``, those served from the engine's prefix cache (not computed), where it counts them
    (vLLM): the work a roofline charges is the rest."""
    kv_usage: float | None = None
    """Share of the KV cache in use now (0-1), where the engine reports it."""
    batches: int = 0
    """Batched forward calls (engines that batch per step in-process: transformers): its prefill forwards and
    decode steps under continuous batching, its ``generate`` calls under static batching."""
    batch_rows: int = 0
    """Rows those calls served: ``batch_rows / batches`` is the engine's mean batch."""
    media_items: int = 0
    """Images, frames and audio clips encoded since start, where the engine counts them (transformers; vLLM: its
    multimodal cache's misses)."""
    busy_s: float = 0.0
    """Seconds with at least one request in flight (utilisation numerator)."""
    cpu_s: float | None = None
    """CPU seconds the engine's processes have used (its server and everything under it; an in-process engine: the
    replica's process), by the kernel's count; None for an external server or off Linux."""
    node_cpu_s: float | None = None
    """Busy CPU seconds of the replica's node since boot, all CPUs together: with ``cpu_s``, what else took the
    node's cores meanwhile."""
    node_cpus: int | None = None
    """CPUs of the replica's node."""
    started_at: float = Field(default_factory=time.time)
    """Engine start time (epoch seconds)."""
    load_s: float | None = None
    """Seconds the replica took to build and start its engine (weights loaded, server healthy): the engine's own
    load time, without Ray's placement and Serve's deploy around it. For a server the driver pre-started, from its
    launch."""
    prestarted: bool = False
    """The replica took over a server the driver started before Ray (``serving._prestart``)."""
    node_id: str | None = None
    """Ray node the replica runs on."""
    engine_version: str | None = None
    """Engine version string."""
    model_path: str | None = None
    """Weights file the engine loaded."""
    model_sha256: str | None = None
    """sha256 of the weights file."""
    endpoint: Endpoint | None = None
    """The engine's own OpenAI-compatible server, when it has one: clients send requests there directly."""
    prefix_token_id: int | None = None
    """The token lm-eval scores an empty context after (the tokenizer's BOS, else its EOS); None: not known."""
    tokenizer_dir: str | None = None
    """The Hugging Face checkpoint folder whose tokenizer the engine serves with (vLLM, SGLang, transformers), so a
    client on the same filesystem can tokenize locally, exactly as the engine does; None: ask the server."""
    log: str | None = None
    """``host:path`` of the engine server's log (moved out of the clean-stop removal once the server failed)."""
    health_detail: str | None = None
    """Why the last health check failed: the last lines of the engine's log."""

    @property
    def tokens_per_s(self) -> float:
        up = max(time.time() - self.started_at, 1e-9)
        return self.output_tokens / up


class EngineSpec(BaseModel):
    """Everything a replica needs to build its engine, shipped by value (resolvable inside any Ray worker)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    replica_id: str
    """Pool-unique replica id; also the Serve app name."""
    model: str
    """Suite model name."""
    engine: str
    """Engine name in ``serving.ENGINES``."""
    engine_target: str
    """``module:Class`` of the engine."""
    source: ModelSource
    """Model source (pypi/path/hf/endpoint)."""
    engine_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Pass-through engine options."""
