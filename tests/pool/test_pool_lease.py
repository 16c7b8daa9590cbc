"""Leases: a run that heartbeats holds its replicas only while it does (a SIGKILLed driver frees its GPUs after the
grace period); a run that never heartbeats (``--keep-pool``, the job server) is held until released."""

from __future__ import annotations

from typing import Any

import pytest
import ray
from ray import serve
from testlib.ray_head import wait_until

from omnieval.core import ModelConfig
from pool import get_controller

pytestmark = [pytest.mark.ray]


def _model(name: str) -> ModelConfig:
    return ModelConfig(name=name, engine="instant", resources={"num_cpus": 0}, source={"kind": "path", "path": "/dev/null"})


def test_a_silent_run_is_released_after_its_grace_and_a_held_one_is_kept() -> None:
    ray.init(num_cpus=2, namespace="omnieval", include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    ctl: Any = get_controller(0.5)
    try:
        ray.get(ctl.ensure_model.remote(_model("held"), "run-held"))  # never heartbeats
        ray.get(ctl.ensure_model.remote(_model("leased"), "run-dead"))
        ray.get(ctl.heartbeat.remote("run-dead", 3.0))  # its driver's first beat, then silence (SIGKILL)
        assert {r.model for r in ray.get(ctl.replicas.remote())} == {"held", "leased"}
        wait_until(lambda: not ray.get(ctl.replicas.remote("leased")), 60, "the silent run's replica to go")
        assert [r.model for r in ray.get(ctl.replicas.remote())] == ["held"]
        assert "leased" not in ray.get(ctl.users.remote())
        ray.get(ctl.ensure_model.remote(_model("leased"), "run-alive"))
        for _ in range(3):  # a live run keeps beating: its replica stays past the grace
            ray.get(ctl.heartbeat.remote("run-alive", 3.0))
            assert ray.get(ctl.expire_leases.remote()) == []
        assert ray.get(ctl.replicas.remote("leased"))
    finally:
        ray.get(ctl.shutdown.remote(), timeout=60)
        serve.shutdown()
        ray.shutdown()
