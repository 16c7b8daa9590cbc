"""Fixtures: job servers as real processes (see jobserver_testlib), cleaned up with any job they left running."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from jobserver_testlib import Server, kill_leftover_jobs, subprocess_server_args


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    servers: list[Server] = []

    def make(extra: list[str] | None = None, env: dict[str, str] | None = None) -> Server:
        s = Server(tmp_path, subprocess_server_args() if extra is None else extra, env)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.stop()
    kill_leftover_jobs(tmp_path / "jobs")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A shared server (max_concurrent=1) for tests that do not restart it."""
    tmp = tmp_path_factory.mktemp("server")
    s = Server(tmp, subprocess_server_args()).start()
    yield s
    s.stop()
    kill_leftover_jobs(tmp / "jobs")
