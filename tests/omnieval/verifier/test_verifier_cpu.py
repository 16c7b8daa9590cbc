"""NUMA node and cgroup quota discovery on fake sysfs / cgroupfs trees, and the per-worker plan built from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from omnieval.verifier import cgroup_cpu_limit, numa_nodes, parse_cpulist, plan_workers


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _nodes(tmp: Path, lists: dict[int, str]) -> Path:
    root = tmp / "node"
    for nid, cpus in lists.items():
        _write(root / f"node{nid}" / "cpulist", cpus + "\n")
    _write(root / "online", f"0-{len(lists) - 1}\n")  # not a node dir: ignored
    (root / "power").mkdir()
    return root


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("0", [0]), ("0-3", [0, 1, 2, 3]), ("0-1,4,6-7\n", [0, 1, 4, 6, 7]), ("", []), (" 2 , 0 ", [0, 2])],
)
def test_parse_cpulist(text: str, cpus: list[int]) -> None:
    assert parse_cpulist(text) == cpus


def test_numa_nodes_two_nodes_filtered_by_affinity(tmp_path: Path) -> None:
    root = _nodes(tmp_path, {0: "0-3", 1: "4-7", 2: ""})  # node 2: memory-only (no CPUs)
    assert numa_nodes(root, allowed=set(range(8))) == {0: [0, 1, 2, 3], 1: [4, 5, 6, 7]}
    # A cpuset that excludes node 1 entirely leaves one usable node.
    assert numa_nodes(root, allowed={1, 2}) == {0: [1, 2]}


def test_numa_nodes_without_sysfs_is_one_node(tmp_path: Path) -> None:
    assert numa_nodes(tmp_path / "missing", allowed={0, 1, 2}) == {0: [0, 1, 2]}


def test_cgroup_v2_quota_tightest_ancestor_wins(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    _write(root / "cgroup.controllers", "cpu memory\n")
    _write(root / "cpu.max", "max 100000\n")
    _write(root / "kubepods" / "cpu.max", "250000 100000\n")  # 2.5 CPUs
    _write(root / "kubepods" / "pod1" / "cpu.max", "max 100000\n")
    proc = tmp_path / "cgroup"
    _write(proc, "0::/kubepods/pod1\n")
    assert cgroup_cpu_limit(root, proc) == pytest.approx(2.5)


def test_cgroup_v2_unlimited(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    _write(root / "cgroup.controllers", "cpu\n")
    _write(root / "cpu.max", "max 100000\n")
    proc = tmp_path / "cgroup"
    _write(proc, "0::/\n")
    assert cgroup_cpu_limit(root, proc) is None


def test_cgroup_v1_cfs_quota(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    _write(root / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_quota_us", "150000\n")
    _write(root / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_period_us", "100000\n")
    _write(root / "cpu,cpuacct" / "cpu.cfs_quota_us", "-1\n")
    _write(root / "cpu,cpuacct" / "cpu.cfs_period_us", "100000\n")
    proc = tmp_path / "cgroup"
    _write(proc, "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n")
    assert cgroup_cpu_limit(root, proc) == pytest.approx(1.5)


def test_cgroup_v1_container_view_mounted_at_own_cgroup(tmp_path: Path) -> None:
    """Inside a container /proc/self/cgroup names a host path the mount does not have; the mount root is ours."""
    root = tmp_path / "cg"
    _write(root / "cpu" / "cpu.cfs_quota_us", "200000\n")
    _write(root / "cpu" / "cpu.cfs_period_us", "100000\n")
    proc = tmp_path / "cgroup"
    _write(proc, "3:cpu:/docker/0123\n")
    assert cgroup_cpu_limit(root, proc) == pytest.approx(2.0)


def test_cgroup_v1_unlimited_and_missing(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    _write(root / "cpu" / "cpu.cfs_quota_us", "-1\n")
    _write(root / "cpu" / "cpu.cfs_period_us", "100000\n")
    assert cgroup_cpu_limit(root, tmp_path / "no-proc-file") is None
    assert cgroup_cpu_limit(tmp_path / "nothing", tmp_path / "no-proc-file") is None


def test_plan_one_worker_per_numa_node_capped_by_request(tmp_path: Path) -> None:
    nodes = {0: [0, 1, 2, 3], 1: [4, 5, 6, 7]}
    plan = plan_workers(4, nodes=nodes, cpu_limit=None, cgroup_root=tmp_path)
    assert [(s.numa_node, s.cpus, s.threads) for s in plan] == [(0, [0, 1, 2, 3], 4), (1, [4, 5, 6, 7], 4)]
    assert len(plan_workers(1, nodes=nodes, cpu_limit=None)) == 1


def test_plan_splits_cgroup_quota_between_workers() -> None:
    nodes = {0: list(range(16)), 1: list(range(16, 32))}
    assert [s.threads for s in plan_workers(2, nodes=nodes, cpu_limit=6.0)] == [3, 3]
    assert [s.threads for s in plan_workers(2, nodes=nodes, cpu_limit=2.5)] == [1, 1]
    assert [s.threads for s in plan_workers(2, nodes=nodes, cpu_limit=0.5)] == [1, 1]  # at least one thread
    assert [s.threads for s in plan_workers(1, nodes=nodes, cpu_limit=64.0)] == [16]  # never more than the node
    assert [s.threads for s in plan_workers(2, nodes=nodes, cpu_limit=6.0, threads=5)] == [5, 5]  # explicit wins


def test_plan_reads_fake_trees_end_to_end(tmp_path: Path) -> None:
    node_root = _nodes(tmp_path, {0: "0-1", 1: "2-3"})
    cg = tmp_path / "cg"
    _write(cg / "cgroup.controllers", "cpu\n")
    _write(cg / "cpu.max", "300000 100000\n")
    proc = tmp_path / "cgroup"
    _write(proc, "0::/\n")
    # numa_nodes filters by this process's real affinity: build the plan from the parsed dict to stay host-independent.
    nodes = numa_nodes(node_root, allowed={0, 1, 2, 3})
    plan = plan_workers(2, nodes=nodes, cgroup_root=cg, proc_cgroup=proc)
    assert [(s.numa_node, s.threads) for s in plan] == [(0, 1), (1, 1)]
