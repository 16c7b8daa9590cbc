"""llama.cpp's mtmd: the plumbing VLM converted by llama.cpp's own convert_hf_to_gguf.py (lm.gguf + mmproj.gguf)
served by the project's llama-server build with ``--mmproj``; images and frames reach it through the same client
path as vLLM, and its prompt token counts match vLLM's for the same image (both tile as SmolVLM does).

Runs in the vLLM tier (scripts/ci_vllm.sh): converting the checkpoint to GGUF needs torch.
"""

from __future__ import annotations

import asyncio
import base64
import io
from pathlib import Path

import pytest
from testlib.tiers import need

need("torch")

from omnieval.core import GenerationOptions, ImageContent, Message, TextContent, VideoContent  # noqa: E402
from serving._llamacpp import LlamaCppEngine  # noqa: E402
from serving._messages import to_openai  # noqa: E402
from serving._types import GenerationRequest  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.vllm]

CLIP = Path(__file__).resolve().parents[2] / "omnieval/benchmarks/data/omniassist_sample/media/II_000/t0.mp4"


def _png(w: int, h: int) -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (w, h), (200, 40, 40)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


@pytest.mark.timeout(600)
def test_llamacpp_mmproj_takes_images_and_frames(plumbing_models: dict[str, Path], timing) -> None:
    gguf = plumbing_models["image-gguf"]
    kwargs = {"mmproj": str(gguf / "mmproj.gguf"), "parallel": 2, "ctx_per_slot": 4096, "threads": 2}
    feats = LlamaCppEngine.features(gguf / "lm.gguf", kwargs)
    assert feats.modalities == {"text", "image"}  # read from the projector's clip.has_vision_encoder
    assert LlamaCppEngine.features(gguf / "lm.gguf", {}).modalities == {"text"}

    async def main() -> dict[str, int]:
        from pool._http import HttpTransport

        eng = LlamaCppEngine(replica_id="ll-mm", model="plumbing-vlm", model_path=str(gguf / "lm.gguf"), **kwargs)
        await eng.start()
        t = HttpTransport(300, None)
        try:
            ep = eng.endpoint()
            assert ep is not None

            async def ask(i: int, content: list) -> int:
                msgs = to_openai([Message(role="user", content=content)], video_input="frames")
                req = GenerationRequest(request_id=f"ll-{i}", messages=msgs, options=GenerationOptions(max_tokens=6))
                r = await t.chat(ep, req, "ll-mm")
                assert r.completion_tokens > 0
                return r.prompt_tokens

            q = TextContent(value="What colour is this?")
            out = {
                "text": await ask(0, [q]),
                "strip": await ask(1, [ImageContent(value=_png(512, 128)), q]),
                "square": await ask(2, [ImageContent(value=_png(512, 512)), q]),
                "f2": await ask(3, [VideoContent(value=str(CLIP), num_frames=2, sampling_strategy="uniform"), q]),
                "f4": await ask(4, [VideoContent(value=str(CLIP), num_frames=4, sampling_strategy="uniform"), q]),
            }
            return out
        finally:
            await t.close()
            await eng.shutdown()

    n = asyncio.run(main())
    timing("llama.cpp mtmd plumbing VLM prompt tokens: text/512x128/512x512/2 frames/4 frames", str(list(n.values())))
    assert n["text"] < n["strip"] < n["square"]
    assert n["f4"] - n["text"] == 2 * (n["f2"] - n["text"]) > 0


@pytest.mark.timeout(900)
def test_suite_defined_image_benchmark_reaches_llamacpp_through_the_pool(
    plumbing_models: dict[str, Path], tmp_path: Path
) -> None:
    """examples/custom_benchmark.yaml's easy-VQA benchmark (JSONL + PNG paths, defined in the suite) runs on the
    mtmd replica: every answer is inferred from a prompt that holds the image (more tokens than the text alone)."""
    import ray
    import yaml
    from ray import serve

    from omnieval._runner import run_suite
    from omnieval._suite import check_registered
    from omnieval.benchmarks import custom_spec
    from omnieval.core import SuiteConfig

    examples = Path(__file__).resolve().parents[2] / "examples"
    raw = yaml.safe_load((examples / "custom_benchmark.yaml").read_text())
    gguf = plumbing_models["image-gguf"]
    vlm = {**raw["models"][1], "source": {"kind": "path", "path": str(gguf / "lm.gguf")}}
    vlm["engine_kwargs"] = {**vlm["engine_kwargs"], "mmproj": str(gguf / "mmproj.gguf"), "threads": 2}
    raw.update(models=[vlm], benchmarks=[{**raw["benchmarks"][1], "limit": 4}], cache={"enabled": False})
    suite = SuiteConfig.model_validate(raw, context={"base_dir": str(examples)})
    assert check_registered(suite) is None
    try:
        res = run_suite(suite, output_dir=str(tmp_path / "runs"), show_progress=False)
    finally:
        serve.shutdown()
        ray.shutdown()
    records = res.records
    assert [r.sample_id for r in records] == [f"easyvqa-{i}" for i in range(4)]
    usage = [r.output.usage for r in records if r.error is None and r.output is not None]
    assert len(usage) == 4 and all(u is not None and u.completion_tokens > 0 for u in usage)
    text_only = 40  # the question alone is ~35 prompt tokens (see the test above); one 64x64 image adds a tile
    assert min(u.prompt_tokens for u in usage if u is not None) > text_only
    (prov,) = res.manifest.benchmarks
    assert prov.modality == "image" and prov.data_sha256 == custom_spec(suite.benchmarks[0]).data_sha256()
    assert {s.metric for s in res.manifest.scores} >= {"exact_match", "anls"}
