"""Engine servers started by the driver before Ray, and adopted by the replicas that would have started them.

Why: a replica can start its engine's server only once Ray, Serve's controller, the pool controller, the replica's
own worker process and its imports are up (about 10 s on a 2-core node), and the slowest engine's load (vLLM-CPU:
25-35 s) is the run's critical path. The driver knows from the suite, right after planning, which servers its
replicas will start; on a node it starts itself (a local ``ray.init()``, nothing kept after the run) it starts the
same commands at once, and each replica takes one over instead of launching its own.

Handoff: one Unix socket per pre-started server in a directory named by ``OMNIEVAL_PRESTART_DIR``, which the driver
sets before ``ray.init()`` so that only this run's Ray workers see it. A replica connects, gets the server's port,
pid, log and key (a digest of its command, environment and niceness); it takes it only if the key equals what it
would have launched itself, and keeps the connection open for as long as it owns the server. The driver then:

* ends the server when that connection closes (the replica stopped or died: no orphan engine), and tells the
  replica the server's exit status when it exits first (the driver, its parent, reaps it);
* ends every server no replica took once the models are up (a replica that launched its own instead);
* loses them all with itself (``with_parent``: the kernel ends them when the driver's launching thread dies).

A replica finds no socket (another run, a kept pool, a restart after the handoff) and launches its own, as before.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("omnieval.serving")

ENV_DIR = "OMNIEVAL_PRESTART_DIR"
"""Where this run's handoff sockets are; set by the driver, inherited by the Ray workers it starts."""


def server_key(cmd: Sequence[str], env: dict[str, str] | None, nice: int) -> str:
    """What makes two launches the same server (port and key are filled in at launch, so not part of it)."""
    blob = json.dumps([list(cmd), sorted((env or {}).items()), nice])
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def supported() -> bool:
    """The handoff needs pidfds (Linux 5.3+) to watch a server that is not the replica's child."""
    return hasattr(os, "pidfd_open") and hasattr(signal, "pidfd_send_signal")


def _prefix(model: str) -> str:
    return hashlib.sha256(model.encode()).hexdigest()[:12]


def _slot(model: str, i: int) -> str:
    return f"{_prefix(model)}-{i}.sock"


_DIR_PREFIX = "omnieval-prestart-"
_SUN_PATH = 107
"""A Unix socket's longest path, in bytes (``sun_path`` holds 108 with its NUL)."""


def _socket_root() -> str:
    """The system temp directory, or ``/tmp`` where a socket's whole path under it would be too long: the root, this
    driver's directory (its pid and ``mkdtemp``'s 8 characters) and the longest slot name (a 4-digit index)."""
    root = tempfile.gettempdir()
    longest = len(os.fsencode(root)) + len(f"/{_DIR_PREFIX}{os.getpid()}-12345678/{_slot('', 9999)}")
    return root if longest <= _SUN_PATH or not os.path.isdir("/tmp") else "/tmp"


def _sweep_stale(root: str) -> None:
    """Remove the socket directories of drivers that are gone: one killed with SIGKILL (``ray job stop`` past its
    grace, an OOM kill) never ran its ``close()``, and its untaken sockets would otherwise stay in the temp
    directory for good. A directory's name carries its driver's pid; a live pid's is left alone."""
    for d in Path(root).glob(f"{_DIR_PREFIX}*-*"):
        pid = d.name[len(_DIR_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except PermissionError:  # another user's live driver
            continue


def _readline(sock: socket.socket, timeout_s: float | None) -> str:
    """One ``\\n``-terminated line ('' at EOF)."""
    sock.settimeout(timeout_s)
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            return ""
        buf += chunk
    return buf.decode()


def _send(sock: socket.socket, msg: dict[str, Any]) -> bool:
    """One JSON line; False when the other side is gone."""
    try:
        sock.sendall(f"{json.dumps(msg)}\n".encode())
    except OSError:
        return False
    return True


@dataclass
class Handoff:
    """What a replica needs to take over a pre-started server."""

    key: str
    port: int
    pid: int
    log_path: str
    spawned_at: float
    """Unix time the driver launched it (the server's load is counted from here)."""


class _Prestarted:
    """Driver side of one pre-started server: its socket, and the threads that hand it over and end it."""

    def __init__(self, path: Path, model: str) -> None:
        self.path, self.model = path, model
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(8)
        self.server: Any = None  # a ManagedServer once launched
        self.failed: str | None = None
        self.taken = threading.Event()
        self.launched = threading.Event()
        self.closed = False
        self.exit_rc: int | None = None
        self._conn: socket.socket | None = None
        self._lock = threading.Lock()
        self._handing = threading.RLock()

    def launch(self, make: Callable[[], Any]) -> None:
        """``make()`` builds and launches the ManagedServer (from the driver's long-lived thread: the kernel's
        parent-death signal follows the thread that started it)."""
        try:
            self.server = make()
            threading.Thread(target=self._reap, daemon=True, name="omnieval-prestart-reap").start()
        except Exception as e:  # noqa: BLE001 - the replica launches its own and reports what is wrong there
            self.failed = f"{type(e).__name__}: {e}"
            log.warning("could not pre-start the %s server (its replica starts its own): %s", self.model, self.failed)
        finally:
            self.launched.set()
        threading.Thread(target=self._hand_over, daemon=True, name="omnieval-prestart-handoff").start()

    def _reap(self) -> None:
        rc = self.server.proc.wait()  # the driver is its parent: it must reap it, or it stays a zombie
        with self._lock:
            self.exit_rc = rc
            conn = self._conn
        if conn is not None:
            _send(conn, {"exit": rc})

    def _hand_over(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:  # closed: released unclaimed, or the run ended
                return
            with self._handing:  # ``close()`` waits for a handoff under way: it must not end a server being taken
                if self.closed or self.failed is not None or self.server is None:
                    conn.close()  # the replica asking launches its own
                    if self.closed:
                        return
                    continue
                s = self.server
                info = Handoff(key=s.prestart_key, port=s.port, pid=s.proc.pid, log_path=str(s.log_path),
                               spawned_at=s.spawned_at or time.time())  # fmt: skip
                try:
                    reply = json.loads(_readline(conn, 60.0) or "{}") if _send(conn, info.__dict__) else {}
                except (OSError, ValueError):
                    conn.close()
                    continue  # that replica went away mid-handoff: the next one may take it
                if not reply.get("take"):
                    log.warning("the pre-started %s server was not taken: %s; ending it", self.model,
                                reply.get("why", "its replica did not answer"))  # fmt: skip
                    conn.close()
                    self.close()
                    return
                with self._lock:
                    self._conn = conn
                    exited = self.exit_rc
                self.taken.set()
                self._unlisten()
            if exited is not None:  # exited between the handoff and now: say so
                _send(conn, {"exit": exited})
            self._hold(conn)
            return

    def _hold(self, conn: socket.socket) -> None:
        """Until the owning replica's connection closes, then end the server if it still runs."""
        conn.settimeout(None)
        try:
            while conn.recv(4096):
                pass
        except OSError:
            pass
        self._end_server()

    def _unlisten(self) -> None:
        try:
            self.listener.close()
        except OSError:
            pass
        self.path.unlink(missing_ok=True)

    def _end_server(self) -> None:
        """``ManagedServer.stop``: terminate, then kill; its log removed after a clean stop, kept after a crash."""
        if self.server is not None:
            self.server.stop()

    def close(self) -> None:
        """No replica takes it any more: end it (a taken one is its replica's to end, and ends with it)."""
        with self._handing:
            if self.closed:
                return
            self.closed = True
            self._unlisten()
            taken = self.taken.is_set()
        if not taken:
            self._end_server()


class PrestartSet:
    """The driver's pre-started servers for one run."""

    def __init__(self) -> None:
        root = _socket_root()
        _sweep_stale(root)
        self.dir = Path(tempfile.mkdtemp(prefix=f"{_DIR_PREFIX}{os.getpid()}-", dir=root))
        self.servers: list[_Prestarted] = []
        self._thread: threading.Thread | None = None
        self._done = threading.Event()

    def reserve(self, model: str, n: int) -> list[_Prestarted]:
        """``n`` sockets for ``model``'s replicas, listening at once: a replica that asks before its server is
        launched waits for it instead of launching a second one."""
        out = [_Prestarted(self.dir / _slot(model, len(self.servers) + i), model) for i in range(n)]
        self.servers.extend(out)
        return out

    def start(self, launches: list[tuple[list[_Prestarted], Callable[[], Any]]]) -> PrestartSet:
        """Launch each model's servers on one thread that lives until ``close()``: the servers die with it (the
        kernel's parent-death signal follows the launching thread), so the driver's lifetime bounds theirs."""

        def run() -> None:
            for slots, make in launches:
                for s in slots:
                    s.launch(make)
            self._done.wait()  # keeps the servers' parent thread alive for the run

        os.environ[ENV_DIR] = str(self.dir)  # before ray.init(): this run's workers inherit it
        self._thread = threading.Thread(target=run, daemon=True, name="omnieval-prestart")
        self._thread.start()
        return self

    def adopted(self) -> int:
        return sum(1 for s in self.servers if s.taken.is_set())

    def release_unclaimed(self) -> None:
        """Once the models are up: a server no replica took only takes CPU from those that run."""
        left = [s for s in self.servers if not s.taken.is_set() and not s.closed]
        for s in left:
            s.launched.wait(timeout=60)
            s.close()
        if left:
            log.warning("%d pre-started server(s) were not taken by a replica and were ended: %s", len(left),
                        ", ".join(sorted({s.model for s in left})))  # fmt: skip

    def close(self) -> None:
        """At the run's end: end what is left, stop the launching thread (its servers with it) and clean up."""
        for s in self.servers:
            s.close()
        if os.environ.get(ENV_DIR) == str(self.dir):
            del os.environ[ENV_DIR]
        self._done.set()
        shutil.rmtree(self.dir, ignore_errors=True)  # with any socket a slot left behind: nothing outlives the run


class AdoptedProcess:
    """A ``Popen``-like handle on a server another process started: it is watched through a pidfd (no pid reuse),
    and its exit status comes from the driver, which reaps it."""

    def __init__(self, pid: int, conn: socket.socket) -> None:
        self.pid = pid
        self.conn = conn
        self.fd = os.pidfd_open(pid)
        self.returncode: int | None = None

    def _exited(self, timeout_s: float | None) -> bool:
        r, _, _ = select.select([self.fd], [], [], timeout_s)
        return bool(r)

    def poll(self) -> int | None:
        if self.returncode is None and self._exited(0):
            self.returncode = self._status()
        return self.returncode

    def _status(self) -> int:
        """The exit status the driver sends once it reaped the server; -1 if it does not come (the driver gone)."""
        try:
            while True:
                line = _readline(self.conn, 5.0)
                if not line:
                    return -1
                msg = json.loads(line)
                if "exit" in msg:
                    return int(msg["exit"])
        except (OSError, ValueError):
            return -1

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not self._exited(timeout):
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0.0)
            self.returncode = self._status()
        return self.returncode

    def _signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                signal.pidfd_send_signal(self.fd, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def release(self) -> None:
        """Give the server back: the driver ends it if it still runs."""
        for closer in (self.conn.close, lambda: os.close(self.fd)):
            try:
                closer()
            except OSError:
                pass


def offered(model: str) -> bool:
    """Does this run's driver still offer a pre-started server for ``model`` (one not yet taken)?"""
    root = os.environ.get(ENV_DIR)
    return bool(root) and supported() and any(Path(root).glob(f"{_prefix(model)}-*.sock"))  # type: ignore[arg-type]


def claim(model: str, key: str, timeout_s: float) -> tuple[Handoff, AdoptedProcess] | None:
    """Take over a server this run's driver pre-started for ``model`` whose key is ``key``; None when there is none
    (no prestart in this process's run, all taken, or the one offered differs: then it is ended)."""
    root = os.environ.get(ENV_DIR)
    if not root or not supported():
        return None
    for path in sorted(Path(root).glob(f"{_prefix(model)}-*.sock"), key=lambda p: int(p.stem.rsplit("-", 1)[1])):
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(str(path))
            line = _readline(conn, timeout_s)  # the driver may still be launching it
        except OSError:  # taken (its socket gone or reset) or the driver gone: the next one
            conn.close()
            continue
        if not line:
            conn.close()
            continue
        info = Handoff(**json.loads(line))
        if info.key != key:
            why = f"a replica of {model} would launch another command or environment (key {key} != {info.key})"
            _send(conn, {"take": False, "why": why})
            conn.close()
            return None
        try:
            proc = AdoptedProcess(info.pid, conn)
        except OSError:  # it exited before the handoff
            conn.close()
            continue
        conn.sendall(f"{json.dumps({'take': True})}\n".encode())
        return info, proc
    return None
