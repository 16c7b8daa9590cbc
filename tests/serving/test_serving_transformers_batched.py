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


def _reqs(tag: str, vary: bool = False) -> list[GenerationRequest]:
    """``vary``: different lengths (``max_tokens`` 24 down to 10), so rows leave a running batch at different steps
    (static batching runs one ``generate`` per option group, so it gets one length)."""
    return [GenerationRequest(request_id=f"{tag}-{i}", options=GenerationOptions(max_tokens=OUT - 2 * i * vary, temperature=0.0),
                              messages=[{"role": "user", "content": f"Tell me about the number {i * 7}."}])
            for i in range(N)]  # fmt: skip


def _engine(path: Path, device: str, batch: int, dtype: str, batching: str = "auto") -> Any:
    from serving._transformers import TransformersEngine

    return TransformersEngine(replica_id=f"tf-{device}-{batch}", model="smollm-shape", model_path=str(path),
                              device=device, dtype=dtype, max_batch_size=batch, batching=batching)  # fmt: skip


async def _run(eng: Any, reqs: list[GenerationRequest]) -> tuple[list[Any], float]:
    t0 = time.monotonic()
    res = await asyncio.gather(*(eng.generate(r) for r in reqs))
    return list(res), time.monotonic() - t0


async def _staggered(eng: Any, reqs: list[GenerationRequest]) -> list[Any]:
    """The first half together; the second half once the first request has finished, so it joins running rows."""
    half = len(reqs) // 2
    first = [asyncio.ensure_future(eng.generate(r)) for r in reqs[:half]]
    await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
    later = [asyncio.ensure_future(eng.generate(r)) for r in reqs[half:]]
    return list(await asyncio.gather(*first, *later))


@pytest.mark.parametrize("device", DEVICES)
def test_batched_generate_matches_one_at_a_time(random_smollm: Path, device: str, timing) -> None:  # type: ignore[no-untyped-def]
    """N concurrent requests of different lengths, half of them arriving while the others decode, each get exactly
    the greedy tokens ``model.generate`` gives them alone (float32, so padding cannot move an argmax), under
    continuous batching (rows join and leave the running batch) and static batching (padded batched ``generate``);
    then batch-1 vs batched tok/s."""
    torch = pytest.importorskip("torch")
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")

    async def go() -> tuple[list[Any], list[Any], list[Any], list[Any], Any, Any]:
        one = _engine(random_smollm, device, 1, "float32", "static")
        cont = _engine(random_smollm, device, N, "float32", "continuous")
        static = _engine(random_smollm, device, N, "float32", "static")
        for e in (one, cont, static):
            await e.start()
        try:
            alone = [(await _run(one, [r]))[0][0] for r in _reqs("alone")]
            alone_vary = [(await _run(one, [r]))[0][0] for r in _reqs("alone-vary", vary=True)]
            joined = await _staggered(cont, _reqs("cont", vary=True))
            padded, _ = await _run(static, _reqs("static"))
            return alone, alone_vary, joined, padded, cont, static
        finally:
            for e in (one, cont, static):
                await e.shutdown()

    alone, alone_vary, joined, padded, cont, static = asyncio.run(go())
    assert all(a.completion_tokens > 0 for a in alone)
    assert len({a.completion_tokens for a in alone_vary}) > 1  # rows of different lengths
    assert static.generate_calls < N, f"{N} concurrent requests took {static.generate_calls} generate calls"
    assert cont.peak_batch > N // 2 and cont.prefills > 1, (cont.peak_batch, cont.prefills)  # late rows joined
    assert cont.decode_rows > cont.decode_steps  # decode steps served several rows
    for got, ref in ((joined, alone_vary), (padded, alone)):
        assert [t.text for t in got] == [a.text for a in ref]
        assert [t.completion_tokens for t in got] == [a.completion_tokens for a in ref]
        assert [t.prompt_tokens for t in got] == [a.prompt_tokens for a in ref]  # its own, not the padded width

    async def rates() -> tuple[float, float]:
        dtype = "bfloat16" if device == "cuda" else "float32"
        out = []
        for batch in (1, N):
            eng = _engine(random_smollm, device, batch, dtype, "static" if batch == 1 else "continuous")
            await eng.start()
            try:
                await _run(eng, _reqs("warm")[:batch])
                res, wall = await _run(eng, _reqs(f"rate{batch}"))
                out.append(sum(r.completion_tokens for r in res) / wall)
            finally:
                await eng.shutdown()
        return out[0], out[1]

    r1, rn = asyncio.run(rates())
    timing(f"transformers {device} generate batch 1 vs continuous {N}", f"{r1:.1f} vs {rn:.1f} tok/s ({rn / r1:.2f}x)")
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


@pytest.mark.parametrize("device", DEVICES)
def test_seeded_sample_does_not_depend_on_its_batch(random_smollm: Path, device: str) -> None:
    """A sampled request (temperature, top_p, seed) draws from its own generator: the same text alone as beside
    greedy and differently seeded rows; another seed gives another text."""
    torch = pytest.importorskip("torch")
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")

    def req(i: int, seed: int | None, temperature: float = 1.0) -> GenerationRequest:
        return GenerationRequest(request_id=f"s-{i}", messages=[{"role": "user", "content": "Write a word."}],
                                 options=GenerationOptions(max_tokens=16, temperature=temperature, top_p=0.9,
                                                           seed=seed))  # fmt: skip

    async def go() -> tuple[Any, list[Any], Any]:
        eng = _engine(random_smollm, device, N, "float32", "continuous")
        await eng.start()
        try:
            alone = await eng.generate(req(0, 7))
            mixed, _ = await _run(eng, [req(1, 7), req(2, 0, temperature=0.0), req(3, 8), req(4, 7)])
            return alone, mixed, eng
        finally:
            await eng.shutdown()

    alone, mixed, eng = asyncio.run(go())
    assert eng.peak_batch >= 4
    assert mixed[0].text == mixed[3].text == alone.text and alone.completion_tokens > 0
    assert mixed[2].text != alone.text  # a random model's vocabulary is wide: another seed, another draw


@pytest.mark.transformers
@pytest.mark.slow
def test_generation_config_processors_fall_back_to_static(random_smollm: Path, tmp_path: Path) -> None:
    """A checkpoint whose generation_config adds a logits processor (here repetition_penalty) is served by
    ``generate`` under ``batching: auto``, with the reason; ``batching: continuous`` refuses it at start."""
    import json

    from omnieval.core import OmnievalUserError

    gc_file = random_smollm / "generation_config.json"
    gc = json.loads(gc_file.read_text()) if gc_file.exists() else {}
    for f in random_smollm.iterdir():
        if f.name != gc_file.name:
            (tmp_path / f.name).symlink_to(f)
    (tmp_path / gc_file.name).write_text(json.dumps({**gc, "repetition_penalty": 1.2}))

    async def go(batching: str) -> Any:
        eng = _engine(tmp_path, "cpu", N, "float32", batching)
        try:
            await eng.start()
            return eng
        finally:
            await eng.shutdown()

    auto = asyncio.run(go("auto"))
    assert auto.batching == "static" and "repetition_penalty=1.2" in (auto.batching_reason or "")
    with pytest.raises(OmnievalUserError, match="batching: continuous is not possible.*repetition_penalty"):
        asyncio.run(go("continuous"))
    with pytest.raises(OmnievalUserError, match="batching must be one of auto, continuous, static"):
        _engine(tmp_path, "cpu", N, "float32", "paged")
