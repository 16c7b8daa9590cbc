"""vLLM and SGLang on CUDA (GPU runners only): the same engines, converted SmolLM2, no CPU settings.

Skipped without a CUDA GPU (tests/conftest.py) or without the package. Run on a GPU machine with e.g.
``pip install -e '.[vllm,dev]' && pytest tests/serving/test_serving_gpu_engines.py -m gpu``.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from omnieval.core import GenerationOptions
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


# ---- media at tensor parallel 1 and 2, in Ray Serve through the pool controller (scripts/gpu_check.sh) ----------
# Real multimodal checkpoints from the hub (a CUDA user is online); override to test others. Both shard over 2 GPUs:
# Qwen2.5-VL-3B has 16 query / 2 KV heads, Qwen2-Audio-7B 32 / 32.
IMAGE_MODEL = os.environ.get("OMNIEVAL_GPU_IMAGE_MODEL", "Qwen/Qwen2.5-VL-3B-Instruct")
AUDIO_MODEL = os.environ.get("OMNIEVAL_GPU_AUDIO_MODEL", "Qwen/Qwen2-Audio-7B-Instruct")
SPEECH = Path(__file__).resolve().parents[2] / "omnieval" / "benchmarks" / "data" / "speech"


def _gpus() -> int:
    import torch

    return torch.cuda.device_count()


def _png(w: int, h: int) -> str:
    import base64
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (w, h), (200, 40, 40)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


@pytest.mark.ray
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("tp", [1, 2])
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_media_replicas_in_serve(engine: str, tp: int, timing) -> None:  # type: ignore[no-untyped-def]
    """A replica per model on ``tp`` GPUs (one bundle, the server process sees all of them) answers an image and an
    audio request through the pool's HTTP path; the media change the prompt token count."""
    pytest.importorskip(engine)
    if _gpus() < tp:
        pytest.skip(f"needs {tp} GPUs, found {_gpus()}")
    import ray

    from omnieval.core import AudioContent, ImageContent, Message, ModelConfig, TextContent
    from pool import get_controller
    from pool._http import HttpTransport
    from serving import ray_node_ip
    from serving._messages import to_openai

    mem = {"vllm": {"gpu_memory_utilization": 0.8, "max_model_len": 8192},
           "sglang": {"mem_fraction_static": 0.7, "context_length": 8192}}[engine]  # fmt: skip

    def cfg(name: str, repo: str) -> ModelConfig:
        return ModelConfig.model_validate({"name": name, "engine": engine, "source": {"kind": "hf", "repo_id": repo},
                                           "resources": {"num_cpus": 1, "num_gpus": 1, "tensor_parallel_size": tp},
                                           "engine_kwargs": mem})  # fmt: skip

    async def ask(ep, content) -> int:  # type: ignore[no-untyped-def]
        req = GenerationRequest(request_id="gpu-media", options=GenerationOptions(max_tokens=16),
                                messages=to_openai([Message(role="user", content=content)]))  # fmt: skip
        t = HttpTransport(600, ray_node_ip())
        try:
            r = await t.chat(ep, req, "gpu-check")
            assert r.text.strip(), r
            return r.prompt_tokens
        finally:
            await t.close()

    ray.init(namespace="omnieval", log_to_driver=False)
    controller = get_controller()
    try:
        q = TextContent(value="Describe this.")
        for name, repo, media in (
            (f"{engine}-tp{tp}-image", IMAGE_MODEL, ImageContent(value=_png(448, 448))),
            (f"{engine}-tp{tp}-audio", AUDIO_MODEL, AudioContent(value=str(SPEECH / "audioeval_en_quick_brown_fox.wav"),
                                                                 sampling_rate=16000)),
        ):  # fmt: skip
            t0 = time.monotonic()
            (info,) = ray.get(controller.ensure_model.remote(cfg(name, repo), "gpu-check"))
            timing(f"{name} start", f"{time.monotonic() - t0:.0f} s")
            text, with_media = asyncio.run(ask(info.endpoint, [q])), asyncio.run(ask(info.endpoint, [media, q]))
            timing(f"{name} prompt tokens text / with {media.type}", f"{text} / {with_media}")
            assert with_media > text + 10
            ray.get(controller.release.remote("gpu-check"))
    finally:
        ray.get(controller.shutdown.remote(), timeout=300)
        ray.shutdown()
