"""Conventional evaluation as users run it today: each framework in its own process, with its own in-process model.

This is the paper's Table 7 baseline ("each framework runs inference from within its own process"), timed the way a
user experiences it — process start, imports, model loading and data preparation included:

* ``lmeval`` — ``lm_eval.simple_evaluate`` with one of lm-eval's own model backends (``hf``, ``hf-multimodal``,
  ``vllm``…), built by its registry from ``pretrained=...``; the task is the suite's (same offline ``data_files``
  override as the lm-eval adapter);
* ``lmms`` — ``lmms_eval`` with one of its own model classes (``huggingface``…) on the suite's task;
* ``builtin`` — a built-in benchmark's Records (built exactly as ``run_suite`` builds them) through an in-process
  engine (``serving``'s ``transformers`` engine, no server), one request at a time through ``model.generate``
  (``batching: static``, batch 1), as an eval loop would.

Each job is a subprocess ``python -m omnieval.perf._conventional JOB RESULT`` in the framework's own interpreter
(framework venvs keep their pins). ``sequential`` runs the jobs one after another with every core, as a script
would; ``concurrent`` starts them together, each pinned to its share of the cores (``sched_setaffinity``, torch
threads = its cores). Every worker stamps wall-clock times (process start, model loaded, inference start/end) so
the driver can report end-to-end and inference-only walls.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

T_START = time.time()  # before the heavy imports: a conventional run pays for them

Runner = Literal["lmeval", "lmms", "builtin"]


class ConventionalJob(BaseModel):
    """How one suite benchmark is evaluated conventionally (``bench_federated.yaml``'s ``conventional`` list)."""

    model_config = ConfigDict(extra="forbid")
    benchmark: str
    """The suite benchmark's name (its ``key`` when a benchmark is listed twice)."""
    runner: Runner
    """``lmeval`` / ``lmms``: the framework with its own model class; ``builtin``: an in-process omnieval engine."""
    model_class: str
    """lm-eval / lmms-eval model name (``hf``, ``hf-multimodal``, ``huggingface``…) or, for ``builtin``, the engine."""
    pretrained: str
    """Checkpoint directory the framework loads (``~`` expanded) — the same weights the pool's replica serves."""
    python: str | None = None
    """Interpreter with the framework and torch (a framework venv); None: this one."""
    model_args: dict[str, Any] = {}
    """Extra model arguments (lm-eval/lmms-eval ``model_args``; engine options for ``builtin``)."""
    video_input: Literal["native", "frames"] = "frames"
    """``builtin`` only: how clips reach the engine (an image model takes sampled frames, as in the pool)."""


def plan_jobs(jobs: list[ConventionalJob], suite_path: Path, *, cpus: int, concurrent: bool) -> list[dict[str, Any]]:
    """Worker job dicts: all cores each (sequential) or a disjoint share each (concurrent)."""
    from omnieval._suite import load_suite

    suite = load_suite(suite_path)
    by_key = {b.key: b for b in suite.benchmarks} | {b.name: b for b in suite.benchmarks}
    out = []
    for i, j in enumerate(jobs):
        if j.benchmark not in by_key:
            raise ValueError(f"conventional[{i}].benchmark: {j.benchmark!r} is not in {suite_path} "
                             f"({sorted(b.key for b in suite.benchmarks)})")  # fmt: skip
        b = by_key[j.benchmark]
        if concurrent and len(jobs) >= cpus:
            cores = [i % cpus]
        elif concurrent:
            share = cpus // len(jobs)
            cores = list(range(i * share, (i + 1) * share))
        else:
            cores = list(range(cpus))
        out.append({
            **j.model_dump(), "suite": str(suite_path), "task": b.name, "options": b.options, "limit": b.limit,
            "generation": {**suite.generation.model_dump(mode="json"), **b.generation.as_dict()}, "key": b.key,
            "framework": b.framework, "cores": cores, "pin": concurrent,
        })  # fmt: skip
    return out


NEEDS: dict[str, tuple[str, ...]] = {"lmeval": ("lm_eval", "omnieval"), "lmms": ("lmms_eval", "lm_eval", "omnieval"),
                                     "builtin": ("torch", "transformers", "omnieval")}  # fmt: skip
"""What each runner imports in its job's interpreter (lmms-eval's tasks import lm-eval's)."""


def interpreter(python: str | None) -> str:
    """The interpreter a job runs in: its ``python`` (``~`` expanded), else this one."""
    return os.path.expanduser(python) if python else sys.executable


_FIND = "import importlib.util, sys\nprint(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"


def check_interpreters(jobs: list[ConventionalJob], where: str) -> None:
    """Before any mode runs: every job's interpreter finds what its runner imports (found, not imported: fast).

    A framework venv reaches the main venv's packages through a path file that follows the checkout that last built
    it (``scripts/make_framework_venv.sh``); from another checkout the job would die minutes into the bench on an
    import. Raises ``OmnievalUserError`` naming each job, its interpreter, what is missing and the fix."""
    from concurrent.futures import ThreadPoolExecutor

    from omnieval.core import OmnievalUserError

    by_py: dict[str, set[str]] = {}
    for j in jobs:
        by_py.setdefault(interpreter(j.python), set()).update(NEEDS[j.runner])

    def missing(item: tuple[str, set[str]]) -> tuple[str, set[str] | str]:
        py, mods = item
        try:
            proc = subprocess.run([py, "-c", _FIND, *sorted(mods)], capture_output=True, text=True, timeout=120)
        except OSError as e:
            return py, f"cannot run: {e}"
        if proc.returncode != 0:
            return py, f"exited {proc.returncode}: {proc.stderr.strip().splitlines()[-1:] or ''}"
        return py, set(proc.stdout.split())

    with ThreadPoolExecutor(max_workers=max(1, len(by_py))) as pool:
        found = dict(pool.map(missing, by_py.items()))
    errors = []
    for i, j in enumerate(jobs):
        py = interpreter(j.python)
        gone = found[py]
        lacks = gone if isinstance(gone, str) else ", ".join(sorted(gone & set(NEEDS[j.runner])))
        if lacks:
            venv = re.search(r"venv-([a-z]+)-", py)
            fix = (f"scripts/make_framework_venv.sh {venv.group(1)} (builds the venv, or relinks it to this checkout)"
                   if venv else "make setup" if not j.python else f"pip install {lacks} with that interpreter")  # fmt: skip
            errors.append(f"{where}: conventional[{i}] ({j.benchmark}, {j.runner}) runs in {py}, which lacks "
                          f"{lacks}; fix: {fix}")  # fmt: skip
    if errors:
        raise OmnievalUserError("\n".join(errors))


def run_jobs(jobs: list[dict[str, Any]], *, concurrent: bool, log: Any = print) -> dict[str, Any]:
    """Run the workers (one after another, or all at once); walls from the first spawn to the last exit, and each
    job's CPU seconds (``cpu_s``: on a CPU-bound node the work a run does bounds its wall, so the bench compares the
    CPU each side spends, not only its time)."""
    results: list[dict[str, Any]] = []
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="omnieval-bench-conv-") as scratch:
        tmp = Path(scratch)

        def spawn(i: int, job: dict[str, Any]) -> tuple[subprocess.Popen[bytes], Path, float]:
            jp, rp = tmp / f"job{i}.json", tmp / f"result{i}.json"
            jp.write_text(json.dumps(job))
            py = interpreter(job.get("python"))
            env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                   "OMP_NUM_THREADS": str(len(job["cores"]))}  # fmt: skip
            with open(tmp / f"log{i}.txt", "wb") as err:  # the child keeps its own copy of the handle
                p = subprocess.Popen([py, "-m", "omnieval.perf._conventional", str(jp), str(rp)], env=env,
                                     stdout=subprocess.DEVNULL, stderr=err)  # fmt: skip
            return p, rp, time.time()

        def collect(i: int, p: subprocess.Popen[bytes], rp: Path, t_spawn: float, t_exit: float) -> None:
            if p.returncode != 0:
                tail = (tmp / f"log{i}.txt").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"conventional job {jobs[i]['benchmark']} ({jobs[i]['runner']}) exited "
                                   f"{p.returncode}:\n{tail}")  # fmt: skip
            r = json.loads(rp.read_text())
            r.update(t_spawn=t_spawn, t_exit=t_exit, e2e_s=t_exit - t_spawn, cpu_s=cpu.get(i))
            results.append(r)
            log(f"      {r['benchmark']} ({r['runner']} {r['model_class']}): {r['e2e_s']:.1f} s end to end, "
                f"{r['inference_s']:.1f} s inference, {r['output_tokens']} output tokens")  # fmt: skip

        cpu: dict[int, float] = {}

        def reap(i: int, p: subprocess.Popen[bytes]) -> None:
            """Wait for the job and keep the CPU seconds it and its reaped children used (the kernel's rusage)."""
            if hasattr(os, "wait4"):
                _, status, ru = os.wait4(p.pid, 0)
                p.returncode = os.waitstatus_to_exitcode(status)
                cpu[i] = ru.ru_utime + ru.ru_stime
            else:
                p.wait()

        if concurrent:  # each exit stamped as it happens (a waiter thread per process), not in spawn order
            procs = [spawn(i, j) for i, j in enumerate(jobs)]
            exits: dict[int, float] = {}

            def wait(i: int, p: subprocess.Popen[bytes]) -> None:
                reap(i, p)
                exits[i] = time.time()

            waiters = [threading.Thread(target=wait, args=(i, p)) for i, (p, _, _) in enumerate(procs)]
            for w in waiters:
                w.start()
            for w in waiters:
                w.join()
            for i, (p, rp, ts) in enumerate(procs):
                collect(i, p, rp, ts, exits[i])
        else:
            for i, j in enumerate(jobs):
                p, rp, ts = spawn(i, j)
                reap(i, p)
                collect(i, p, rp, ts, time.time())
    t_end = max(r["t_exit"] for r in results)
    windows = sorted((r["t_inf0"], r["t_inf1"]) for r in results)
    return {"e2e_s": t_end - t0, "inference_s": _union(windows), "jobs": results}


def _union(windows: list[tuple[float, float]]) -> float:
    """Seconds covered by at least one interval (sequential jobs: the sum; concurrent: overlaps counted once)."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(windows):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


# ---- worker side (runs in the framework's interpreter) ---------------------------------------------------------


def _pin(job: dict[str, Any]) -> None:
    if job["pin"] and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(job["cores"]))


def _torch_threads(n: int) -> None:
    import torch

    torch.set_num_threads(n)


def _max_tokens(job: dict[str, Any]) -> int:
    return int(job["generation"].get("max_tokens") or 256)


def _lmeval(job: dict[str, Any]) -> dict[str, Any]:
    import lm_eval
    from lm_eval.api.registry import get_model

    from omnieval.adapters._lmeval_tasks import evaluate_kwargs, resolve_task, task_manager, task_spec

    _torch_threads(len(job["cores"]))
    args = {"pretrained": os.path.expanduser(job["pretrained"]), "dtype": "bfloat16", "device": "cpu",
            "batch_size": 1, **job["model_args"]}  # fmt: skip
    lm = get_model(job["model_class"]).create_from_arg_string(",".join(f"{k}={v}" for k, v in args.items()))
    t_loaded = time.time()
    opts = job["options"]
    resolved = resolve_task(job["task"], opts)
    tm = task_manager(resolved, opts)
    cfg = task_spec(resolved, tm, opts)
    t_inf0 = time.time()
    kwargs = evaluate_kwargs(opts, job["limit"])
    kwargs["gen_kwargs"] = f"max_gen_toks={_max_tokens(job)},do_sample=False,temperature=0"
    res = lm_eval.simple_evaluate(model=lm, tasks=[cfg], task_manager=tm, **kwargs)
    t_inf1 = time.time()
    name = next(iter(res["results"]))
    preds = {str(s["doc_id"]): s["resps"][0][0] for s in res["samples"][name]}
    tok = lm.tokenizer
    return _out(job, t_loaded, t_inf0, t_inf1, preds, lambda t: len(tok(t, add_special_tokens=False)["input_ids"]))


def _lmms(job: dict[str, Any]) -> dict[str, Any]:
    from lmms_eval.evaluator import simple_evaluate
    from lmms_eval.models import get_model

    from omnieval.adapters._lmms import evaluate_kwargs, task_manager

    _torch_threads(len(job["cores"]))
    cls = get_model(job["model_class"])
    _compat_auto_model(sys.modules[cls.__module__])
    lm = cls.create_from_arg_string(
        ",".join(f"{k}={v}" for k, v in {"pretrained": os.path.expanduser(job["pretrained"]), **job["model_args"]}.items()),
        {"batch_size": 1, "device": "cpu"},
    )  # fmt: skip
    _compat_processor(lm)
    t_loaded = time.time()
    opts = job["options"]
    with tempfile.TemporaryDirectory(prefix="omnieval-conv-lmms-") as scratch:
        tm, name = task_manager(job["task"], opts, Path(scratch))
        t_inf0 = time.time()
        res = simple_evaluate(model=lm, tasks=[name], task_manager=tm, **evaluate_kwargs(opts, job["limit"]))
        t_inf1 = time.time()
    preds = {str(s["doc_id"]): _first_text(s["resps"]) for s in res["samples"][name]}
    proc = getattr(lm, "processor", None)
    tok = getattr(proc, "tokenizer", None) or lm.tokenizer
    return _out(job, t_loaded, t_inf0, t_inf1, preds, lambda t: len(tok(t, add_special_tokens=False)["input_ids"]))


def _first_text(resps: Any) -> str:
    while isinstance(resps, list | tuple) and resps:
        resps = resps[0]
    return str(getattr(resps, "text", resps))


def _compat_auto_model(module: Any) -> None:
    """lmms-eval 0.7.3's generic ``huggingface`` class picks its auto class by testing ``config.model_type`` (a
    string) against ``_model_mapping.keys()``, which transformers >= 5 keys by config class: every checkpoint falls
    through to ``AutoModel`` (no ``generate``). Give it the auto class transformers' own mapping names."""
    import transformers

    if not hasattr(module, "AutoModel"):
        return

    class _AutoModel:
        @staticmethod
        def from_pretrained(path: str, **kw: Any) -> Any:
            cfg = transformers.AutoConfig.from_pretrained(path, trust_remote_code=kw.get("trust_remote_code", False))
            for auto in (transformers.AutoModelForImageTextToText, transformers.AutoModelForCausalLM):
                if type(cfg) in auto._model_mapping:
                    return auto.from_pretrained(path, **kw)
            return transformers.AutoModel.from_pretrained(path, **kw)

    module.AutoModel = _AutoModel


def _compat_processor(lm: Any) -> None:
    """lmms-eval 0.7.3's generic ``huggingface`` class calls the processor with ``audios=`` (always, even empty),
    which transformers >= 5 rejects ("use `audio` instead"); rename it — the only change to lmms-eval's own path."""
    proc = getattr(lm, "processor", None)
    if proc is None:
        return
    inner = proc

    class _Processor:
        def __getattr__(self, name: str) -> Any:
            return getattr(inner, name)

        def __call__(self, *args: Any, **kw: Any) -> Any:
            audios = kw.pop("audios", None)
            if audios:
                kw["audio"] = audios
            for k in ("images", "videos"):
                if k in kw and not kw[k]:
                    kw.pop(k)
            return inner(*args, **kw)

    lm.processor = _Processor()


def _builtin(job: dict[str, Any]) -> dict[str, Any]:
    from omnieval._plan import build_records
    from omnieval._suite import load_suite
    from serving import ENGINES, GenerationRequest, to_openai

    suite = load_suite(job["suite"])
    sub = suite.model_copy(update={"benchmarks": [b.model_copy(update={"limit": job["limit"]})
                                                  for b in suite.benchmarks if b.key == job["key"]]})  # fmt: skip
    records, _ = build_records(sub)
    first_model = records[0].model if records else None  # the conventional process evaluates one model
    recs = [r for r in records if r.model == first_model]
    engine_cls: Any = ENGINES.get(job["model_class"])
    loop = {"batching": "static"} if job["model_class"] == "transformers" else {}  # model.generate, as scripts do
    engine = engine_cls(replica_id=f"conventional-{job['benchmark']}", model="conventional",
                        model_path=os.path.expanduser(job["pretrained"]),
                        **{"threads": len(job["cores"]), "max_batch_size": 1, **loop, **job["model_args"]})  # fmt: skip

    async def go() -> tuple[float, float, float, dict[str, str | None], int]:
        await engine.start()
        t_loaded = time.time()
        preds: dict[str, str | None] = {}
        tokens = 0
        t_inf0 = time.time()
        try:
            for r in recs:  # one request at a time: the eval loop of a script over an in-process model
                req = GenerationRequest(request_id=f"{r.benchmark}/{r.index}", messages=to_openai(r.messages, video_input=job["video_input"]),
                                        options=r.generation_options)  # fmt: skip
                try:
                    res = await engine.generate(req)
                except Exception:  # noqa: BLE001 - a failed sample is counted (None), as the pool records it
                    preds[str(r.index)] = None
                    continue
                tokens += res.completion_tokens
                preds[str(r.index)] = res.text
            t_inf1 = time.time()
        finally:
            await engine.shutdown()
        return t_loaded, t_inf0, t_inf1, preds, tokens

    t_loaded, t_inf0, t_inf1, preds, tokens = asyncio.run(go())
    return _out(job, t_loaded, t_inf0, t_inf1, preds, None, tokens=tokens)


def _out(job: dict[str, Any], t_loaded: float, t_inf0: float, t_inf1: float, preds: Mapping[str, str | None],
         count: Any, *, tokens: int | None = None) -> dict[str, Any]:  # fmt: skip
    if tokens is None:
        tokens = sum(count(p) for p in preds.values() if p)
    return {
        "benchmark": job["benchmark"], "runner": job["runner"], "model_class": job["model_class"], "cores": job["cores"],
        "t_start": T_START, "t_loaded": t_loaded, "t_inf0": t_inf0, "t_inf1": t_inf1, "load_s": t_loaded - T_START,
        "inference_s": t_inf1 - t_inf0, "records": len(preds), "errors": sum(1 for p in preds.values() if p is None),
        "output_tokens": tokens, "predictions": preds,
    }  # fmt: skip


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[0]).read_text())
    _pin(job)
    run = {"lmeval": _lmeval, "lmms": _lmms, "builtin": _builtin}[job["runner"]]
    out = run(job)
    out["t_end"] = time.time()
    Path(argv[1]).write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
