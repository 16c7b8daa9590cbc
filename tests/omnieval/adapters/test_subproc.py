"""A framework task in a child process of its own interpreter: what it returns, how its bridge calls travel, and how
it fails. The driver's answers come from a stand-in for ``PoolBridge`` (the pool is tested elsewhere); the framework
in the child is real lm-eval."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from concurrent.futures import Future
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest
from testlib.runs import ROOT
from testlib.tiers import need

from omnieval.adapters import FrameworkResult
from omnieval.adapters._inline import InlineRunner, InlineTask
from omnieval.adapters._subproc import PipeBridge, drive, run_in_interpreter
from omnieval.core import GenerationOptions, OmnievalUserError, PoolConfig
from serving._types import GenerationRequest, GenerationResult

DATA = ROOT / "omnieval/benchmarks/data/lmeval/gsm8k_format_asdiv.jsonl"
TASK = {"task": "gsm8k", "options": {"num_fewshot": 0, "data_files": {"test": str(DATA)}}, "model": "m", "limit": 6,
        "generation": GenerationOptions(max_tokens=8)}  # fmt: skip


class AnswerBridge:
    """Answers each question from the data file, rightly when its answer is even, wrongly otherwise, and counts the
    calls (from whichever thread they come)."""

    def __init__(self) -> None:
        self.answers = {}
        for line in DATA.read_text().splitlines():
            row = json.loads(line)
            self.answers[row["question"]] = row["answer"].split("####")[-1].strip()
        self.calls = 0

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult | BaseException]:
        self.calls += 1
        out: list[GenerationResult | BaseException] = []
        for r in requests:
            a = self.answers[(r.prompt or "").rsplit("Question: ", 1)[-1].split("\n")[0]]
            text = f" #### {a}" if int(float(a)) % 2 == 0 else " #### 12345"
            out.append(GenerationResult(request_id=r.request_id, text=text, completion_tokens=2, replica_id="f/0"))
        return out


def test_a_task_in_its_own_process_returns_what_it_returns_in_the_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    """lm-eval's gsm8k in a child process of an interpreter (here the driver's own): the same requests reach the
    driver's bridge, and the same Records and scores come back as from the adapter run in the driver."""
    need("lm_eval")
    from omnieval.adapters._lmeval import LMEvalAdapter

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    here, there = AnswerBridge(), AnswerBridge()
    ours = LMEvalAdapter().run(bridge=here, **TASK)  # type: ignore[arg-type]
    theirs = run_in_interpreter(sys.executable, "lmeval", TASK, there, env={"HF_DATASETS_OFFLINE": "1"}, nice=0)
    assert isinstance(theirs, FrameworkResult) and there.calls == here.calls >= 1
    assert [(s.benchmark, s.metric, s.value) for s in theirs.scores] == [(s.benchmark, s.metric, s.value)
                                                                           for s in ours.scores]  # fmt: skip
    assert [r.prediction for r in theirs.records] == [r.prediction for r in ours.records]
    values = {s.metric: s.value for s in theirs.scores}
    assert 0 < values["exact_match/strict-match"] < 100  # the planted pattern: some right, some wrong


class SlowBridge:
    """Answers request ``i`` after ``(16 - i) * 10`` ms, so answers come back in reverse order; request 3 fails."""

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult | BaseException]:
        i = int(requests[0].request_id)
        time.sleep((16 - i) * 0.01)  # the order of answers is what this test is about
        if i == 3:
            raise ValueError("request 3 failed")
        return [GenerationResult(request_id=str(i), text=f"answer {i}", replica_id="f/0")]


def test_calls_from_many_threads_each_get_their_own_answer() -> None:
    """VLMEvalKit calls the bridge from many threads at once: each call is in flight together with the others and
    gets its own answer (or its own exception), whatever order the driver answers them in."""
    a, b = socket.socketpair()
    driver, child = Connection(a.detach()), Connection(b.detach())
    result: Future[FrameworkResult] = Future()

    def run_driver() -> None:
        try:
            result.set_result(drive(driver, SlowBridge(), ("lmeval", {}), lambda heard, why: RuntimeError(why)))
        except BaseException as e:  # noqa: BLE001 - the test reads it
            result.set_exception(e)

    threading.Thread(target=run_driver, daemon=True).start()
    assert child.recv() == ("run", "lmeval", {})
    bridge = PipeBridge(child)
    got: dict[int, Any] = {}

    def call(i: int) -> None:
        try:
            got[i] = bridge.generate([GenerationRequest(request_id=str(i), messages=[], prompt="q",
                                                              options=GenerationOptions())])[0].text
        except ValueError as e:
            got[i] = e

    threads = [threading.Thread(target=call, args=(i,)) for i in range(16)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert time.monotonic() - t0 < 16 * 8 * 0.01 / 2  # concurrent: far less than the sum of the 16 waits (1.36 s)
    assert {i: v for i, v in got.items() if i != 3} == {i: f"answer {i}" for i in range(16) if i != 3}
    assert isinstance(got[3], ValueError) and str(got[3]) == "request 3 failed"
    bridge.out.send(("done", FrameworkResult(benchmark="lmeval:x", records=[], scores=[])))
    assert result.result(timeout=10).benchmark == "lmeval:x"
    driver.close()  # the driver went away: a call fails instead of waiting forever (and the process lives on)
    with pytest.raises(OSError):
        bridge.generate([GenerationRequest(request_id="16", messages=[], prompt="q", options=GenerationOptions())])
    child.close()


def test_an_interpreter_that_cannot_import_omnieval_is_named_with_the_fix(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """An interpreter without omnieval says so over its socket (the import error, not a hang), and one that is not
    Python at all by its exit status; both name the venv script that rebuilds it."""
    monkeypatch.chdir(tmp_path)  # not the checkout: its omnieval/ must not be found from the working directory
    no_site = tmp_path / "no-site-python"
    no_site.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")  # stdlib only: omnieval is in site-packages
    not_python = tmp_path / "not-python"
    not_python.write_text("#!/bin/sh\necho 'not a python' >&2\nexit 3\n")
    for p in (no_site, not_python):
        p.chmod(0o755)
    with pytest.raises(OmnievalUserError) as e:
        run_in_interpreter(str(no_site), "lmms", TASK, AnswerBridge(), env={}, nice=0)
    assert (f"frameworks.lmms.python {no_site} cannot run omnieval's framework process "
            "(ModuleNotFoundError: No module named 'omnieval')") in str(e.value)  # fmt: skip
    assert "bash scripts/make_framework_venv.sh lmms" in str(e.value)
    with pytest.raises(OmnievalUserError, match=r"cannot run omnieval's framework process \(exited with status 3"):
        run_in_interpreter(str(not_python), "lmms", TASK, AnswerBridge(), env={}, nice=0)


class KillingBridge(AnswerBridge):
    """Kills the child process at its first request, as the system's OOM killer would."""

    def __init__(self) -> None:
        super().__init__()
        self.proc: Any = None

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult | BaseException]:
        self.proc.kill()
        self.proc.wait()
        return super().generate(requests)


def test_a_child_that_dies_mid_task_fails_its_task_not_the_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    need("lm_eval")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    bridge = KillingBridge()
    with pytest.raises(RuntimeError, match=r"the lmeval process \(.*\) was ended by signal 9"):
        run_in_interpreter(sys.executable, "lmeval", TASK, bridge, env={}, nice=0,
                           on_start=lambda p: setattr(bridge, "proc", p))  # fmt: skip


def test_an_abandoned_run_ends_its_framework_processes() -> None:
    """A run that fails (or is cancelled) while a framework's process works: the process is killed, and its task
    fails instead of waiting for a pool that never comes."""
    started = threading.Event()
    task = InlineTask(key="lmeval:gsm8k", model="m", framework="lmeval", task="gsm8k", options=TASK["options"],
                      limit=6, generation=GenerationOptions(), python=sys.executable)  # type: ignore[arg-type]
    runner = InlineRunner([task], pool_cfg=PoolConfig(), seed=0, cache_path=None, env={})
    procs: list[Any] = []
    orig = runner._started

    def seen(proc: Any) -> None:
        procs.append(proc)
        orig(proc)
        started.set()

    runner._started = seen  # type: ignore[method-assign]
    runner.start()
    assert started.wait(timeout=60)
    runner.abandon()
    with pytest.raises(RuntimeError, match="was ended by signal 9|the pool did not come up"):
        task.future.result(timeout=60)
    assert procs[0].wait(timeout=10) == -9


def test_first_calls_from_many_threads_build_one_pool_bridge(monkeypatch: pytest.MonkeyPatch) -> None:
    """A framework process's first calls arrive together, each answered on its own driver thread: they share one
    ``PoolBridge`` (one dispatcher, one event loop), not one each."""
    import omnieval.adapters._bridge as bridge_mod
    from omnieval.adapters._inline import _LazyBridge

    built: list[object] = []

    class CountingBridge:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            time.sleep(0.05)  # a real one starts an event loop and a dispatcher: long enough for the others to arrive
            built.append(self)

        def tokenize(self, texts: list[str]) -> list[list[int]]:
            return [[len(t)] for t in texts]

    monkeypatch.setattr(bridge_mod, "PoolBridge", CountingBridge)
    runner = InlineRunner([], pool_cfg=PoolConfig(), seed=0, cache_path=None, env={})
    runner.attach(controller=object())
    lazy = _LazyBridge(runner, "m", "k")
    threads = [threading.Thread(target=lazy.tokenize, args=(["abc"],)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(built) == 1 and lazy.tokenize(["ab"]) == [[2]]
