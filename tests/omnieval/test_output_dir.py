"""Where the artifact goes: a relative ``output.dir`` inside a Ray job's temporary working_dir copy is refused with
the fix (the artifact would be deleted with the job); a URI stages the artifact locally and copies it there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cluster import job_working_dir
from omnieval._output import OutputTarget, resolve_output_dir, upload_artifact
from omnieval.core import OmnievalUserError

JOB_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"


def _as_ray_job(monkeypatch: pytest.MonkeyPatch, runtime_env: dict[str, object]) -> None:
    monkeypatch.setenv(JOB_ENV, json.dumps({"runtime_env": runtime_env, "metadata": {}}))


def test_outside_a_ray_job_relative_and_absolute_dirs_are_used_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(JOB_ENV, raising=False)
    assert job_working_dir() is None
    assert resolve_output_dir(None, "runs") == OutputTarget(Path("runs"))
    assert resolve_output_dir("/abs/out", "runs") == OutputTarget(Path("/abs/out"))


def test_relative_dir_in_a_ray_job_with_working_dir_is_refused_with_the_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _as_ray_job(monkeypatch, {"working_dir": "gcs://_ray_pkg_0123.zip"})
    with pytest.raises(OmnievalUserError) as e:
        resolve_output_dir(None, "runs")
    msg = str(e.value)
    assert "output.dir 'runs' is relative" in msg and "gcs://_ray_pkg_0123.zip" in msg and "absolute path" in msg
    with pytest.raises(OmnievalUserError, match="--output-dir 'out' is relative"):
        resolve_output_dir("out", "runs")
    assert resolve_output_dir(str(tmp_path), "runs") == OutputTarget(tmp_path)  # an absolute path is fine
    _as_ray_job(monkeypatch, {"env_vars": {"A": "1"}})  # a job without working_dir runs in the submitter's cwd
    assert resolve_output_dir(None, "runs") == OutputTarget(Path("runs"))


def test_a_uri_stages_locally_and_uploads_the_artifact_and_a_bad_one_fails_before_work(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(JOB_ENV, raising=False)
    monkeypatch.setenv("OMNIEVAL_CACHE", str(tmp_path / "cache"))
    dest = tmp_path / "bucket"
    target = resolve_output_dir(None, f"file://{dest}/")
    assert target == OutputTarget(tmp_path / "cache" / "staging", f"file://{dest}")
    _as_ray_job(monkeypatch, {"working_dir": "gcs://_ray_pkg_0123.zip"})  # a URI is fine inside a Ray job
    assert resolve_output_dir(f"file://{dest}", "runs").uri == f"file://{dest}"
    run = tmp_path / "cache" / "staging" / "suite-1"
    (run / "sub").mkdir(parents=True)
    (run / "manifest.json").write_text("{}")
    (run / "sub" / "x.log").write_text("engine log")
    assert upload_artifact(run, f"file://{dest}") == f"file://{dest}/suite-1"
    assert (dest / "suite-1" / "manifest.json").read_text() == "{}"
    assert (dest / "suite-1" / "sub" / "x.log").read_text() == "engine log"
    with pytest.raises(OmnievalUserError, match=r"output.dir 'nosuchscheme://b/runs' cannot be opened"):
        resolve_output_dir(None, "nosuchscheme://b/runs")


def test_plan_run_refuses_before_creating_anything(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from omnieval._plan import plan_run
    from omnieval.core import SuiteConfig

    monkeypatch.chdir(tmp_path)
    _as_ray_job(monkeypatch, {"working_dir": str(tmp_path)})
    suite = SuiteConfig.model_validate({
        "name": "s", "models": [{"name": "m", "engine": "openai",
                                 "source": {"kind": "endpoint", "base_url": "http://127.0.0.1:9/v1"}}],
        "benchmarks": [{"name": "mmlu_tiny", "limit": 1}],
    })  # fmt: skip
    with pytest.raises(OmnievalUserError, match="relative"):
        plan_run(suite)
    assert list(tmp_path.iterdir()) == []  # no run directory was made
