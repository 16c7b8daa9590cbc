"""An external OpenAI-compatible server joins the pool: a real llama-server we start ourselves, via ``OpenAIEngine``."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from testlib.llama import llama_server as start_llama_server

from omnieval.core import GenerationOptions, ReplicaDead, RequestFailed
from serving import free_port
from serving._openai import OpenAIEngine
from serving._types import GenerationRequest


def _req(i: int, text: str, max_tokens: int = 24) -> GenerationRequest:
    return GenerationRequest(
        request_id=f"ext-{i}",
        messages=[{"role": "user", "content": text}],
        options=GenerationOptions(max_tokens=max_tokens),
    )


@pytest.fixture
def llama_server(smollm_gguf: Path, tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    with start_llama_server(smollm_gguf, tmp_path, parallel=2) as server:
        yield server


def test_external_server_joins_as_replica(llama_server: tuple[str, subprocess.Popen[bytes]], timing) -> None:
    base_url, proc = llama_server

    async def main() -> None:
        eng = OpenAIEngine(replica_id="ext-r1", model="smollm2", base_url=base_url, slots=2)
        await eng.start()
        try:
            assert await eng.check_health()
            t0 = time.monotonic()
            prompts = ["Name a colour.", "What is 2 + 2?", "Say hello.", "Name a fruit."]
            results = await asyncio.gather(*(eng.generate(_req(i, p)) for i, p in enumerate(prompts)))
            wall = time.monotonic() - t0
            for i, r in enumerate(results):
                assert r.request_id == f"ext-{i}" and r.replica_id == "ext-r1"
                assert r.text.strip() and r.completion_tokens > 0 and r.prompt_tokens > 0
                assert r.finish_reason in ("stop", "length")
            s = eng.stats()
            assert (s.completed, s.failed, s.in_flight, s.slots) == (4, 0, 0, 2)
            assert s.output_tokens == sum(r.completion_tokens for r in results) and s.tokens_per_s > 0
            timing("openai(llama-server --parallel 2) 4 concurrent", f"{s.output_tokens / wall:.1f} tok/s")

            proc.terminate()  # the external server goes away: health fails, requests say the replica is dead
            proc.wait(timeout=10)
            assert not await eng.check_health()
            with pytest.raises(ReplicaDead):
                await eng.generate(_req(9, "again"))
        finally:
            await eng.shutdown()

    asyncio.run(main())


def test_unreachable_endpoint_is_replica_dead() -> None:
    async def main() -> None:
        eng = OpenAIEngine(replica_id="x", model="m", base_url=f"http://127.0.0.1:{free_port()}/v1")
        with pytest.raises(ReplicaDead, match="unreachable"):
            await eng.start()

    asyncio.run(main())


def test_http_error_is_request_failed(llama_server: tuple[str, subprocess.Popen[bytes]]) -> None:
    base_url, _ = llama_server

    async def main() -> None:
        eng = OpenAIEngine(replica_id="x", model="m", base_url=base_url)
        await eng.start()
        try:
            bad = GenerationRequest(request_id="bad", messages=[{"role": "nobody", "content": 1}],
                                    options=GenerationOptions(max_tokens=4))  # fmt: skip
            with pytest.raises(RequestFailed):
                await eng.generate(bad)
            assert eng.stats().failed == 1
        finally:
            await eng.shutdown()

    asyncio.run(main())
