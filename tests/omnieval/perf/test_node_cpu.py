"""The bench's per-process CPU attribution: who took the node's cores while an engine was counted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from omnieval._replica_usage import UsageSample, cpu_span
from omnieval.perf._node_cpu import NodeCpuWatcher, _Proc, cores_by_group, group_of, others

linux = pytest.mark.skipif(not Path("/proc/stat").exists(), reason="the kernel's /proc accounting is Linux's")
HZ = float(os.sysconf("SC_CLK_TCK"))


def _procs(**ticks: int) -> dict[int, _Proc]:
    """raylet(1) > ray::ServeReplica:vlm-r1(2) > VLLM::EngineCore(3); ray::PoolClient(4) > python -m x(5)."""
    tree = {1: (0, "raylet"), 2: (1, "ray::ServeReplica:vlm-r1:EngineReplica"), 3: (2, "VLLM::EngineCore"),
            4: (1, "ray::PoolClient"), 5: (4, "python -m x")}  # fmt: skip
    return {pid: _Proc(ppid=pp, ticks=ticks.get(f"p{pid}", 0), title=t) for pid, (pp, t) in tree.items()}


def test_a_process_is_charged_to_its_nearest_ray_actor() -> None:
    procs = _procs()
    assert group_of(3, procs) == "ray::ServeReplica:vlm-r1:EngineReplica"
    assert group_of(5, procs) == "ray::PoolClient"
    assert group_of(1, procs) == "raylet"
    # a server the driver started before Ray (pool.prestart) is the driver's child but its replica's engine
    procs[6] = _Proc(ppid=5, ticks=0, title="llama-server")
    procs[7] = _Proc(ppid=6, ticks=0, title="llama-server-helper")
    owners = {6: "ray::ServeReplica:smol-r2:EngineReplica"}
    assert group_of(7, procs, owners) == group_of(6, procs, owners) == "ray::ServeReplica:smol-r2:EngineReplica"
    assert group_of(6, procs) == "ray::PoolClient" and group_of(5, procs, owners) == "ray::PoolClient"


def test_cores_per_group_over_a_window_and_the_engines_own_left_out() -> None:
    a = (100.0, _procs(p1=10, p3=50, p4=5))
    b = (102.0, _procs(p1=10 + int(0.2 * HZ), p3=50 + int(3 * HZ), p4=5 + int(0.5 * HZ), p5=int(0.3 * HZ)))
    got = cores_by_group(a, b)  # p5 was born inside: counted from 0
    assert got["ray::ServeReplica:vlm-r1:EngineReplica"] == pytest.approx(1.5, abs=0.01)
    assert got["ray::PoolClient"] == pytest.approx(0.4, abs=0.01)
    assert [o["name"] for o in others(got, "vlm-r1")] == ["ray::PoolClient", "raylet"]


def test_the_cpu_window_is_the_one_the_usage_summary_counts() -> None:
    """The bench names the other work over the window the replica's own ``cpu_cores`` is counted over."""

    def ts(times: tuple[int, ...]) -> tuple[float, float] | None:
        span = cpu_span([UsageSample(t=t, replica_id="r", model="m", engine="e", in_flight=0, queue_depth=0, slots=1,
                                     prompt_tokens=0, output_tokens=0, completed=0) for t in times], 10.0, 30.0)  # fmt: skip
        return (span[0].t, span[1].t) if span else None

    assert ts((5, 9, 12, 20, 31)) == (9, 20)  # from the last sample before
    assert ts((14, 20)) == (14, 20)  # up inside the phase: from its first
    assert ts((5, 31)) is None


@linux
def test_a_busy_child_is_measured_and_charged_to_its_parent_once_it_ended() -> None:
    """A real process spinning ~1.5 s: seen live, then (reaped) in this process's own count."""
    spin = "import time\nt = time.time()\nwhile time.time() - t < 1.5: pass"
    with NodeCpuWatcher(period_s=0.2) as w:
        subprocess.run([sys.executable, "-c", spin], check=True)
    got = w.window(w.samples[0][0], w.samples[-1][0])
    assert got is not None
    span = got["to"] - got["from"]
    mine = max(got["cores"].items(), key=lambda kv: kv[1])
    assert mine[1] * span == pytest.approx(1.5, abs=0.4), got["cores"]
    total = w.run_total()
    assert total is not None and total["busy_core_s"] >= 1.0  # the node's own count saw the spin too
    assert total["groups"][0]["name"] == mine[0] and total["groups"][0]["core_s"] == pytest.approx(1.5, abs=0.4)


def test_a_pre_started_servers_processes_are_its_replicas_not_the_nodes_other_work() -> None:
    """A held replica's server (here a process and the child it started, as vLLM's API server starts its engine
    core) was started by the driver: each of its processes is charged to the replica that took it over, matched by
    the server's port, so the replica's "other work" no longer lists its own engine."""
    import subprocess
    import sys
    from types import SimpleNamespace as NS

    from omnieval.perf._federated import _held_server_pids
    from omnieval.perf._node_cpu import others

    server = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                               "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
                               "print(c.pid, flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert server.stdout is not None
        kids = [int(server.stdout.readline())]  # its child is running
        held = NS(servers=[NS(server=NS(proc=NS(pid=server.pid), port=8123)), NS(server=None)])
        live = [NS(replica_id="vlm-r1", endpoint=NS(base_url="http://127.0.0.1:8123/v1")),
                NS(replica_id="alm-r2", endpoint=NS(base_url="http://127.0.0.1:9000")), NS(replica_id="x", endpoint=None)]  # fmt: skip
        got = _held_server_pids(live, held)
        assert set(got) == {server.pid, *kids}
        assert all(v.endswith(" [vlm-r1]") for v in got.values())
        groups = {got[server.pid]: 0.5, got[kids[0]]: 1.2, "ray::EvalClient": 0.1}
        assert [o["name"] for o in others(groups, "vlm-r1")] == ["ray::EvalClient"]
        assert _held_server_pids(live, None) == {} and _held_server_pids([], held) == {}
    finally:
        server.kill()
        server.wait()
