"""Preflight: a suite that sends a model inputs it cannot take fails once, before anything runs, naming the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from omnieval._plan import plan_run
from omnieval.core import OmnievalUserError, SuiteConfig


def _suite(model: dict[str, Any], options: dict[str, Any]) -> SuiteConfig:
    return SuiteConfig.model_validate(
        {
            "name": "pf",
            "models": [{"name": "m", "source": {"kind": "path", "path": __file__}, **model}],
            "benchmarks": [{"name": "omniassist", "limit": 1, "judge": "m", "options": options}],
        }
    )


def test_video_and_audio_to_a_text_model_fail_before_the_run_dir(tmp_path: Path) -> None:
    with pytest.raises(OmnievalUserError) as e:
        plan_run(_suite({"engine": "llamacpp"}, {}), output_dir=str(tmp_path))
    msg = str(e.value)
    assert "models[0] ('m', engine llamacpp) cannot take ['audio', 'video']" in msg
    assert "'omniassist'" in msg and "llama.cpp without mmproj" in msg and "text_only: true" in msg
    assert not list(tmp_path.iterdir())


def test_text_only_condition_and_declared_modalities_pass(tmp_path: Path) -> None:
    assert plan_run(_suite({"engine": "llamacpp"}, {"text_only": True}), output_dir=str(tmp_path)).video_inputs == {}
    plan = plan_run(_suite({"engine": "llamacpp", "modalities": ["text", "image", "audio"],
                            "video_input": "frames"}, {}), output_dir=str(tmp_path))  # fmt: skip
    assert plan.video_inputs == {"m": "frames"}


def test_frames_need_an_image_model_and_video_needs_a_way_in(tmp_path: Path) -> None:
    with pytest.raises(OmnievalUserError, match=r"video_input 'frames' sends clips as images, but the model takes"):
        plan_run(_suite({"engine": "llamacpp", "video_input": "frames"}, {}), output_dir=str(tmp_path))
    with pytest.raises(OmnievalUserError, match=r"cannot take \['video'\].*set `video_input: frames`"):
        plan_run(_suite({"engine": "llamacpp", "modalities": ["text", "image", "audio"]}, {}), output_dir=str(tmp_path))
    assert not list(tmp_path.iterdir())
