"""The transformers engine's batched path and the conventional runner, on CUDA and on CPU.

A randomly initialised SmolLM2-135M-shaped model built from the shipped config and tokenizer
(``tests/testlib/smollm_shape.py``): the CUDA cases (marked ``gpu``, skipped without a GPU) need torch and
transformers, not the network, Ray or model files. The CPU cases run the same code in the transformers tier
(scripts/ci_vllm.sh). Each prints batch-1 vs batched tokens/s in the terminal summary.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from testlib.smollm_shape import build_random_smollm

from omnieval.core import GenerationOptions
from serving._types import GenerationRequest

DEVICES = [
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.slow], id="cuda"),
    pytest.param("cpu", marks=[pytest.mark.transformers, pytest.mark.slow], id="cpu"),
]
N, OUT = 8, 24


@pytest.fixture(scope="module")
def random_smollm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    return build_random_smollm(tmp_path_factory.mktemp("smollm-shape"), layers=None)


def _reqs(tag: str) -> list[GenerationRequest]:
    return [GenerationRequest(request_id=f"{tag}-{i}", options=GenerationOptions(max_tokens=OUT, temperature=0.0),
                              messages=[{"role": "user", "content": f"Tell me about the number {i * 7}."}])
            for i in range(N)]  # fmt: skip


def _engine(path: Path, device: str, batch: int, dtype: str) -> Any:
    from serving._transformers import TransformersEngine

    return TransformersEngine(replica_id=f"tf-{device}-{batch}", model="smollm-shape", model_path=str(path),
                              device=device, dtype=dtype, max_batch_size=batch)  # fmt: skip


async def _run(eng: Any, reqs: list[GenerationRequest]) -> tuple[list[Any], float]:
    t0 = time.monotonic()
    res = await asyncio.gather(*(eng.generate(r) for r in reqs))
    return list(res), time.monotonic() - t0


@pytest.mark.parametrize("device", DEVICES)
def test_batched_generate_matches_one_at_a_time(random_smollm: Path, device: str, timing) -> None:  # type: ignore[no-untyped-def]
    """N concurrent requests share batched ``generate`` calls, left-padded, and each gets exactly the greedy
    tokens it gets alone (float32, so padding cannot move an argmax); then batch-1 vs batched tok/s."""
    torch = pytest.importorskip("torch")
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")

    async def go() -> tuple[list[Any], list[Any], int]:
        one, many = _engine(random_smollm, device, 1, "float32"), _engine(random_smollm, device, N, "float32")
        await one.start()
        await many.start()
        try:
            alone = [(await _run(one, [r]))[0][0] for r in _reqs("alone")]
            together, _ = await _run(many, _reqs("together"))
            return alone, together, many.generate_calls
        finally:
            await one.shutdown()
            await many.shutdown()

    alone, together, calls = asyncio.run(go())
    assert calls < N, f"{N} concurrent requests took {calls} generate calls: not batched"
    assert all(a.completion_tokens > 0 for a in alone)
    assert [t.text for t in together] == [a.text for a in alone]
    assert [t.prompt_tokens for t in together] == [a.prompt_tokens for a in alone]  # each its own, not the padded width

    async def rates() -> tuple[float, float]:
        dtype = "bfloat16" if device == "cuda" else "float32"
        out = []
        for batch in (1, N):
            eng = _engine(random_smollm, device, batch, dtype)
            await eng.start()
            try:
                await _run(eng, _reqs("warm")[:batch])
                res, wall = await _run(eng, _reqs(f"rate{batch}"))
                out.append(sum(r.completion_tokens for r in res) / wall)
            finally:
                await eng.shutdown()
        return out[0], out[1]

    r1, rn = asyncio.run(rates())
    timing(f"transformers {device} batch 1 vs {N}", f"{r1:.1f} vs {rn:.1f} tok/s ({rn / r1:.2f}x)")
    if device == "cuda":
        assert rn > r1, "batched decoding on CUDA should beat one request at a time"


@pytest.mark.parametrize("device", DEVICES)
def test_conventional_runner_on_the_device(random_smollm: Path, device: str, tmp_path: Path, timing) -> None:  # type: ignore[no-untyped-def]
    """The federated bench's conventional baseline (a built-in benchmark through the in-process engine, one request
    at a time) on the device: every sample answered, tokens counted, timestamps in order."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("pyarrow")
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from omnieval.perf._conventional import ConventionalJob, _builtin, plan_jobs

    suite = tmp_path / "suite.yaml"
    suite.write_text(f"name: conv\nmodels:\n  - name: m\n    source: {{kind: path, path: {random_smollm}}}\n"
                     "    engine: transformers\nbenchmarks:\n  - name: mmlu_tiny\n    limit: 6\n"
                     "generation: {temperature: 0.0, max_tokens: 16}\n")  # fmt: skip
    job = ConventionalJob(benchmark="mmlu_tiny", runner="builtin", model_class="transformers",
                          pretrained=str(random_smollm), model_args={"device": device})  # fmt: skip
    (planned,) = plan_jobs([job], suite, cpus=1, concurrent=False)
    out = _builtin(planned)
    assert (out["records"], out["errors"]) == (6, 0)
    assert out["output_tokens"] > 0 and out["t_loaded"] <= out["t_inf0"] < out["t_inf1"]
    timing(f"conventional runner {device}", f"{out['output_tokens'] / out['inference_s']:.1f} tok/s one at a time")
