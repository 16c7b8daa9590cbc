"""Server logs: in a directory owned by the process that runs the server, removed at a clean stop, kept (and named
in the error) when the server fails to start or dies, swept once their owner process is gone however it ended."""

from __future__ import annotations

import asyncio
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from omnieval.core import GenerationOptions, ReplicaDead
from serving._managed import ManagedServer, failed_log_dir, log_dir, owner_log_dir, sweep_logs
from serving._types import GenerationRequest

ROOT = Path(__file__).resolve().parents[2]
HTTP_SERVER = [sys.executable, "-m", "http.server", "--bind", "{host}", "{port}"]
CHILD = """
import asyncio, sys, tempfile
tempfile.tempdir = sys.argv[1]
from serving._managed import ManagedServer
s = ManagedServer("child", {cmd!r}, health_path="/", bind_all=False)
s.launch(api_key_flag=None)
asyncio.run(s.wait_ready(60))
print(s.log_path, s.pid, flush=True)
sys.stdin.read()  # until killed
"""


def _wait_exit(pid: int, timeout_s: float = 30) -> None:
    """Block until ``pid`` (not our child) has exited: its pidfd becomes readable."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        assert select.select([fd], [], [], timeout_s)[0], f"process {pid} still alive after {timeout_s}s"
    finally:
        os.close(fd)


def _request() -> GenerationRequest:
    msgs = [{"role": "user", "content": "Say hi."}]
    return GenerationRequest(request_id="r", messages=msgs, options=GenerationOptions(max_tokens=4))


def test_logs_live_in_the_owner_directory_and_a_clean_stop_removes_them(tmp_root: Path) -> None:
    s = ManagedServer("web", HTTP_SERVER, health_path="/", bind_all=False)
    s.launch(api_key_flag=None)
    asyncio.run(s.wait_ready(60))
    assert s.log_path is not None and s.log_path.parent == owner_log_dir() and s.log_path.parent.parent == tmp_root
    assert "GET / " in s.log_path.read_text()  # the server's own output
    log = s.log_path
    s.stop()
    assert not log.exists() and not list(tmp_root.glob("*.log")) and not list(failed_log_dir().iterdir())


def test_a_server_that_fails_to_start_keeps_its_log_and_names_it(tmp_root: Path) -> None:
    s = ManagedServer("bad", [sys.executable, "-c", "import sys; print('unknown flag --frobnicate'); sys.exit(3)"])
    s.launch(api_key_flag=None)
    with pytest.raises(ReplicaDead) as ei:
        asyncio.run(s.wait_ready(60))
    kept = failed_log_dir() / s.log_path.name  # type: ignore[union-attr]
    assert s.log_path == kept and kept.read_text().strip() == "unknown flag --frobnicate"
    msg = str(ei.value)
    assert msg.startswith("bad exited with 3 at start: unknown flag --frobnicate; full log: ") and msg.endswith(
        f":{kept}"
    )
    s.stop()
    sweep_logs()
    assert kept.exists()  # neither the stop nor a sweep removes a failure's log


def test_logs_of_a_killed_owner_are_swept_once_it_is_gone(tmp_root: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(cmd=HTTP_SERVER), str(tmp_root.parent)], cwd=ROOT,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert child.stdout is not None
        line = child.stdout.readline().split()
        assert line, "the child printed no log path"
        log, server_pid = Path(line[0]), int(line[1])
        assert log.exists() and log.parent.name.startswith(f"owner-{child.pid}-")
        assert sweep_logs() == [] and log.exists()  # its owner is alive: not touched
    finally:
        child.kill()  # the replica process dies without stopping its server
        child.wait()
    _wait_exit(server_pid)  # the server goes with its owner (with_parent)
    assert sweep_logs() == [log.parent] and not log.parent.exists()
    assert list(log_dir().glob("owner-*")) == []


def test_a_launch_runs_none_of_the_owners_at_fork_handlers_and_sets_the_niceness(tmp_path: Path) -> None:
    """In a Ray worker, gRPC's at-fork handlers aborted a server before it started (a fork with ``preexec_fn``);
    the launch must spawn without them. A Python at-fork handler stands in for gRPC's and must never run."""
    marker = tmp_path / "forked"
    code = (
        "import asyncio, os, sys, tempfile\n"
        "tempfile.tempdir = sys.argv[1]\n"
        "os.register_at_fork(after_in_child=lambda: open(sys.argv[2], 'w').write(str(os.getpid())))\n"
        "from serving._managed import ManagedServer\n"
        f"s = ManagedServer('child', {HTTP_SERVER!r}, health_path='/', bind_all=False, nice=7)\n"
        "s.launch(api_key_flag=None)\n"
        "asyncio.run(s.wait_ready(60))\n"
        "print(os.getpriority(os.PRIO_PROCESS, s.pid), open(f'/proc/{s.pid}/cmdline').read().split(chr(0))[1:3])\n"
        "s.stop()\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path), str(marker)], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True).stdout.split(maxsplit=1)  # fmt: skip
    assert not marker.exists(), "a handler of the owner ran in the server's process"
    assert out == ["7", "['-m', 'http.server']\n"]  # the server itself (exec'd), at the niceness asked for


def test_llama_server_log_removed_on_shutdown_kept_when_it_dies(tmp_root: Path, smollm_gguf: Path) -> None:
    from serving._llamacpp import LlamaCppEngine

    def engine(rid: str, **kw: object) -> LlamaCppEngine:
        return LlamaCppEngine(replica_id=rid, model="m", model_path=str(smollm_gguf), parallel=1, ctx_per_slot=256,
                              threads=1, **kw)  # fmt: skip

    async def scenario() -> None:
        clean = engine("clean")
        await clean.start()
        log = clean._server.log_path  # type: ignore[union-attr]
        assert log is not None and log.parent == owner_log_dir() and "llama_server" in log.read_text()
        await clean.shutdown()
        assert not log.exists()

        dies = engine("dies")
        await dies.start()
        assert dies.pid is not None and dies._server is not None and dies._server.proc is not None
        os.kill(dies.pid, signal.SIGKILL)
        dies._server.proc.wait()
        with pytest.raises(ReplicaDead, match=r"server exited with -9: .*; full log: ") as ei:
            await dies.generate(_request())
        kept = dies._server.log_path
        assert kept is not None and kept.parent == failed_log_dir() and str(ei.value).endswith(f":{kept}")
        assert "llama_server" in kept.read_text() and not await dies.check_health()
        await dies.shutdown()
        assert kept.exists()

        bad = engine("bad", extra_args=["--no-such-flag"])
        with pytest.raises(ReplicaDead, match=r"exited with \d+ at start: .*no-such-flag.*; full log: ") as ei:
            await bad.start()
        path = Path(str(ei.value).rsplit(":", 1)[1])
        assert path.parent == failed_log_dir() and "no-such-flag" in path.read_text()
        await bad.shutdown()

    asyncio.run(scenario())
    assert [p for p in log_dir().glob("owner-*/*.log")] == []
    assert sorted(p.name.split("-")[1] for p in failed_log_dir().iterdir()) == ["bad", "dies"]


def test_a_servers_api_key_always_parses_as_the_value_of_its_flag() -> None:
    """vLLM's and SGLang's servers take ``--api-key KEY`` through argparse, which reads a key that begins with ``-``
    as the next flag and exits: one server start in 64 failed that way with URL-safe keys. 5,000 keys, each parsed
    as vLLM's parser does."""
    import argparse

    from serving._managed import new_api_key

    parser = argparse.ArgumentParser(exit_on_error=False)
    parser.add_argument("--api-key", nargs="+")  # vLLM's: one or more keys
    keys = {new_api_key() for _ in range(5000)}
    assert len(keys) == 5000 and all(len(k) >= 32 for k in keys)
    for k in keys:
        assert parser.parse_args(["--api-key", k]).api_key == [k]
