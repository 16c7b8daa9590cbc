"""The conventional baseline of `omnieval bench federated --config` on real models, each runner in its own process:
omnieval's in-process transformers engine for built-in benchmarks (video as frames, audio), and lm-eval's /
lmms-eval's own model classes (where the lmms venv is given, as scripts/ci_frameworks.sh does)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from testlib.tiers import need, unavailable

need("torch")  # the main venv has no torch: these run in the vLLM venv (scripts/ci_vllm.sh)
need("transformers")

pytestmark = [pytest.mark.transformers, pytest.mark.timeout(900)]

SUITE = Path(__file__).resolve().parents[2] / "examples/bench_omni.yaml"


def _plan(entries: list[dict[str, Any]], *, concurrent: bool, limit: int) -> list[dict[str, Any]]:
    from omnieval.perf._conventional import ConventionalJob, plan_jobs

    jobs = plan_jobs([ConventionalJob.model_validate(e) for e in entries], SUITE, cpus=2, concurrent=concurrent)
    for j in jobs:
        j["limit"] = limit
    return jobs


def _check(job: dict[str, Any], n: int) -> None:
    assert job["records"] == n and job["errors"] == 0 and job["output_tokens"] > 0
    assert all(p is not None for p in job["predictions"].values())  # answered (an untrained tower may say "")
    assert job["t_start"] <= job["t_loaded"] <= job["t_inf0"] < job["t_inf1"] <= job["t_end"]
    assert job["e2e_s"] >= job["inference_s"] + job["load_s"] - 1e-6


def test_builtin_runner_in_process_engine_video_frames_and_audio(plumbing_models: dict[str, Path]) -> None:
    from omnieval.perf._conventional import run_jobs

    entries = [
        {"benchmark": "clip_qa", "runner": "builtin", "model_class": "transformers", "pretrained": str(plumbing_models["image"])},
        {"benchmark": "asr_tiny", "runner": "builtin", "model_class": "transformers",
         "pretrained": str(plumbing_models["audio-hf"])},
    ]  # fmt: skip
    res = run_jobs(_plan(entries, concurrent=True, limit=2), concurrent=True)
    by = {j["benchmark"]: j for j in res["jobs"]}
    for j in by.values():
        _check(j, 2)
    assert by["clip_qa"]["cores"] == [0] and by["asr_tiny"]["cores"] == [1]  # each pinned to its share
    windows = sum(j["inference_s"] for j in res["jobs"])
    assert max(j["inference_s"] for j in res["jobs"]) <= res["inference_s"] <= windows + 1e-6
    assert res["e2e_s"] >= max(j["e2e_s"] for j in res["jobs"]) - 1e-6


def test_framework_runners_use_their_own_model_classes(plumbing_models: dict[str, Path]) -> None:
    if not os.environ.get("OMNIEVAL_LMMS_PYTHON"):
        unavailable("lmms", "needs OMNIEVAL_LMMS_PYTHON naming a built lmms venv (scripts/ci_frameworks.sh runs this)")
    from omnieval.perf._conventional import run_jobs

    py = os.environ["OMNIEVAL_LMMS_PYTHON"]
    vlm = str(plumbing_models["image"])
    entries = [
        {"benchmark": "gsm8k", "runner": "lmeval", "model_class": "hf-multimodal", "pretrained": vlm, "python": py},
        {"benchmark": "tiny_shapes", "runner": "lmms", "model_class": "huggingface", "pretrained": vlm, "python": py,
         "model_args": {"device_map": "cpu"}},
    ]  # fmt: skip
    res = run_jobs(_plan(entries, concurrent=False, limit=2), concurrent=False)
    first, second = res["jobs"]
    assert (first["runner"], second["runner"]) == ("lmeval", "lmms")
    for j in res["jobs"]:
        _check(j, 2)
    assert second["t_inf0"] >= first["t_inf1"]  # one after the other, as a script runs them
    assert res["inference_s"] == pytest.approx(first["inference_s"] + second["inference_s"])
