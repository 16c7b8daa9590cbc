"""TransformersEngine on the real SmolLM2 GGUF and the plumbing VLM / audio LM: greedy output, continuous batching of
concurrent requests with different options, media through the model's own processor.

Needs torch+transformers+gguf, which the main venv deliberately lacks; scripts/ci_vllm.sh runs it in the vLLM venv.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from testlib.tiers import need

need("torch")
need("transformers")
need("gguf")

from omnieval.core import GenerationOptions  # noqa: E402
from serving._transformers import TransformersEngine  # noqa: E402
from serving._types import GenerationRequest  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.transformers]


def _req(i: int, text: str, **opts: object) -> GenerationRequest:
    return GenerationRequest(
        request_id=f"tf-{i}", messages=[{"role": "user", "content": text}], options=GenerationOptions(**opts)
    )


@pytest.mark.timeout(1800)
def test_transformers_greedy_and_batched(smollm_gguf: Path, timing) -> None:
    async def main() -> None:
        eng = TransformersEngine(replica_id="tf-r1", model="smollm2", model_path=str(smollm_gguf), max_batch_size=4,
                                 batch_wait_ms=50)  # fmt: skip
        t0 = time.monotonic()
        await eng.start()
        timing("transformers engine start (GGUF load+dequant)", f"{time.monotonic() - t0:.1f} s")
        try:
            t0 = time.monotonic()
            one = await eng.generate(_req(0, "What is the capital of France?", max_tokens=32))
            t1 = time.monotonic() - t0
            assert one.text.strip() and one.completion_tokens > 0 and one.prompt_tokens > 0
            assert one.finish_reason in ("stop", "length") and one.replica_id == "tf-r1"
            again = await eng.generate(_req(1, "What is the capital of France?", max_tokens=32))
            assert again.text == one.text  # greedy is deterministic
            timing("transformers 1 request", f"{one.completion_tokens / t1:.1f} tok/s; text {one.text[:60]!r}")

            assert eng.batching == "continuous" and eng.batching_reason is None
            prompts = ["Name a colour.", "What is 2 + 2?", "Say hello in French.", "Name a fruit."]
            t0 = time.monotonic()
            rs = await asyncio.gather(*(eng.generate(_req(10 + i, p, max_tokens=32)) for i, p in enumerate(prompts)))
            wall = time.monotonic() - t0
            assert all(r.text.strip() and r.completion_tokens > 0 for r in rs)
            assert [r.request_id for r in rs] == [f"tf-{10 + i}" for i in range(4)]
            assert eng.peak_batch > 1  # decoded together, not one after another
            timing("transformers 4 concurrent", f"{sum(r.completion_tokens for r in rs) / wall:.1f} tok/s, mean decode "
                   f"batch {eng.decode_rows / eng.decode_steps:.1f}")  # fmt: skip

            # Different options share the running batch; each row keeps its own stop string and max_tokens.
            a, b = await asyncio.gather(
                eng.generate(_req(20, "Count from 1 to 20.", max_tokens=40, stop=["5"])),
                eng.generate(_req(21, "Count from 1 to 20.", max_tokens=8)),
            )
            assert "5" not in a.text and a.finish_reason == "stop"
            assert b.completion_tokens == 8 and b.finish_reason == "length"
            n = min(len(a.text), len(b.text))
            assert n and a.text[:n] == b.text[:n]  # same prompt, greedy: the same tokens while both run
            s = eng.stats()
            assert (s.in_flight, s.queue_depth, s.failed, s.completed, s.slots) == (0, 0, 0, 8, 4)
            assert await eng.check_health()
        finally:
            await eng.shutdown()
        assert not await eng.check_health()

    asyncio.run(main())


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("batching", ["continuous", "static"])
def test_transformers_takes_images_and_frames_through_its_processor(plumbing_models: dict[str, Path], batching: str,
                                                                    timing) -> None:  # fmt: skip
    """The plumbing VLM (Idefics3 shape, untrained tower): the image processor's tiles and the chat template's
    image tokens reach the model, so the prompt grows with the image's extent and the number of frames; under both
    batching modes the five requests share decoding (continuous: one running batch; static: batched generate)."""
    from omnieval.core import ImageContent, Message, TextContent, VideoContent
    from serving._messages import to_openai

    clip = Path(__file__).resolve().parents[2] / "omnieval/benchmarks/data/omniassist_sample/media/II_000/t0.mp4"

    def png(w: int, h: int) -> str:
        import base64
        import io

        from PIL import Image

        buf = io.BytesIO()
        Image.new("RGB", (w, h), (30, 120, 200)).save(buf, format="PNG")
        return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()

    def req(i: int, content: list) -> GenerationRequest:
        msgs = to_openai([Message(role="user", content=content)], video_input="frames")
        return GenerationRequest(request_id=f"mm-{i}", messages=msgs, options=GenerationOptions(max_tokens=8))

    async def main() -> dict[str, int]:
        eng = TransformersEngine(replica_id="tf-mm", model="plumbing-vlm", model_path=str(plumbing_models["image"]),
                                 max_batch_size=4, batch_wait_ms=20, batching=batching)  # fmt: skip
        computed_on = _record_threads(eng, "_load", "_step", "_generate_batch")
        await eng.start()
        try:
            q = TextContent(value="What colour is this?")
            rs = await asyncio.gather(
                eng.generate(req(0, [q])),
                eng.generate(req(1, [ImageContent(value=png(512, 128)), q])),
                eng.generate(req(2, [ImageContent(value=png(512, 512)), q])),
                eng.generate(req(3, [VideoContent(value=str(clip), num_frames=2, sampling_strategy="uniform"), q])),
                eng.generate(req(4, [VideoContent(value=str(clip), num_frames=4, sampling_strategy="uniform"), q])),
            )
            assert [r.request_id for r in rs] == [f"mm-{i}" for i in range(5)]
            assert all(r.completion_tokens > 0 for r in rs)
            assert eng.batching == batching
            if batching == "static":
                assert eng.media_generate_calls < 4, eng.media_generate_calls  # images and frames batched together
            else:
                assert eng.peak_batch > 1 and eng.prefills >= 5  # each media prompt prefilled alone, decoded together
            assert "paris" in (await eng.generate(_mm_text(eng))).text.lower()  # the language model is real
            # load, prefills, decode steps and generate calls all ran on the engine's one compute thread, off the loop
            assert len(computed_on) == 1 and threading.get_ident() not in computed_on, computed_on
            return {k: r.prompt_tokens for k, r in zip(("text", "strip", "square", "f2", "f4"), rs, strict=True)}
        finally:
            await eng.shutdown()

    n = asyncio.run(main())
    timing(f"transformers plumbing VLM ({batching}) prompt tokens: text/512x128/512x512/2 frames/4 frames",
           str(list(n.values())))  # fmt: skip
    assert n["text"] < n["strip"] < n["square"]
    assert n["f4"] - n["text"] == 2 * (n["f2"] - n["text"]) > 0


def _record_threads(eng: TransformersEngine, *methods: str) -> set[int]:
    """The threads ``methods`` of ``eng`` run on, recorded as they are called."""
    seen: set[int] = set()
    for name in methods:
        fn = getattr(eng, name)

        def on(*a: object, _fn: object = fn) -> object:
            seen.add(threading.get_ident())
            return _fn(*a)  # type: ignore[operator]

        setattr(eng, name, on)
    return seen


def _mm_text(eng: TransformersEngine) -> GenerationRequest:
    return GenerationRequest(request_id="mm-text", messages=[{"role": "user", "content": "What is the capital of France?"}],
                             options=GenerationOptions(max_tokens=12))  # fmt: skip


@pytest.mark.timeout(1200)
def test_transformers_takes_audio_through_its_processor(plumbing_models: dict[str, Path], timing) -> None:
    """The plumbing Qwen2-Audio (untrained encoder): the Whisper features and the processor's ``<|AUDIO|>``
    expansion reach generate, so the prompt grows with the clip; an mp3 at 8 kHz is resampled to 16 kHz."""
    import wave

    from omnieval.core import AudioContent, Message, TextContent
    from serving._messages import to_openai

    data = Path(__file__).resolve().parents[2] / "omnieval/benchmarks/data"
    speech = data / "speech"

    def secs(p: Path) -> float:
        with wave.open(str(p)) as w:
            return w.getnframes() / w.getframerate()

    clips = sorted(speech.glob("*.wav"), key=secs)
    short, long_ = clips[0], clips[-1]
    mp3 = data / "omniassist_sample/media/II_000/t0.mp3"

    def req(i: int, content: list) -> GenerationRequest:
        return GenerationRequest(request_id=f"au-{i}", messages=to_openai([Message(role="user", content=content)]),
                                 options=GenerationOptions(max_tokens=6))  # fmt: skip

    async def main() -> list[int]:
        # float32: a row's greedy tokens must not depend on its batch (below); in bfloat16 they may
        eng = TransformersEngine(replica_id="tf-au", model="plumbing-alm", model_path=str(plumbing_models["audio-hf"]),
                                 max_batch_size=4, batch_wait_ms=20, dtype="float32")  # fmt: skip
        assert TransformersEngine.features(plumbing_models["audio-hf"], {}).modalities == {"text", "audio"}
        await eng.start()
        try:
            q = TextContent(value="What is said?")
            rs = await asyncio.gather(
                eng.generate(req(0, [q])),
                eng.generate(req(1, [AudioContent(value=str(short)), q])),
                eng.generate(req(2, [AudioContent(value=str(long_)), q])),
                eng.generate(req(3, [AudioContent(value=str(mp3), sampling_rate=16000), q])),
                eng.generate(req(4, [AudioContent(value=str(mp3)), q])),  # as it is: mp3, decoded by PyAV
            )
            assert all(r.completion_tokens > 0 for r in rs)
            # the four audio requests waited together: decoded in one running batch, not one after another
            assert eng.batching == "continuous" and eng.peak_batch > 1, (eng.batching, eng.batching_reason)
            alone = await eng.generate(req(5, [AudioContent(value=str(long_)), q]))  # greedy: the same answer alone
            assert (alone.text, alone.prompt_tokens) == (rs[2].text, rs[2].prompt_tokens)
            return [r.prompt_tokens for r in rs]
        finally:
            await eng.shutdown()

    n = asyncio.run(main())
    timing(f"transformers plumbing audio LM prompt tokens: text / {secs(short):.1f} s / {secs(long_):.1f} s / mp3 "
           "resampled / mp3 as is", str(n))  # fmt: skip
    assert n[0] < n[1] < n[2]
    assert n[3] == n[4] > n[0]  # same clip, resampled here or by the engine's decoder
