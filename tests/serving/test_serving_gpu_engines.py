"""vLLM and SGLang on CUDA (GPU runners only): the same engines, converted SmolLM2, no CPU settings.

Skipped without a CUDA GPU (tests/conftest.py) or without the package. Run on a GPU machine with e.g.
``pip install -e '.[vllm,dev]' && pytest tests/serving/test_serving_gpu_engines.py -m gpu``.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from omnieval._schema import GenerationOptions
from serving._types import GenerationRequest

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def _reqs(n: int) -> list[GenerationRequest]:
    return [
        GenerationRequest(
            request_id=f"gpu-{i}",
            messages=[{"role": "user", "content": f"Write a sentence about the number {i}."}],
            options=GenerationOptions(max_tokens=48),
        )
        for i in range(n)
    ]


async def _exercise(eng, timing, label: str) -> None:  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    await eng.start()
    timing(f"{label} start", f"{time.monotonic() - t0:.1f} s")
    try:
        assert await eng.check_health()
        t0 = time.monotonic()
        rs = await asyncio.gather(*(eng.generate(r) for r in _reqs(32)))
        wall = time.monotonic() - t0
        assert all(r.text.strip() and 0 < r.completion_tokens <= 48 and r.prompt_tokens > 0 for r in rs)
        timing(f"{label} 32 concurrent", f"{sum(r.completion_tokens for r in rs) / wall:.1f} tok/s")
        s = eng.stats()
        assert s.completed == 32 and s.in_flight == 0 and s.failed == 0
    finally:
        await eng.shutdown()


def test_vllm_cuda(smollm_gguf: Path, timing) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("vllm")
    from serving._vllm import VLLMEngine

    eng = VLLMEngine(replica_id="gpu-vllm", model="smollm2", model_path=str(smollm_gguf), max_model_len=2048,
                     gpu_memory_utilization=0.3)  # fmt: skip
    asyncio.run(_exercise(eng, timing, "vLLM CUDA"))


def test_sglang_cuda(smollm_gguf: Path, timing) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("sglang")
    from serving._sglang import SGLangEngine

    eng = SGLangEngine(replica_id="gpu-sglang", model="smollm2", model_path=str(smollm_gguf), context_length=2048,
                       mem_fraction_static=0.3)  # fmt: skip
    asyncio.run(_exercise(eng, timing, "SGLang CUDA"))


def test_transformers_cuda(smollm_gguf: Path, timing) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("transformers")
    from serving._transformers import TransformersEngine

    eng = TransformersEngine(replica_id="gpu-tf", model="smollm2", model_path=str(smollm_gguf), max_batch_size=32)
    asyncio.run(_exercise(eng, timing, "transformers CUDA"))
