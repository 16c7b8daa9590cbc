"""``cluster.connect`` with a ``ray start`` cluster already on the machine: ``ray.init()`` joins it by itself, so the
run joins it (not as its own: nothing of it is the run's to shut down) and does not pass ``num_cpus``, which Ray
refuses when joining ("When connecting to an existing cluster, num_cpus and num_gpus must not be provided")."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from testlib.ray_head import wait_until

from serving import free_port

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.isolated]

PROBE = """
import json, logging, ray
logging.basicConfig(level=logging.WARNING)
from cluster import connect, starts_local_ray
from omnieval.core import RayConfig
local = starts_local_ray(RayConfig(num_cpus=2))
got = connect(RayConfig(num_cpus=2))
print(json.dumps({"starts_local": local, **got, "cpus": ray.cluster_resources().get("CPU")}))
ray.shutdown()
"""


CURRENT = Path("/tmp/ray/ray_current_cluster")
"""Where ``ray start`` (default temp dir) leaves its address for ``ray.init()`` to find; ``--block`` stopped by a
signal leaves it behind, and a stale one makes every later ``ray.init()`` wait on a dead cluster."""


def test_a_ray_start_cluster_on_the_machine_is_joined_with_its_own_cpus(tmp_path: Path) -> None:
    if CURRENT.exists():
        pytest.skip(f"{CURRENT} exists: a `ray start` cluster of someone else's is on this machine")
    bindir = os.path.dirname(sys.executable)
    # the default temp dir, as a user's `ray start --head` has it: that is what ray.init() finds by itself
    head = subprocess.Popen([os.path.join(bindir, "ray"), "start", "--head", "--block", "--num-cpus=3",
                             f"--port={free_port()}", "--include-dashboard=false", "--disable-usage-stats"],
                            stdout=(tmp_path / "head.log").open("wb"), stderr=subprocess.STDOUT,
                            start_new_session=True, env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})  # fmt: skip
    try:
        wait_until(CURRENT.exists, 120, "the head's address file")
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=180, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        got = json.loads(proc.stdout.strip().splitlines()[-1])
        assert got == {"starts_local": False, "address": "auto", "started": False, "cpus": 3.0}
        assert "ray.num_cpus 2 is not applied: joining the Ray cluster already running on this machine" in proc.stderr
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        head.wait(timeout=60)
        CURRENT.unlink(missing_ok=True)
