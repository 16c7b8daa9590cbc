"""The framework tasks' check can go on while Ray starts (the runner's way): a bad task still fails the run before
anything deploys, is still the error reported when other input is bad too, and leaves no run directory behind."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from omnieval import _plan
from omnieval._plan import plan_run
from omnieval.core import OmnievalUserError, SuiteConfig


def _suite(model_path: Path, benchmarks: list[dict[str, Any]] | None = None) -> SuiteConfig:
    return SuiteConfig.model_validate({
        "name": "s", "models": [{"name": "m", "engine": "llamacpp", "source": {"kind": "path", "path": str(model_path)}}],
        "benchmarks": benchmarks or [{"name": "mmlu_tiny", "limit": 1}, {"name": "gsm8kk", "framework": "lmeval"}],
    })  # fmt: skip


class _HeldCheck:
    """``check_frameworks`` that answers only when released, with ``error`` (or nothing)."""

    def __init__(self, error: str | None) -> None:
        self.started, self.release, self.error = threading.Event(), threading.Event(), error

    def __call__(self, suite: SuiteConfig) -> None:
        self.started.set()
        assert self.release.wait(30)
        if self.error:
            raise OmnievalUserError(self.error)


def test_a_deferred_check_lets_the_plan_return_and_its_failure_removes_the_run_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    check = _HeldCheck("benchmarks[1].name: lm-eval has no task, group or tag 'gsm8kk'. Did you mean: gsm8k")
    monkeypatch.setattr(_plan, "check_frameworks", check)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    out = tmp_path / "runs" / "nested"
    plan = plan_run(_suite(model), output_dir=str(out), defer_framework_check=True)
    assert check.started.is_set() and not check.release.is_set()  # the plan did not wait for the check
    assert plan.run_dir.is_dir() and plan.run_dir.parent == out
    check.release.set()
    with pytest.raises(OmnievalUserError, match="has no task, group or tag 'gsm8kk'"):
        plan.await_framework_check()
    assert list(tmp_path.iterdir()) == [model]  # runs/ and everything under it were this plan's: gone


def test_a_passing_deferred_check_keeps_the_run_and_an_up_front_check_still_blocks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    check = _HeldCheck(None)
    monkeypatch.setattr(_plan, "check_frameworks", check)
    plan = plan_run(_suite(model), output_dir=str(tmp_path / "runs"), defer_framework_check=True)
    check.release.set()
    plan.await_framework_check()
    assert (plan.run_dir / "manifest.json").is_file()

    failing = _HeldCheck("bad task")
    failing.release.set()
    monkeypatch.setattr(_plan, "check_frameworks", failing)
    with pytest.raises(OmnievalUserError, match="bad task"):
        plan_run(_suite(model), output_dir=str(tmp_path / "other"))  # not deferred: fails before the directory
    assert not (tmp_path / "other").exists()


def test_a_bad_framework_task_is_reported_before_other_bad_input_found_meanwhile(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The model file is missing too; checked up front the framework task's error came first, and still does."""
    check = _HeldCheck("benchmarks[1].name: lm-eval has no task 'gsm8kk'")
    monkeypatch.setattr(_plan, "check_frameworks", check)
    threading.Timer(0.3, check.release.set).start()  # answers after the model file was found missing
    with pytest.raises(OmnievalUserError, match="no task 'gsm8kk'"):
        plan_run(_suite(tmp_path / "missing.gguf"), output_dir=str(tmp_path / "runs"), defer_framework_check=True)
    assert not (tmp_path / "runs").exists()
    passing = _HeldCheck(None)
    passing.release.set()
    monkeypatch.setattr(_plan, "check_frameworks", passing)
    with pytest.raises(OmnievalUserError, match="model file not found"):
        plan_run(_suite(tmp_path / "missing.gguf"), output_dir=str(tmp_path / "runs"), defer_framework_check=True)
