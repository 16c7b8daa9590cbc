"""The run's runtime env reaches every actor, engine replicas included: Serve deployments run in Serve's own job and
would not inherit the driver's, so ``ensure_model`` carries it (an ``HF_TOKEN`` for a hub download at engine start)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from ray import serve
from testlib.pool import stop_pool

from cluster import connect, replica_runtime_env, runtime_env_of
from omnieval.core import ModelConfig, OmnievalUserError, RayConfig
from pool import get_controller

MODEL = ModelConfig(name="instant", engine="instant", resources={"num_cpus": 0}, source={"kind": "path", "path": "/dev/null"})


def _cfg(**runtime_env: Any) -> RayConfig:
    return RayConfig(num_cpus=2, runtime_env=runtime_env)


def test_forward_env_is_read_from_the_driver_and_a_missing_name_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMNIEVAL_FWD", "secret")
    monkeypatch.delenv("OMNIEVAL_ABSENT", raising=False)
    env = runtime_env_of(_cfg(env_vars={"A": "1"}, forward_env=["OMNIEVAL_FWD"], py_modules=["/x"]))
    assert env == {"env_vars": {"A": "1", "OMNIEVAL_FWD": "secret"}, "py_modules": ["/x"]}
    assert runtime_env_of(RayConfig()) == {}
    with pytest.raises(OmnievalUserError, match="forward_env names OMNIEVAL_ABSENT"):
        runtime_env_of(_cfg(forward_env=["OMNIEVAL_ABSENT"]))
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", '{"runtime_env": {"working_dir": "gcs://_ray_pkg_1.zip"}}')
    with pytest.raises(OmnievalUserError, match="keep one"):
        runtime_env_of(_cfg(working_dir="/tmp"))


@pytest.fixture
def ray_with_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("OMNIEVAL_FWD", "forwarded")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    connect(_cfg(env_vars={"OMNIEVAL_PROBE": "from-suite"}, forward_env=["OMNIEVAL_FWD"]))
    ctl = get_controller(1.0)
    try:
        yield ctl
    finally:
        stop_pool(ctl)


@pytest.mark.ray
def test_actors_and_the_engine_process_of_a_replica_get_the_runs_env(ray_with_env: Any) -> None:
    @ray.remote(num_cpus=0)
    def seen() -> tuple[str | None, str | None]:
        return os.environ.get("OMNIEVAL_PROBE"), os.environ.get("OMNIEVAL_FWD")

    assert ray.get(seen.remote()) == ("from-suite", "forwarded")  # client, framework, verifier actors alike
    env = replica_runtime_env()
    assert env["env_vars"] == {"OMNIEVAL_PROBE": "from-suite", "OMNIEVAL_FWD": "forwarded"}
    (info,) = ray.get(ray_with_env.ensure_model.remote(MODEL, "env-run", env))
    pid = serve.get_app_handle(info.replica_id).pid.remote().result()
    environ = dict(
        kv.split("=", 1) for kv in Path(f"/proc/{pid}/environ").read_text().split("\0") if "=" in kv
    )  # the engine's own server process, started by the Serve replica
    assert environ.get("OMNIEVAL_PROBE") == "from-suite" and environ.get("OMNIEVAL_FWD") == "forwarded"
