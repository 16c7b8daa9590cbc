"""A framework task in its own interpreter (``frameworks.<name>.python``), as a child process of the driver started
before Ray.

Why: a framework actor can start only once Ray and the pool controller are up, and then spends seconds on a Ray
worker's start and on importing its framework (lmms-eval: ~7 s) before its first request. A child process of that
interpreter starts with the run, so the import, the task index and the request building overlap Ray's start and the
engines' load, as the driver-thread path (``_inline``) does for frameworks in the driver's own environment. The
child needs neither Ray nor the pool: its bridge calls (``generate``, ``score``, ``tokenize``, ``prefix_token_id``)
travel over a socket pair to the driver, which answers each through the pool on a thread of its own (VLMEvalKit
calls from many threads at once). The child's output goes to the driver's stderr (``ray job logs``); it dies with
its driver thread (Linux: ``PR_SET_PDEATHSIG``), and a run that fails or is cancelled ends it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from multiprocessing.connection import Connection
from typing import Any

from omnieval.adapters._base import FrameworkResult
from omnieval.core import OmnievalUserError

BOOT = """\
import os, sys
fd, parent, nice = int(os.environ.pop("OMNIEVAL_FW_FD")), int(os.environ.pop("OMNIEVAL_FW_PARENT")), int(os.environ.pop("OMNIEVAL_FW_NICE"))
if sys.platform.startswith("linux"):
    import ctypes
    ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL: gone with the driver thread that started it
    if os.getppid() != parent:
        os._exit(1)
if hasattr(os, "setpriority"):  # at least that niceness, before any thread starts: the framework's threads inherit it
    os.setpriority(os.PRIO_PROCESS, 0, max(nice, os.getpriority(os.PRIO_PROCESS, 0)))
from multiprocessing.connection import Connection
conn = Connection(fd)
try:
    from omnieval.adapters._subproc import serve
except BaseException:
    import traceback
    conn.send(("broken", traceback.format_exc(limit=2).strip().splitlines()[-1]))
    sys.exit(1)
serve(conn)
"""
"""Stdlib only until omnieval imports: an interpreter that cannot import it says why over the socket."""


def broken_interpreter(framework: str, python: str, problem: str) -> OmnievalUserError:
    return OmnievalUserError(
        f"frameworks.{framework}.python {python} cannot run omnieval's framework process ({problem}); rebuild that "
        f"venv with bash scripts/make_framework_venv.sh {framework} (it links the driver's omnieval into it: a moved "
        "or deleted checkout breaks the link), or install omnieval there"
    )


class _Sender:
    """One ``Connection`` written by several threads: one message at a time."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.lock = threading.Lock()

    def send(self, msg: tuple[Any, ...]) -> None:
        with self.lock:
            self.conn.send(msg)


def portable(e: BaseException) -> BaseException:
    """``e`` if it survives pickling both ways (the other side must be able to read it, or the message is lost),
    else a ``RuntimeError`` that says what it was."""
    import pickle

    try:
        pickle.loads(pickle.dumps(e))
    except Exception:  # noqa: BLE001 - any failure means: send its description instead
        return RuntimeError(f"{type(e).__name__}: {e}")
    return e


def run_in_interpreter(python: str, framework: str, kwargs: dict[str, Any], bridge: Any, *, env: dict[str, str],
                       nice: int, on_start: Callable[[subprocess.Popen[bytes]], None] | None = None) -> FrameworkResult:  # fmt: skip
    """Run ``ADAPTERS[framework]().run(**kwargs, bridge=...)`` in ``python``, answering its bridge calls with
    ``bridge`` (the driver's ``_LazyBridge``). ``on_start(proc)`` is told the child process, so a failed run can end
    it. Blocks until the child returns its result; its exception (or its death) is raised here."""
    from omnieval.adapters import ADAPTERS

    target = ADAPTERS.target(framework)  # the "module:object" string: a framework registered at run time resolves too
    ours, theirs = socket.socketpair()
    child_env = {**os.environ, **env, "OMNIEVAL_FW_FD": str(theirs.fileno()), "OMNIEVAL_FW_PARENT": str(os.getpid()),
                 "OMNIEVAL_FW_NICE": str(nice)}  # fmt: skip
    try:
        proc = subprocess.Popen([python, "-c", BOOT], env=child_env, pass_fds=[theirs.fileno()],
                                stdin=subprocess.DEVNULL, stdout=2)  # fmt: skip
    except OSError as e:
        ours.close()
        raise broken_interpreter(framework, python, f"{type(e).__name__}: {e}") from None
    finally:
        theirs.close()
    if on_start is not None:
        on_start(proc)

    def failed(heard: bool, problem: str | None) -> BaseException:
        if problem is not None:  # it said why it cannot import omnieval
            return broken_interpreter(framework, python, problem)
        rc = proc.wait()
        if rc < 0:  # killed: the run's own failure or cancellation ended it, or the system did
            return RuntimeError(f"the {framework} process ({python}) was ended by signal {-rc}")
        what = f"exited with status {rc}; its output is above in this run's log"
        if not heard:  # it never reached omnieval: the interpreter itself is the problem
            return broken_interpreter(framework, python, what)
        return RuntimeError(f"the {framework} process ({python}) {what}")

    conn = Connection(ours.detach())
    try:
        return drive(conn, bridge, (target if isinstance(target, str) else framework, kwargs), failed)
    finally:
        conn.close()
        try:
            proc.wait(timeout=30)  # it exits once its result is sent
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def drive(conn: Connection, bridge: Any, job: tuple[str, dict[str, Any]],
          failed: Callable[[bool, str | None], BaseException]) -> FrameworkResult:  # fmt: skip
    """The driver's side of one task: send it, answer each bridge call on a thread of its own, return the result.
    ``failed(heard, problem)`` is the error when the child goes away (``heard``: after omnieval imported there) or
    says it cannot import omnieval (``problem``)."""
    out = _Sender(conn)
    heard = False
    try:
        out.send(("run", *job))
    except OSError:
        raise failed(False, None) from None
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            raise failed(heard, None) from None
        kind = msg[0]
        if kind == "ready":
            heard = True
        elif kind == "call":
            threading.Thread(target=_answer, args=(out, bridge, *msg[1:]), daemon=True,
                             name="omnieval-framework-call").start()  # fmt: skip
        elif kind == "done":
            result: FrameworkResult = msg[1]
            return result
        elif kind == "raise":
            raise msg[1]
        elif kind == "broken":
            raise failed(False, str(msg[1]))
        else:
            raise RuntimeError(f"a framework process sent an unknown message {kind!r}")


def _answer(out: _Sender, bridge: Any, cid: int, method: str, args: tuple[Any, ...]) -> None:
    try:
        msg: tuple[Any, ...] = ("ret", cid, True, getattr(bridge, method)(*args))
    except BaseException as e:  # noqa: BLE001 - the child's caller raises it, as the in-process bridge would
        msg = ("ret", cid, False, portable(e))
    try:
        out.send(msg)
    except OSError:
        pass  # the child is gone; the driver's loop reports it


class PipeBridge:
    """The child's bridge: each call goes to the driver and waits for its answer; calls from several threads are in
    flight together, matched to their answers by number."""

    def __init__(self, conn: Connection) -> None:
        self.out = _Sender(conn)
        self.conn = conn
        self._next = 0
        self._lock = threading.Lock()
        self._waiting: dict[int, Future[Any]] = {}
        self._lost = False
        threading.Thread(target=self._read, daemon=True, name="omnieval-pipe-bridge").start()

    def _read(self) -> None:
        while True:
            try:
                kind, cid, ok, value = self.conn.recv()
            except (EOFError, OSError):  # the driver is gone: every call waiting, and any later, fails
                with self._lock:
                    self._lost = True
                    waiting, self._waiting = self._waiting, {}
                for fut in waiting.values():
                    fut.set_exception(ConnectionError("the omnieval driver of this framework process is gone"))
                return
            with self._lock:
                fut = self._waiting.pop(cid)
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value)

    def _call(self, method: str, *args: Any) -> Any:
        fut: Future[Any] = Future()
        with self._lock:
            if self._lost:
                raise ConnectionError("the omnieval driver of this framework process is gone")
            cid = self._next
            self._next += 1
            self._waiting[cid] = fut
        self.out.send(("call", cid, method, args))
        return fut.result()

    def generate(self, requests: list[Any]) -> list[Any]:
        return self._call("generate", requests)  # type: ignore[no-any-return]

    def score(self, requests: list[Any]) -> list[Any]:
        return self._call("score", requests)  # type: ignore[no-any-return]

    def tokenize(self, texts: list[str]) -> list[Any]:
        return self._call("tokenize", texts)  # type: ignore[no-any-return]

    def prefix_token_id(self) -> int | None:
        return self._call("prefix_token_id")  # type: ignore[no-any-return]

    def close(self) -> None:
        pass  # the driver's bridge is closed by the driver


def serve(conn: Connection) -> None:
    """The child's side: one task, then exit."""
    from omnieval.adapters import ADAPTERS
    from omnieval.core import import_target

    kind, target, kwargs = conn.recv()
    bridge = PipeBridge(conn)
    bridge.out.send(("ready",))  # omnieval imported: from here on, a failure is the task's, not the interpreter's
    try:
        adapter = import_target(target) if ":" in target else ADAPTERS.get(target)
        res = adapter().run(bridge=bridge, **kwargs)
        msg: tuple[Any, ...] = ("done", res.model_copy(update={"finished_at": time.time()}))
    except BaseException as e:  # noqa: BLE001 - the driver makes it the task's error row
        msg = ("raise", portable(e))
    try:
        bridge.out.send(msg)
    except OSError:
        pass  # the driver is gone: nothing reads the result
    conn.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # a framework's non-daemon threads (datasets, tqdm monitors) must not keep the task's process alive
