"""SIMULATED engine — no model runs; for scale studies and orchestration-overhead benchmarks only.

Why it exists: this machine cannot host 256 real replicas, and measuring the pool's own per-request overhead needs
an engine whose cost is known (or zero). The simulated engine reproduces llama-server's *timing* (continuous
batching, per-step decode cost growing with batch size, prefill proportional to uncached prompt tokens, a KV prefix
cache) from a profile calibrated on real llama-server measurements (``omnieval bench calibrate``); it never produces
model text. Every output says it is simulated: the generated text starts with ``SIMULATED_TEXT``, the engine
version starts with ``simulated``, and results produced with it must be labelled as simulated.

Registered as engine ``"simulated"``; select it only in bench configs, never for real evaluations.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from serving._engine import Engine, pop_known
from serving._features import ALL, EngineFeatures
from serving._types import GenerationRequest, GenerationResult

SIMULATED_TEXT = "[SIMULATED ENGINE OUTPUT: no model was run]"
"""Prefix of every simulated generation, so a simulated record can never pass for a model prediction."""


@dataclass(frozen=True)
class EngineProfile:
    """Timing model of one replica, fitted from real measurements.

    ``step_s(batch, kv) = step_base_s + step_per_seq_s * batch + step_per_kv_token_s * kv`` is the time of one
    continuous-batching decode step producing one token for each of ``batch`` running sequences holding ``kv`` cached
    tokens in all; ``prefill_s(n) = prefill_base_s + prefill_per_token_s * n`` is the prompt processing time of ``n``
    tokens not found in the prefix cache.
    """

    step_base_s: float
    step_per_seq_s: float
    prefill_per_token_s: float
    step_per_kv_token_s: float = 0.0
    prefill_base_s: float = 0.0
    slots: int = 8
    ctx_per_slot: int = 2048
    chars_per_token: float = 4.0
    block_tokens: int = 16
    source: str = "unspecified"
    """Where the numbers come from (machine, date, command); shown in every simulated result."""

    def step_s(self, batch: int, kv_tokens: float = 0.0) -> float:
        if batch <= 0:
            return 0.0
        return self.step_base_s + self.step_per_seq_s * batch + self.step_per_kv_token_s * kv_tokens

    def prefill_s(self, uncached_tokens: float) -> float:
        return self.prefill_base_s + self.prefill_per_token_s * max(0.0, uncached_tokens)

    def tokens(self, text: str) -> int:
        return max(1, round(len(text) / self.chars_per_token))

    @property
    def block_chars(self) -> int:
        return max(1, round(self.block_tokens * self.chars_per_token))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EngineProfile:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known})

    def with_(self, **kw: Any) -> EngineProfile:
        return replace(self, **kw)


# Measured with `omnieval bench calibrate --repeats 3` on 2026-12-02 (llama-server 0c1e570, SmolLM2-135M Q4_1, -t 1,
# --parallel 1/2/4/8, medians of 3 repeats) on the shared 2-core dev VM at load average ~20: absolute times are those
# of a heavily contended core (median residual of the decode fit ~20 %); see docs/scale-study.md for points and fit.
DEFAULT_PROFILE = EngineProfile(
    step_base_s=0.0760,
    step_per_seq_s=0.00987,
    step_per_kv_token_s=0.000177,
    prefill_base_s=0.0,
    prefill_per_token_s=0.0304,
    slots=8,
    ctx_per_slot=2048,
    chars_per_token=5.9,
    source="bench calibrate 2026-12-02: llama-server -t 1, SmolLM2-135M Q4_1, shared 2-core VM (docs/scale-study.md)",
)


def block_hashes(text: str, block_chars: int, prefix: Sequence[int] = ()) -> tuple[int, ...]:
    """Chained hashes of the full blocks of ``text`` (a partial last block is never cached, as in vLLM/llama.cpp).

    ``prefix`` continues an existing chain so a shared prompt prefix is hashed once by workload generators.
    """
    out = list(prefix)
    h = out[-1] if out else 0
    for i in range(0, len(text) - block_chars + 1, block_chars):
        h = hash((h, text[i : i + block_chars]))
        out.append(h)
    return tuple(out)


class PrefixCache:
    """LRU set of KV blocks keyed by chained hashes: a request reuses its longest cached leading run of blocks."""

    def __init__(self, capacity_blocks: int) -> None:
        self.capacity = max(1, capacity_blocks)
        self._lru: OrderedDict[int, None] = OrderedDict()

    def lookup_insert(self, blocks: Sequence[int]) -> int:
        """Number of leading blocks already cached; all blocks are then (re)inserted as most recent."""
        hit = 0
        for h in blocks:
            if h in self._lru:
                hit += 1
            else:
                break
        lru = self._lru
        for h in blocks:
            if h in lru:
                lru.move_to_end(h)
            else:
                lru[h] = None
        while len(lru) > self.capacity:
            lru.popitem(last=False)
        return hit

    def __len__(self) -> int:
        return len(self._lru)


@dataclass
class _Seq:
    n_prompt: int
    n_out: int
    blocks: tuple[int, ...]
    future: asyncio.Future[tuple[int, int]]
    done: int = 0
    cached_tokens: int = 0


_DEFAULTS: dict[str, Any] = {"profile": None, "time_scale": 1.0, "slots": None, "output_tokens": None}


@dataclass
class _Counters:
    prompt_tokens: int = 0
    cached_tokens: int = 0
    steps: int = 0


class SimulatedEngine(Engine):
    """SIMULATED continuous-batching engine (asyncio step loop); returns placeholder text, never model output.

    engine_kwargs: ``profile`` (dict overriding ``DEFAULT_PROFILE`` fields), ``time_scale`` (multiplies every modelled
    duration; ``0`` makes it an instant echo engine for measuring orchestration overhead), ``slots`` (batch slots),
    ``output_tokens`` (fixed generation length; default: the request's ``max_tokens``).
    """

    option_defaults: ClassVar[dict[str, Any]] = _DEFAULTS

    name: ClassVar[str] = "simulated"
    cpu_bound: ClassVar[bool] = False

    @classmethod
    def features(cls, model_path: Path | None, kwargs: dict[str, Any]) -> EngineFeatures:
        """No model behind it: every modality is answered (scale studies)."""
        return ALL

    def __init__(self, *, replica_id: str, model: str, model_path: str | None = None, **kwargs: Any) -> None:
        super().__init__(replica_id=replica_id, model=model)
        opts = pop_known(kwargs, self.name, _DEFAULTS)
        self.profile = DEFAULT_PROFILE.with_(**(opts["profile"] or {}))
        if opts["slots"]:
            self.profile = self.profile.with_(slots=int(opts["slots"]))
        self.slots = self.profile.slots
        self.time_scale = float(opts["time_scale"])
        self.output_tokens = None if opts["output_tokens"] is None else int(opts["output_tokens"])
        self.cache = PrefixCache(self.profile.slots * self.profile.ctx_per_slot // self.profile.block_tokens)
        self.counters = _Counters()
        self._waiting: deque[_Seq] = deque()
        self._active: list[_Seq] = []
        self._wake: asyncio.Event | None = None
        self._loop_task: asyncio.Task[None] | None = None

    def version(self) -> str | None:
        return f"simulated (profile: {self.profile.source})"

    async def start(self) -> None:
        self._wake = asyncio.Event()
        if self.time_scale > 0:
            self._loop_task = asyncio.get_running_loop().create_task(self._step_loop())

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        from serving._messages import prompt_text

        t0 = time.monotonic()
        text = prompt_text(request.messages)
        n_prompt = self.profile.tokens(text)
        n_out = self.output_tokens if self.output_tokens is not None else request.options.max_tokens
        n_out = max(1, min(n_out, request.options.max_tokens))
        with self._track():
            if self.time_scale <= 0:
                cached = self.cache_hit(text)
            else:
                assert self._wake is not None
                fut: asyncio.Future[tuple[int, int]] = asyncio.get_running_loop().create_future()
                self._waiting.append(_Seq(n_prompt, n_out, block_hashes(text, self.profile.block_chars), fut))
                self._wake.set()
                _, cached = await fut
            self.counters.prompt_tokens += n_prompt
            self.counters.cached_tokens += cached
            result = GenerationResult(
                request_id=request.request_id,
                text=f"{SIMULATED_TEXT} {n_out} tokens",
                finish_reason="length",
                prompt_tokens=n_prompt,
                completion_tokens=n_out,
                engine_latency_s=time.monotonic() - t0,
            )
        return self._account(result)

    def cache_hit(self, text: str) -> int:
        hit = self.cache.lookup_insert(block_hashes(text, self.profile.block_chars))
        return min(self.profile.tokens(text), hit * self.profile.block_tokens)

    async def _step_loop(self) -> None:
        assert self._wake is not None
        p = self.profile
        while True:
            if not self._active and not self._waiting:
                self._wake.clear()
                await self._wake.wait()
            prefill = 0.0
            while self._waiting and len(self._active) < p.slots:
                s = self._waiting.popleft()
                s.cached_tokens = min(s.n_prompt, self.cache.lookup_insert(s.blocks) * p.block_tokens)
                prefill += p.prefill_s(s.n_prompt - s.cached_tokens)
                self._active.append(s)
            kv = sum(s.n_prompt + s.done for s in self._active)
            await asyncio.sleep((prefill + p.step_s(len(self._active), kv)) * self.time_scale)
            self.counters.steps += 1
            still = []
            for s in self._active:
                s.done += 1
                if s.done >= s.n_out:
                    if not s.future.done():
                        s.future.set_result((s.done, s.cached_tokens))
                else:
                    still.append(s)
            self._active = still

    async def shutdown(self) -> None:
        if self._loop_task is not None:
            self._loop_task.cancel()
            self._loop_task = None
