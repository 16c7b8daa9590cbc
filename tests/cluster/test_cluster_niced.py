"""A private local Ray started at a niceness: its processes run at it, the driver's other threads keep theirs, and
the cluster outlives the ``ray.init`` call (Ray ends its GCS and raylet with the thread that forked them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray

PROBE = """
import json, os, time, threading, ray
from cluster import connect
from omnieval.core import RayConfig

def nice(pid):
    return os.getpriority(os.PRIO_PROCESS, pid)

@ray.remote(num_cpus=0)
class Probe:
    def nice(self):
        return nice(0)

out = []
for how in ("argument", "config"):  # a second start reuses the starter thread; a suite's own ray.niceness
    got = connect(RayConfig(num_cpus=1), niceness=7) if how == "argument" else connect(RayConfig(num_cpus=1, niceness=7))
    p = Probe.remote()
    node = ray._private.worker._global_node
    gcs = node.all_processes["gcs_server"][0].process.pid
    time.sleep(1.0)  # past ray.init's return: a cluster tied to a finished thread would be going down now
    out.append({"got": got, "actor": ray.get(p.nice.remote(), timeout=60), "gcs": nice(gcs), "driver": nice(0),
                "starters": sum(t.name.startswith("omnieval-ray-start") for t in threading.enumerate())})
    ray.shutdown()
print(json.dumps(out))
"""


@pytest.mark.skipif(not hasattr(os, "setpriority"), reason="no per-process niceness on this system")
def test_a_niced_private_ray_runs_at_its_niceness_and_outlives_its_start() -> None:
    if Path("/tmp/ray/ray_current_cluster").exists():
        pytest.skip("a `ray start` cluster is on this machine: connect would join it")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads(proc.stdout.strip().splitlines()[-1])
    for r in runs:
        assert r["got"] == {"address": "local", "started": True, "niceness": 7}
        assert r["gcs"] == 7 and r["actor"] >= 7  # Ray's own processes and its workers
        assert r["driver"] == 0  # the driver's main thread (and what it starts: the pre-started servers) keeps its own
    assert [r["starters"] for r in runs] == [1, 1]
    assert "SIGTERM handler is not set" not in proc.stderr  # Ray's note about its thread: the run sets its own
