"""A synchronous facade over the async pool dispatcher, for frameworks whose model API is blocking and batched.

The framework calls ``generate(batch)`` from its own thread; the batch is submitted concurrently on a private event
loop so the pool keeps every replica busy (the framework's batch becomes in-flight requests, not a serial loop).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from omnieval.core import PoolConfig
from pool import Dispatcher, ResponseCache, lookup_response, lookup_scores
from schedulers import RoutingRequest
from serving import GenerationRequest, GenerationResult, ScoreRequest, ScoreResult, TokenizeRequest, prompt_text

T = TypeVar("T")
log = logging.getLogger("omnieval")


def _load_tokenizer(folder: Path) -> Callable[[list[str]], list[list[int]]] | None:
    """A batch encoder (no special tokens) for the checkpoint's tokenizer: its ``tokenizer.json`` through the
    ``tokenizers`` library (the Rust tokenizer transformers' fast tokenizers wrap; imports in milliseconds), else
    transformers' ``AutoTokenizer``; None when neither is there."""
    if (folder / "tokenizer.json").is_file():
        try:
            from tokenizers import Tokenizer

            fast = Tokenizer.from_file(str(folder / "tokenizer.json"))
            return lambda texts: [list(e.ids) for e in fast.encode_batch(texts, add_special_tokens=False)]
        except (ImportError, Exception):  # noqa: BLE001 - an unreadable file: try transformers' loader
            pass
    if not (folder / "tokenizer_config.json").is_file():
        return None
    try:
        from transformers import AutoTokenizer
    except ImportError:
        return None
    hf = AutoTokenizer.from_pretrained(str(folder))
    return lambda texts: [list(map(int, ids)) for ids in hf(texts, add_special_tokens=False)["input_ids"]]


class PoolBridge:
    def __init__(self, model: str, controller: Any, pool_cfg: PoolConfig, *, seed: int = 0,
                 cache_path: str | None = None) -> None:  # fmt: skip
        self.model = model
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="pool-bridge")
        self._thread.start()
        self.dispatcher = Dispatcher(model, controller, pool_cfg, seed=seed)
        self.cache = ResponseCache(cache_path) if cache_path else None
        self.sent = 0
        self.cache_hits = 0
        self.ready_timeout_s = 3600.0
        self._is_ready = False
        self._tok: Any = None
        self._tok_checked = False
        self.on_result: Callable[[GenerationResult | ScoreResult | BaseException], None] | None = None
        """Called (on the bridge's loop thread) as each request finishes: the run's progress for framework tasks."""

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _one(self, req: GenerationRequest) -> GenerationResult | BaseException:
        cached = await lookup_response(self.cache, self.dispatcher, req.messages, req.options, prompt=req.prompt)
        if cached.hit is not None:
            self.cache_hits += 1
            return cached.hit.model_copy(update={"from_cache": True})  # the adapter's Record says so
        routing = RoutingRequest(
            model=self.model,
            prompt_text=req.prompt if req.prompt is not None else prompt_text(req.messages),
            est_tokens=req.options.max_tokens,
        )
        try:
            res, _, _ = await self.dispatcher.submit(req, routing)
        except Exception as e:  # noqa: BLE001 - returned per request; the framework decides what a failure means
            return e
        self.sent += 1
        cached.store(res)
        return res

    async def _ready(self) -> None:
        """Wait until the model has a replica that reported its identity: the framework actor starts while the
        engines load, and a request sent before would skip the response cache."""
        deadline = time.monotonic() + self.ready_timeout_s
        while True:
            await self.dispatcher.refresh(force=True)
            left = deadline - time.monotonic()
            if self.dispatcher.model_identity() is not None or left <= 0:
                return  # past the deadline the requests themselves report what is wrong
            await self.dispatcher.replica_up(left)  # returns the moment a replica is up

    async def _reported(self, req: GenerationRequest) -> GenerationResult | BaseException:
        res = await self._one(req)
        if self.on_result is not None:
            self.on_result(res)
        return res

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult | BaseException]:
        async def all_() -> list[GenerationResult | BaseException]:
            if not self._is_ready:
                await self._ready()
                self._is_ready = True
            return list(await asyncio.gather(*(self._reported(r) for r in requests)))

        return self._run(all_())

    async def _score_one(self, req: ScoreRequest, prefix: str) -> ScoreResult | BaseException:
        cached = await lookup_scores(self.cache, self.dispatcher, req)
        if cached.hit is not None:
            self.cache_hits += 1
            res: ScoreResult | BaseException = cached.hit.model_copy(update={"from_cache": True})
        else:
            try:  # the context's text routes it: a prefix-aware policy keeps one context on one replica
                res, _, _ = await self.dispatcher.submit(req, RoutingRequest(model=self.model, prompt_text=prefix,
                                                                             est_tokens=1))  # fmt: skip
                self.sent += 1
                cached.store(res)
            except Exception as e:  # noqa: BLE001 - returned per request, as for generation
                res = e
        if self.on_result is not None:
            self.on_result(res)
        return res

    async def _when_ready(self) -> None:
        if not self._is_ready:
            await self._ready()
            self._is_ready = True

    def prefix_token_id(self) -> int | None:
        """BOS (else EOS) of the served tokenizer, once a replica is up."""

        async def get() -> int | None:
            await self._when_ready()
            return self.dispatcher.prefix_token_id()

        return self._run(get())

    def score(self, requests: list[tuple[ScoreRequest, str]]) -> list[ScoreResult | BaseException]:
        """Log-likelihoods of (request, context text) pairs, all in flight at once."""

        async def all_() -> list[ScoreResult | BaseException]:
            await self._when_ready()
            return list(await asyncio.gather(*(self._score_one(r, p) for r, p in requests)))

        return self._run(all_())

    def _local_tokenizer(self) -> Any:
        """The served tokenizer loaded here from the checkpoint folder a replica publishes, when this process can
        read it (same machine or a shared filesystem) and has transformers: one batched call instead of a request
        per text. It must tokenize a probe exactly as the replica's own ``/tokenize`` does, else it is not used."""
        if self._tok_checked:
            return self._tok
        self._tok_checked = True
        folder = self.dispatcher.tokenizer_dir()
        tok = None if folder is None else _load_tokenizer(Path(folder))
        if tok is None:
            return None
        probe = ["The capital of France is Paris.", " 42\n\nAnswer: B", "naïve café — 東京 <|im_end|>"]
        remote = self._remote_tokenize(probe)
        local = tok(probe)
        if any(isinstance(r, BaseException) for r in remote) or remote != local:
            log.warning("the tokenizer in %s does not tokenize as the replica does; asking the replica", folder)
            return None
        self._tok = tok
        return tok

    def tokenize(self, texts: list[str]) -> list[list[int] | BaseException]:
        """Token ids of each text from the served model's own tokenizer: loaded here when the replica's checkpoint
        folder is readable (checked against the replica), else from any healthy replica's ``/tokenize``."""
        if not self._is_ready:
            self._run(self._when_ready())
        tok = self._local_tokenizer()
        if tok is not None:
            return list(tok(texts))
        return self._remote_tokenize(texts)

    def _remote_tokenize(self, texts: list[str]) -> list[list[int] | BaseException]:

        async def one(i: int, text: str) -> list[int] | BaseException:
            try:
                res, _, _ = await self.dispatcher.submit(TokenizeRequest(request_id=f"tokenize/{i}", text=text),
                                                         RoutingRequest(model=self.model, prompt_text="", est_tokens=0))  # fmt: skip
                return res.tokens
            except Exception as e:  # noqa: BLE001 - the caller names the text that failed
                return e

        async def all_() -> list[list[int] | BaseException]:
            await self._when_ready()
            return list(await asyncio.gather(*(one(i, t) for i, t in enumerate(texts))))

        return self._run(all_())

    def close(self) -> None:
        async def done() -> None:
            await self.dispatcher.flush()
            await self.dispatcher.close()

        try:
            self._run(done())
        except Exception:  # noqa: BLE001 - the controller may be gone at teardown; the results are already in
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
