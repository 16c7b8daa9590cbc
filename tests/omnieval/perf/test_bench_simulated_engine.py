"""The SIMULATED engine: labelled outputs, instant mode, continuous batching timing, prefix cache, registration."""

from __future__ import annotations

import asyncio
import time

import pytest

from omnieval.core import GenerationOptions, ModelConfig
from serving import ENGINES
from serving._simulated import SIMULATED_TEXT, SimulatedEngine
from serving._types import GenerationRequest


def _req(i: int, text: str = "hello", max_tokens: int = 8) -> GenerationRequest:
    return GenerationRequest(request_id=f"r{i}", messages=[{"role": "user", "content": text}],
                             options=GenerationOptions(max_tokens=max_tokens))  # fmt: skip


def test_registered_and_accepted_by_config() -> None:
    assert ENGINES.get("simulated") is SimulatedEngine
    cfg = ModelConfig.model_validate(
        {"name": "sim", "engine": "simulated", "source": {"kind": "path", "path": "/dev/null"}}
    )
    assert cfg.engine == "simulated"


def test_instant_mode_outputs_are_labelled_simulated() -> None:
    async def go() -> None:
        eng = SimulatedEngine(replica_id="s0", model="m", model_path="/dev/null", time_scale=0.0)
        await eng.start()
        res = await eng.generate(_req(0, max_tokens=5))
        assert res.text.startswith(SIMULATED_TEXT)
        assert res.completion_tokens == 5 and res.replica_id == "s0"
        assert (eng.version() or "").startswith("simulated")
        assert eng.stats().completed == 1
        await eng.shutdown()

    asyncio.run(go())


def test_unknown_kwarg_is_a_user_error() -> None:
    from omnieval.core import OmnievalUserError

    with pytest.raises(OmnievalUserError, match="unknown engine_kwargs"):
        SimulatedEngine(replica_id="s", model="m", bogus=1)


def test_continuous_batching_runs_concurrent_requests_together() -> None:
    prof = {"step_base_s": 0.004, "step_per_seq_s": 0.0, "prefill_per_token_s": 0.0, "prefill_base_s": 0.0}

    async def go() -> tuple[float, float]:
        eng = SimulatedEngine(replica_id="s", model="m", profile=prof, slots=4)
        await eng.start()
        t0 = time.monotonic()
        await eng.generate(_req(0, max_tokens=20))
        one = time.monotonic() - t0
        t0 = time.monotonic()
        await asyncio.gather(*(eng.generate(_req(i, text=f"p{i}", max_tokens=20)) for i in range(1, 5)))
        four = time.monotonic() - t0
        await eng.shutdown()
        return one, four

    one, four = asyncio.run(go())
    assert four < 2.5 * one  # 4 sequences share the 20 steps; sequential would be 4x


def test_repeated_prompt_hits_prefix_cache() -> None:
    async def go() -> SimulatedEngine:
        eng = SimulatedEngine(replica_id="s", model="m", time_scale=0.0)
        await eng.start()
        text = "shared few-shot header " * 40
        await eng.generate(_req(0, text=text))
        await eng.generate(_req(1, text=text))
        return eng

    eng = asyncio.run(go())
    assert eng.counters.cached_tokens > 0.8 * eng.profile.tokens("shared few-shot header " * 40)
