"""Servers the driver starts before Ray: a replica (here another process, or this one) takes one over only when its
own command would be the same, owns it for as long as it lives, and learns how it ended; nothing is left running
when the replica dies, when no replica takes it, or when the driver is gone."""

from __future__ import annotations

import asyncio
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from serving._managed import ManagedServer
from serving._prestart import ENV_DIR, PrestartSet, _socket_root, claim, supported

pytestmark = pytest.mark.skipif(not supported(), reason="needs pidfds (Linux 5.3+)")

HTTP_SERVER = [sys.executable, "-m", "http.server", "--bind", "{host}", "{port}"]
KEY = ManagedServer("web", HTTP_SERVER, bind_all=False).prestart_key
REPLICA = """
import asyncio, os, sys
from serving._managed import ManagedServer
s = ManagedServer("web", {cmd!r}, health_path="/", bind_all=False)
got = __import__("serving._prestart", fromlist=["claim"]).claim("m", s.prestart_key if {same} else "other", 30)
if got is None:
    print("none", flush=True)
else:
    s.adopt(*got)
    asyncio.run(s.wait_ready(60))
    print(s.pid, s.port, flush=True)
sys.stdin.read()  # until killed
"""


def _launcher() -> ManagedServer:
    s = ManagedServer("web", HTTP_SERVER, health_path="/", bind_all=False)
    s.launch(api_key_flag=None)
    return s


def _prestart(n: int = 1) -> PrestartSet:
    ps = PrestartSet()
    slots = ps.reserve("m", n)
    ps.start([(slots, _launcher)])
    for s in slots:
        assert s.launched.wait(30) and s.failed is None
    return ps


def _gone(pid: int, timeout_s: float = 30) -> bool:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout_s)[0])
    finally:
        os.close(fd)


def _replica(same: bool = True) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", REPLICA.format(cmd=HTTP_SERVER, same=same)], text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={**os.environ})  # fmt: skip


def test_a_replica_takes_over_the_prestarted_server_and_the_server_ends_with_it(tmp_root: Path) -> None:
    ps = _prestart()
    try:
        server_pid = ps.servers[0].server.proc.pid
        rep = _replica()
        assert rep.stdout is not None
        pid, port = rep.stdout.readline().split()
        assert int(pid) == server_pid and int(port) == ps.servers[0].server.port  # the driver's, not a new one
        assert ps.servers[0].taken.wait(10) and ps.adopted() == 1
        assert not list(ps.dir.glob("*.sock"))  # taken: no second replica can ask for it
        rep.kill()  # the replica dies without stopping anything
        rep.wait()
        assert _gone(server_pid), "the server outlived the replica that owned it"
    finally:
        ps.close()


def test_a_replica_that_would_launch_another_command_does_not_take_it_and_it_is_ended(tmp_root: Path) -> None:
    ps = _prestart()
    try:
        server_pid = ps.servers[0].server.proc.pid
        rep = _replica(same=False)
        assert rep.stdout is not None
        assert rep.stdout.readline().strip() == "none"
        assert _gone(server_pid), "a server no replica can use kept running"
        assert ps.adopted() == 0
        rep.kill()
        rep.wait()
    finally:
        ps.close()


def test_each_replica_takes_its_own_and_those_left_are_ended_once_the_models_are_up(tmp_root: Path) -> None:
    ps = _prestart(3)
    os.environ[ENV_DIR] = str(ps.dir)
    held = []
    try:
        for _ in range(2):
            got = claim("m", KEY, 30)
            assert got is not None
            held.append(got)
        assert len({info.pid for info, _ in held}) == 2
        assert ps.servers[0].taken.wait(10) and ps.servers[1].taken.wait(10) and ps.adopted() == 2
        left = next(s for s in ps.servers if not s.taken.is_set()).server.proc.pid
        ps.release_unclaimed()
        assert _gone(left)
        assert all(proc.poll() is None for _, proc in held)  # the taken ones still serve
        assert claim("m", KEY, 5) is None  # nothing left to take: a new replica launches its own
    finally:
        for _, proc in held:
            proc.release()
        ps.close()
        assert all(_gone(info.pid) for info, _ in held)


def test_a_server_killed_under_its_replica_reports_its_signal(tmp_root: Path) -> None:
    ps = _prestart()
    os.environ[ENV_DIR] = str(ps.dir)
    try:
        s = ManagedServer("web", HTTP_SERVER, health_path="/", bind_all=False)
        got = claim("m", s.prestart_key, 30)
        assert got is not None
        s.adopt(*got)
        asyncio.run(s.wait_ready(60))
        assert s.alive() and s.adopted
        os.kill(s.pid, signal.SIGKILL)  # type: ignore[arg-type]
        assert s.proc is not None and s.proc.wait(timeout=30) == -signal.SIGKILL  # the driver reaped it and said so
        assert not s.alive()
        s.stop()
    finally:
        ps.close()


def test_nothing_is_offered_once_the_run_has_ended(tmp_root: Path) -> None:
    ps = _prestart()
    pid = ps.servers[0].server.proc.pid
    d = ps.dir
    ps.close()
    assert _gone(pid) and not d.exists() and ENV_DIR not in os.environ
    os.environ[ENV_DIR] = str(d)
    try:
        assert claim("m", KEY, 5) is None
    finally:
        del os.environ[ENV_DIR]


def test_a_killed_drivers_sockets_are_swept_by_the_next_run_and_a_live_ones_kept(tmp_root: Path) -> None:
    """A driver killed with SIGKILL never closes its set: the next driver removes what it left (its untaken
    sockets), and leaves a directory whose driver still runs."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    root = Path(_socket_root())  # where the driver makes its directory (/tmp for a long temp path)
    stale, live = root / f"omnieval-prestart-{dead.pid}-abc", root / f"omnieval-prestart-{os.getppid()}-def"
    for d in (stale, live):
        d.mkdir()
        (d / "0123456789ab-0.sock").touch()
    try:
        ps = PrestartSet()
        assert ps.dir.name.startswith(f"omnieval-prestart-{os.getpid()}-")
        assert not stale.exists() and (live / "0123456789ab-0.sock").exists()
        ps.close()
        assert not ps.dir.exists()
    finally:
        shutil.rmtree(stale, ignore_errors=True)
        shutil.rmtree(live, ignore_errors=True)


@pytest.mark.parametrize("length", [30, 59, 79])
def test_every_socket_fits_whatever_the_temp_directory_s_length(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               length: int) -> None:  # fmt: skip
    """A socket's whole path fits a Unix socket's 107 bytes: the temp directory where it leaves room for the
    driver's directory and the slot names, ``/tmp`` where it does not (CI failed with "AF_UNIX path too long" under
    a 59-character pytest directory once the driver's pid joined the directory's name)."""
    base = Path(tempfile.mkdtemp(dir="/tmp")) if length < len(str(tmp_path)) + 2 else tmp_path
    root = base / ("d" * (length - len(str(base)) - 1))
    root.mkdir()
    assert len(str(root)) == length
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    ps = PrestartSet()
    try:
        slots = ps.reserve("m", 12)  # binds each socket: OSError("AF_UNIX path too long") past 107 bytes
        assert all(len(os.fsencode(s.path)) <= 107 for s in slots)
        assert ps.dir.parent == (root if length == 30 else Path("/tmp"))  # the temp directory wherever it fits
    finally:
        ps.close()
        if base != tmp_path:
            shutil.rmtree(base, ignore_errors=True)


def test_a_log_moved_by_its_other_keeper_first_is_found_where_it_went(tmp_root: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A pre-started server's log has two keepers (the driver that launched it, the replica that took it): when the
    driver moves it to ``failed/`` between the replica's check and its own move, the replica finds it there (CI
    failed once on exactly that interleaving with ``FileNotFoundError``)."""
    from serving import _managed

    log = _managed.log_dir() / "web.log"  # under tmp_root
    log.write_text("died\n")
    s = ManagedServer("web", HTTP_SERVER)
    s.log_path = log
    real = os.replace

    def the_driver_first(src: str | Path, dst: str | Path) -> None:
        real(src, dst)  # the other keeper's move, after this one saw the file
        real(src, dst)  # this one's: the file is gone

    monkeypatch.setattr(_managed.os, "replace", the_driver_first)
    kept = s.keep_log()
    assert kept == _managed.failed_log_dir() / "web.log" == s.log_path and kept.read_text() == "died\n"
    monkeypatch.setattr(_managed.os, "replace", lambda src, dst: (os.remove(src), real(src, dst)))  # removed instead
    log.write_text("clean\n")
    s.log_path = log
    (_managed.failed_log_dir() / "web.log").unlink()
    assert s.keep_log() is None and s.log_path is None
