"""A server process owned by a replica: the engine's own OpenAI-compatible server (llama-server, the bench's instant
server), started, watched and stopped by the replica, and published to the pool as an ``Endpoint``.

Inside a Ray cluster the server listens on every interface behind a per-replica bearer token, so client actors on
other nodes reach it; clients on the same node use loopback (``Endpoint.url_for``). Outside Ray it binds loopback.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

import httpx

from omnieval.core import ReplicaDead
from serving._openai import OpenAIEngine
from serving._prestart import AdoptedProcess, Handoff, claim, server_key
from serving._types import Endpoint, GenerationRequest, GenerationResult


def free_port() -> int:
    """A loopback port nothing listens on now: the project's one way to pick a port for a server about to start."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ray_node_ip() -> str | None:
    """This Ray node's IP (what other nodes reach it at), or None outside a Ray worker or driver."""
    try:
        import ray

        if ray.is_initialized():
            return str(ray.util.get_node_ip_address())
    except Exception:  # noqa: BLE001 - no Ray, or not connected: serve on loopback only
        return None
    return None


def with_parent(cmd: Sequence[str], nice: int = 0) -> list[str]:
    """``cmd`` started so that it dies with this process (Linux: SIGTERM when the replica process dies, so a killed
    actor leaves no orphan engine) at niceness ``nice``.

    Ray starts workers at niceness 15; an engine is the workload, so it asks for normal priority (``nice`` 0) where
    allowed; a background server (the verifier's judge) asks for a higher niceness, so it yields the CPUs to engines.
    The work is done by ``serving/_with_parent.py`` before it ``exec``s the server (why not a ``preexec_fn``: there).
    """
    shim = str(Path(__file__).with_name("_with_parent.py"))
    return [sys.executable, "-I", "-S", shim, str(nice), str(os.getpid()), *cmd]


KEEP_FAILED = 32
"""Logs of servers that failed to start or died are kept for inspection, up to this many (the newest) per host."""

_owner: tuple[int, Path, int] | None = None
"""This process's pid, own log directory and the descriptor holding its lock (for the life of the process)."""


def log_dir() -> Path:
    """Root of every server log on this host, not loose in the system temp dir.

    ``owner-*/`` holds each live process's logs (removed at a clean stop, swept once that process is gone) and
    ``failed/`` the logs of servers that failed to start or died, kept until ``KEEP_FAILED`` newer ones replace them.
    """
    d = Path(tempfile.gettempdir()) / "omnieval-servers"
    d.mkdir(parents=True, exist_ok=True)
    return d


def failed_log_dir() -> Path:
    d = log_dir() / "failed"
    d.mkdir(exist_ok=True)
    return d


def owner_log_dir() -> Path:
    """This process's log directory, locked while it lives so a sweep removes it only once it is gone.

    A replica killed with its process (Serve restarts, ``ray stop``, a test's teardown) never stops its server
    cleanly: the server dies with it (``with_parent``) and its log would stay forever. The lock (``flock``,
    released by the kernel however the process ends) is what tells a later sweep that the owner is gone.
    """
    global _owner
    root = log_dir()
    if _owner is not None and _owner[0] == os.getpid() and _owner[1].parent == root and _owner[1].is_dir():
        return _owner[1]
    sweep_logs()
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
    fd = os.open(staging / ".lock", os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    d = root / f"owner-{os.getpid()}-{staging.name.removeprefix('.staging-')}"
    staging.rename(d)  # a sweep sees the directory only once it is locked
    _owner = (os.getpid(), d, fd)  # an earlier lock (another temp root, a forked parent's) stays held: live logs
    return d


def sweep_logs() -> list[Path]:
    """Remove the log directories whose owner process is gone (their lock is free); returns what it removed."""
    removed = []
    for d in sorted(log_dir().glob("owner-*")):
        if _owner is not None and d == _owner[1]:
            continue
        try:
            fd = os.open(d / ".lock", os.O_RDWR)
        except FileNotFoundError:  # swept by another process meanwhile
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # its owner is alive
            os.close(fd)
            continue
        shutil.rmtree(d, ignore_errors=True)
        os.close(fd)
        removed.append(d)
    return removed


def _prune_failed(keep: int = KEEP_FAILED) -> None:
    logs = []
    for p in failed_log_dir().glob("*.log"):
        try:
            logs.append((p.stat().st_mtime, p))
        except FileNotFoundError:  # pruned by another process meanwhile
            continue
    for _, p in sorted(logs, reverse=True)[keep:]:
        p.unlink(missing_ok=True)


def new_api_key() -> str:
    """A server's bearer key, passed as ``--api-key KEY``: hex, so it never begins with ``-``, which vLLM's and
    SGLang's argument parsers read as the next flag (``token_urlsafe`` did one start in 64: the server exited with
    "argument --api-key: expected at least one argument" and the replica was started again)."""
    return secrets.token_hex(24)


class ManagedServer:
    """One server subprocess: ``cmd`` gets ``{host}``, ``{port}`` and ``{api_key}`` filled in."""

    def __init__(self, name: str, cmd: Sequence[str], *, health_path: str = "/health", env: dict[str, str] | None = None,
                 bind_all: bool | None = None, nice: int = 0) -> None:  # fmt: skip
        self.name = name
        self.nice = nice
        self.cmd_template = list(cmd)
        self.health_path = health_path
        self.env = env
        self.node_ip = ray_node_ip()
        self.bind_all = (self.node_ip is not None) if bind_all is None else bind_all
        self.api_key = new_api_key() if self.bind_all else None
        self.port = 0
        self.proc: subprocess.Popen[bytes] | AdoptedProcess | None = None
        self.log_path: Path | None = None
        self.spawned_at: float | None = None
        """Unix time the server process was launched (by this process, or by the driver that pre-started it)."""
        self.adopted = False

    @property
    def prestart_key(self) -> str:
        """What a pre-started server must match to be taken over (``serving._prestart``)."""
        return server_key(self.cmd_template, self.env, self.nice)

    def adopt(self, info: Handoff, proc: AdoptedProcess) -> None:
        """Own a server the driver pre-started with this command (``serving._prestart.claim``). It listens on
        loopback without a key: the driver started it before Ray, on the node every replica of the run is on."""
        self.port, self.proc, self.log_path, self.spawned_at = info.port, proc, Path(info.log_path), info.spawned_at
        self.bind_all, self.api_key, self.adopted = False, None, True

    @property
    def local_url(self) -> str:
        """Root URL over loopback (the replica's own health checks and fallback path)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def public_url(self) -> str:
        """Root URL other nodes use."""
        host = self.node_ip if self.bind_all and self.node_ip else "127.0.0.1"
        return f"http://{host}:{self.port}"

    def command(self) -> list[str]:
        fill = {
            "host": "0.0.0.0" if self.bind_all else "127.0.0.1",
            "port": str(self.port),
            "api_key": self.api_key or "",
        }
        # whole-token placeholders only: an argument may itself be JSON (``--limit-mm-per-prompt {"image": 8}``)
        return [fill[part[1:-1]] if part[1:-1] in fill and part[0] + part[-1] == "{}" else part
                for part in self.cmd_template]  # fmt: skip

    def launch(self, api_key_flag: str | None = "--api-key") -> None:
        self.port = free_port()
        cmd = self.command()
        if self.api_key and api_key_flag:
            cmd += [api_key_flag, self.api_key]
        fd, log = tempfile.mkstemp(prefix=f"{self.name}-", suffix=".log", dir=owner_log_dir())
        self.log_path = Path(log)
        env = {**os.environ, **self.env} if self.env else None
        self.proc = subprocess.Popen(
            with_parent(cmd, self.nice), stdout=fd, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
        self.spawned_at = time.time()
        os.close(fd)

    async def wait_ready(self, timeout_s: float) -> None:
        """Until the health path answers 200; a process that exits first fails at once with its log's tail."""
        deadline = time.monotonic() + timeout_s
        async with httpx.AsyncClient(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if not self.alive():
                    assert self.proc is not None
                    raise ReplicaDead(f"{self.name} exited with {self.proc.returncode} at start: {self.failure_log()}")
                try:
                    r = await client.get(self.local_url + self.health_path)
                    if r.status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.2)  # waiting on an external process's port: no event to await
        raise ReplicaDead(f"{self.name} not ready after {timeout_s}s: {self.failure_log()}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def log_tail(self, n: int = 5) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return " | ".join(self.log_path.read_text(errors="replace").strip().splitlines()[-n:])

    def keep_log(self) -> Path | None:
        """Move the log to ``failed/``, out of reach of the clean-stop removal and of sweeps; where it now is."""
        if self.log_path is None or self.log_path.parent == failed_log_dir() or not self.log_path.exists():
            return self.log_path
        dest = failed_log_dir() / self.log_path.name
        try:
            os.replace(self.log_path, dest)  # same filesystem; a server still writing keeps writing to it
        except FileNotFoundError:  # a pre-started server's log has two keepers: the driver moved (or removed) it first
            self.log_path = dest if dest.exists() else None
            return self.log_path
        self.log_path = dest
        _prune_failed()
        return dest

    def failure_log(self) -> str:
        """The log's tail and where the whole of it is kept, for the error of a server that failed or died."""
        path = self.keep_log()
        where = f"; full log: {socket.gethostname()}:{path}" if path is not None else ""
        return f"{self.log_tail()}{where}"

    def stop(self) -> None:
        """Terminate (then kill) the process; the log is removed after a clean stop, kept in ``failed/`` after a
        crash."""
        crashed = self.proc is not None and self.proc.poll() not in (None, 0)
        if self.alive():
            assert self.proc is not None
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if isinstance(self.proc, AdoptedProcess):
            self.proc.release()
        self.proc = None
        if crashed:
            self.keep_log()
        elif self.log_path is not None and self.log_path.parent != failed_log_dir():
            self.log_path.unlink(missing_ok=True)


def cli_flags(args: dict[str, Any], *, negatable: bool) -> list[str]:
    """Engine options as server CLI flags (``max_model_len=2048`` → ``--max-model-len 2048``; dicts and lists as
    JSON). ``True`` is a bare switch; ``False`` is ``--no-<flag>`` where the server's booleans are negatable (vLLM),
    else omitted (SGLang's store-true switches)."""
    out: list[str] = []
    for k, v in args.items():
        flag = "--" + k.replace("_", "-")
        if v is True:
            out.append(flag)
        elif v is False:
            if negatable:
                out.append("--no-" + k.replace("_", "-"))
        else:
            out += [flag, json.dumps(v) if isinstance(v, (dict, list)) else str(v)]
    return out


def parse_prometheus(text: str) -> dict[str, float]:
    """Samples of a Prometheus text exposition by metric name, summed over labels (llama-server's and vLLM's
    ``/metrics``)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, value = line.rpartition("}") if "}" in line else line.partition(" ")
        name = head.split("{", 1)[0].strip()
        try:
            out[name] = out.get(name, 0.0) + float(value.split()[0])
        except (ValueError, IndexError):
            continue
    return out


class OwnsServer:
    """What a replica reports of the server process it owns (``ServerEngine``, ``serving._process_engine``)."""

    _server: ManagedServer | None

    @property
    def pid(self) -> int | None:
        return self._server.pid if self._server is not None else None

    @property
    def spawned_at(self) -> float | None:
        return self._server.spawned_at if self._server is not None else None

    @property
    def prestarted(self) -> bool:
        return self._server is not None and self._server.adopted

    def log_tail(self, n: int = 5) -> str:
        return self._server.log_tail(n) if self._server is not None else ""

    def log_location(self) -> str | None:
        if self._server is None or self._server.log_path is None:
            return None
        return f"{socket.gethostname()}:{self._server.log_path}"

    def server_alive(self) -> bool:
        """The process runs; a dead one's log is kept (``failed/``): it says why it died under a live replica."""
        if self._server is None:
            return False
        if not self._server.alive():
            self._server.keep_log()
            return False
        return True


class ServerEngine(OwnsServer, OpenAIEngine):
    """An engine whose replica runs the engine's own OpenAI-compatible server: the replica owns the process (start,
    health, restart by Serve, shutdown) and publishes its ``Endpoint``; clients send requests to it directly."""

    score_dialect: ClassVar[Literal["vllm", "llamacpp", "sglang"] | None] = None
    """How the server scores log-likelihoods (``serving._scoring``); None: it cannot."""
    cpu_bound: ClassVar[bool] = True  # its server computes here, unlike a remote OpenAI endpoint's
    prestartable: ClassVar[bool] = True
    """The driver may start this engine's server before Ray for a replica to take over (``serving._prestart``):
    its command depends only on the engine's arguments and the node, not on the replica's Ray worker."""

    @classmethod
    def scoring(cls, kwargs: dict[str, Any]) -> str | None:
        return cls.score_dialect

    def __init__(self, *, replica_id: str, model: str, **kwargs: Any) -> None:
        super().__init__(replica_id=replica_id, model=model, base_url="http://127.0.0.1:0/v1", **kwargs)
        self.scoring_dialect = self.score_dialect
        self._server: ManagedServer | None = None
        self.startup_timeout_s = 180.0

    def server_command(self) -> list[str]:
        """The server's argv, with ``{host}`` and ``{port}`` placeholders."""
        raise NotImplementedError

    def server_env(self) -> dict[str, str] | None:
        return None

    def server_nice(self) -> int:
        """Niceness of the server process (0: an engine is the workload)."""
        return 0

    async def prepare(self) -> None:
        """What must be known before the server's command (its binary, checkpoint, checked arguments): the part of
        ``start`` a pre-starting driver runs too."""

    def new_server(self, bind_all: bool | None = None) -> ManagedServer:
        return ManagedServer(f"{self.name}-{self._stats.replica_id}", self.server_command(), env=self.server_env(),
                             nice=self.server_nice(), bind_all=bind_all)  # fmt: skip

    async def prestart(self) -> ManagedServer:
        """The driver's launch of this engine's server, for a replica to take over (``serving._prestart``): on
        loopback without a key, whether or not Ray is up by now (every replica of the run is on this node)."""
        await self.prepare()
        server = self.new_server(bind_all=False)
        server.launch()
        return server

    async def start(self) -> None:
        """``prepare``, then take over the server the driver pre-started with the same command, or launch it."""
        await self.prepare()
        self._server = self.new_server()
        got = None
        if self.prestartable:
            got = await asyncio.to_thread(claim, self._stats.model, self._server.prestart_key, self.startup_timeout_s)
        if got is not None:
            self._server.adopt(*got)
        else:
            self._server.launch()
        self.base_url = self._server.local_url + "/v1"
        self._api_key = self._server.api_key or ""
        await self._server.wait_ready(self.startup_timeout_s)
        await super().start()

    def endpoint(self) -> Endpoint | None:
        if self._server is None:
            return None
        return Endpoint(base_url=self._server.public_url + "/v1", served_model_name=self.served_model_name,
                        api_key=self._server.api_key, node_ip=self._server.node_ip, dialect=self.dialect,
                        scoring=self.scoring_dialect)  # fmt: skip

    async def server_metrics(self) -> dict[str, float]:
        """The server's Prometheus ``/metrics`` by name (empty when it has none or does not answer)."""
        if self._client is None:
            return {}
        try:
            r = await self._client.get(self.base_url.removesuffix("/v1") + "/metrics", timeout=5.0)
            return parse_prometheus(r.text) if r.status_code == 200 else {}
        except (OSError, ValueError, httpx.HTTPError):
            return {}

    async def check_health(self) -> bool:
        return self.server_alive() and await super().check_health()

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        if self._server is not None and not self._server.alive():
            assert self._server.proc is not None
            raise ReplicaDead(f"{self.name} server exited with {self._server.proc.returncode}: "
                              f"{self._server.failure_log()}", replica_id=self._stats.replica_id)  # fmt: skip
        return await super().generate(request)

    async def shutdown(self) -> None:
        await super().shutdown()
        if self._server is not None:
            self._server.stop()
        self._server = None
