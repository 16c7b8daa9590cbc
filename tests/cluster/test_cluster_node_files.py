"""A framework's own interpreter is looked for on every node before its actor is placed: one that no node has is a
user error naming each node (an actor whose ``py_executable`` is missing on its node would never start)."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import ray

from cluster import nodes_with_executable, nodes_with_paths, worker_checks
from omnieval._placement import interpreter_nodes
from omnieval.core import OmnievalUserError

pytestmark = [pytest.mark.ray]


@pytest.fixture(scope="module")
def local_ray_1cpu() -> Iterator[None]:
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    try:
        yield
    finally:
        ray.shutdown()


def test_each_node_is_asked_and_a_missing_interpreter_names_them(local_ray_1cpu: None, tmp_path: object) -> None:
    (node,) = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
    assert nodes_with_executable(sys.executable) == ([node], [])
    assert interpreter_nodes("lmms", sys.executable) == [node]
    missing = "/nonexistent/venv-lmms/bin/python"
    assert nodes_with_executable(missing) == ([], [f"{socket.gethostname()} (node {node[:8]}): no {missing}"])
    with pytest.raises(OmnievalUserError) as e:
        interpreter_nodes("lmms", missing)
    msg = str(e.value)
    assert msg.startswith(f"frameworks.lmms.python: {missing} is not an executable on any node")
    assert socket.gethostname() in msg and "scripts/make_framework_venv.sh lmms" in msg


def test_an_interpreter_is_asked_whether_it_can_run_this_clusters_workers(local_ray_1cpu: None, tmp_path: Any) -> None:
    """The driver's own interpreter can; one that cannot import ray says so, one with another Ray is named."""
    (node,) = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
    assert ray.get(worker_checks(sys.executable, [node])) == [None]

    def fake(name: str, body: str) -> str:
        p = tmp_path / name
        p.write_text("#!/bin/sh\n" + body + "\n")
        p.chmod(0o755)
        return str(p)

    (no_ray,) = ray.get(worker_checks(fake("a", "echo \"ModuleNotFoundError: No module named 'ray'\" >&2; exit 1"), [node]))
    assert no_ray == f"{socket.gethostname()}: ModuleNotFoundError: No module named 'ray'"
    (old,) = ray.get(worker_checks(fake("b", "echo 2.0.0 True"), [node]))
    assert old == f"{socket.gethostname()}: it imports ray 2.0.0, the cluster runs {ray.__version__}"
    (no_omni,) = ray.get(worker_checks(fake("c", f"echo {ray.__version__} False"), [node]))
    assert no_omni == f"{socket.gethostname()}: it cannot import omnieval"


def test_media_directories_every_node_must_see(local_ray_1cpu: None, tmp_path: object) -> None:
    (node,) = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
    here = str(tmp_path)
    assert nodes_with_paths([here, sys.prefix]) == ([node], [])
    assert nodes_with_paths([here, "/nonexistent/media"]) == ([], [f"{socket.gethostname()} (node {node[:8]}): no /nonexistent/media"])


def test_the_drivers_own_node_is_answered_without_a_task(local_ray_1cpu: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A task pinned there would first wait for a worker process to start (~1 s before every framework actor)."""
    import cluster._node_files as nf

    class NoTasks:
        def options(self, **kw: Any) -> Any:
            raise AssertionError("a task was sent to the driver's own node")

    monkeypatch.setattr(nf, "_missing", NoTasks())
    (node,) = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
    assert nodes_with_executable(sys.executable) == ([node], [])
    assert nodes_with_paths(["/nonexistent/media"]) == ([], [f"{socket.gethostname()} (node {node[:8]}): no /nonexistent/media"])


def test_clients_go_where_the_media_are_and_media_no_node_sees_is_a_user_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The placement decision over what the nodes answered (the answers themselves are the real checks above)."""
    import cluster
    from omnieval._placement import client_spots

    two = [{"NodeID": "a" * 56, "Alive": True}, {"NodeID": "b" * 56, "Alive": True}]
    monkeypatch.setattr(ray, "nodes", lambda: two)
    assert client_spots(set(), 2) == [{}, {}]  # no local media: anywhere
    monkeypatch.setattr(cluster, "nodes_with_paths", lambda paths: (["b" * 56], ["hostA (node aaaaaaaa): no /m"]))
    spots = client_spots({"/m"}, 3)
    assert [s["scheduling_strategy"].node_id for s in spots] == ["b" * 56] * 3
    monkeypatch.setattr(cluster, "nodes_with_paths", lambda paths: ([], ["hostA (node aaaaaaaa): no /m", "hostB (node bbbbbbbb): no /m"]))
    with pytest.raises(OmnievalUserError, match=r"not visible on any node of the cluster \(hostA .*; hostB"):
        client_spots({"/m"}, 2)
