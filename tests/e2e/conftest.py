from __future__ import annotations

from pathlib import Path

import pytest
from testlib.runs import artifact_from, run_cli


@pytest.fixture(scope="session")
def quickstart_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's quickstart, run once for the session through the real CLI (local Ray, Serve, llama.cpp)."""
    out = tmp_path_factory.mktemp("runs")
    proc = run_cli("run", "examples/quickstart.yaml", "--output-dir", str(out), "--no-progress")
    assert proc.returncode == 0, proc.stderr[-4000:]
    return artifact_from(proc.stdout)


@pytest.fixture
def local_ray():  # type: ignore[no-untyped-def]
    """A private in-process Ray for tests that drive ``run_suite`` directly; torn down with its pool and Serve."""
    import ray
    from ray import serve

    from cluster import connect
    from omnieval.core import RayConfig

    if ray.is_initialized():
        ray.shutdown()
    connect(RayConfig(num_cpus=4))
    try:
        yield
    finally:
        try:
            ray.kill(ray.get_actor("omnieval-pool", namespace="omnieval"))
        except ValueError:
            pass
        serve.shutdown()
        ray.shutdown()
