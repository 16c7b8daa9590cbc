"""A framework's own interpreter is looked for on every node before its actor is placed: one that no node has is a
user error naming each node (an actor whose ``py_executable`` is missing on its node would never start)."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator

import pytest
import ray

from cluster import nodes_with_executable
from omnieval._runner import interpreter_nodes
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
    assert nodes_with_executable(missing) == ([], [f"{socket.gethostname()} (node {node[:8]})"])
    with pytest.raises(OmnievalUserError) as e:
        interpreter_nodes("lmms", missing)
    msg = str(e.value)
    assert msg.startswith(f"frameworks.lmms.python: {missing} is not an executable on any node")
    assert socket.gethostname() in msg and "scripts/make_framework_venv.sh lmms" in msg
