"""Framework tasks (lm-eval, lmms-eval, VLMEvalKit) inside a run: in the driver's interpreter on a thread, in a child
process of their own interpreter when the driver's node has it, or else in a framework client actor on a node that
has it; each result persisted whole as it arrives, a task that raised turned into its benchmark's error row."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray

from omnieval._artifacts import BenchmarkProvenance, ScoreRow
from omnieval._artifacts import framework_result_path as _fw_file
from omnieval._placement import interpreter_nodes
from omnieval._plan import _cfg
from omnieval.core import GenerationOptions, OmnievalUserError, PoolConfig, SuiteConfig

log = logging.getLogger("omnieval")


@dataclass
class FrameworkTask:
    """One framework task running in its own actor."""

    key: str
    model: str
    ref: Any
    """The actor's ``run`` result."""
    framework: str
    python: str | None
    """The actor's interpreter (None: the driver's own)."""
    actor: Any


@dataclass
class FrameworkLaunch:
    """What ``_start_frameworks`` started: the tasks, and whether each own interpreter can run a Ray worker."""

    tasks: list[FrameworkTask] = field(default_factory=list)
    checks: dict[Any, tuple[str, str]] = field(default_factory=dict)
    """``cluster.worker_checks`` ref -> (framework, interpreter)."""




def _cache_path(suite: SuiteConfig) -> str | None:
    if not suite.cache.enabled:
        return None
    from pool import default_cache_path

    return suite.cache.path or str(default_cache_path())


def _beside_driver(suite: SuiteConfig, framework: str) -> bool:
    """Whether a framework's tasks run on the driver's node: in its interpreter (a thread), or in its own one that
    this node has (a child process); else they need a framework actor on a node that has it."""
    env = suite.frameworks.get(framework)
    python = env.python if env is not None else None
    return not python or (os.path.isfile(python) and os.access(python, os.X_OK))


def _start_inline(suite: SuiteConfig, run_dir: Path) -> Any:
    """The framework tasks that run on the driver's node (see ``omnieval.adapters._inline``), started before Ray:
    those of the driver's own environment in one driver thread, each of another interpreter in a child process."""
    from omnieval.adapters._inline import InlineRunner, InlineTask

    tasks, env = [], {}
    for b in suite.benchmarks:
        if b.framework == "builtin" or not _beside_driver(suite, b.framework):
            continue
        fw_env = suite.frameworks.get(b.framework)
        python = fw_env.python if fw_env is not None and fw_env.python else None
        if python is None:
            env.update(fw_env.env_vars if fw_env else {})
        gen = GenerationOptions.model_validate({**suite.generation.model_dump(), **b.generation.as_dict()})
        for m in suite.models:
            if (b.models is not None and m.name not in b.models) or _fw_file(run_dir, b.key, m.name).exists():
                continue
            tasks.append(InlineTask(key=b.key, model=m.name, framework=b.framework, task=b.name,
                                    options=dict(b.options), limit=b.limit, generation=gen, python=python,
                                    env=dict(fw_env.env_vars) if python and fw_env else {}))  # fmt: skip
    return InlineRunner(tasks, pool_cfg=suite.pool, seed=suite.seed, cache_path=_cache_path(suite), env=env).start()


def _start_frameworks(
    suite: SuiteConfig, run_dir: Path, controller: Any, pool_cfg: PoolConfig, cache_path: str | None
) -> FrameworkLaunch:
    """One framework client actor per (task, model) of a framework given its own interpreter that the driver's node
    lacks, run there: on a node that has that interpreter (checked on every node first; a node without it would never
    start the actor), and that interpreter asked meanwhile whether it can run a Ray worker at all
    (``cluster.worker_checks``)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from cluster import worker_checks
    from omnieval.adapters._actor import FrameworkClient

    launch = FrameworkLaunch()
    hosts: dict[str, list[str]] = {}  # interpreter -> nodes that have it
    for b in suite.benchmarks:
        if b.framework == "builtin" or _beside_driver(suite, b.framework):
            continue
        env = suite.frameworks.get(b.framework)
        runtime_env: dict[str, Any] = {}
        if env is not None and env.python:
            runtime_env["py_executable"] = env.python
            if env.python not in hosts:
                hosts[env.python] = interpreter_nodes(b.framework, env.python)
                launch.checks.update({ref: (b.framework, env.python) for ref in worker_checks(env.python, hosts[env.python])})
        if env is not None and env.env_vars:
            runtime_env["env_vars"] = dict(env.env_vars)
        for m in suite.models:
            if (b.models is not None and m.name not in b.models) or _fw_file(run_dir, b.key, m.name).exists():
                continue
            placed: dict[str, Any] = {}
            if env is not None and env.python:  # spread over the nodes that have the interpreter
                nodes = hosts[env.python]
                placed["scheduling_strategy"] = NodeAffinitySchedulingStrategy(nodes[len(launch.tasks) % len(nodes)], soft=False)
            actor = FrameworkClient.options(runtime_env=runtime_env or None, **placed).remote(  # type: ignore[attr-defined]
                controller, pool_cfg, suite.seed, cache_path
            )
            gen = GenerationOptions.model_validate({**suite.generation.model_dump(), **b.generation.as_dict()})
            opts = dict(b.options)
            if isinstance(opts.get("data_files"), dict):  # actors may run elsewhere: ship absolute paths
                opts["data_files"] = {k: str(Path(v).resolve()) for k, v in opts["data_files"].items()}
            ref = actor.run.remote(b.framework, task=b.name, options=opts, model=m.name, limit=b.limit, generation=gen,
                                   workdir=os.getcwd())  # fmt: skip
            launch.tasks.append(FrameworkTask(b.key, m.name, ref, b.framework, env.python if env is not None else None, actor))
    return launch


def _finish_frameworks(suite: SuiteConfig, run_dir: Path, launch: FrameworkLaunch,
                       inline: Any = None) -> list[Any]:  # fmt: skip
    """Framework results, each persisted whole as it arrives (the driver thread's in their order, then the actors'
    in completion order, so a resumed run does not redo a finished task), returned in suite order. A task that
    raised becomes its benchmark's error row and is not persisted, so a resumed run retries it."""
    from omnieval._stream import ray_wait_one
    from omnieval.adapters import FrameworkResult

    engines = {m.name: m.engine for m in suite.models}
    got: dict[tuple[str, str], FrameworkResult] = {}

    def settle(key: str, model: str, get: Any) -> None:
        try:
            res: FrameworkResult = get()
        except Exception as e:  # noqa: BLE001 - one framework task's failure must not lose the suite's other results
            res = framework_failure(key, model, _cfg(suite, key).framework, e)
            log.error("%s", res.error)
        else:
            res.benchmark = res.benchmark or key
            _fw_file(run_dir, key, model).write_text(res.model_dump_json())
        for sc in res.scores:
            sc.engine = engines[model]
        got[(key, model)] = res

    for t in inline.tasks if inline is not None else []:
        settle(t.key, t.model, t.future.result)
    pending = {t.ref: t for t in launch.tasks}
    checks = dict(launch.checks)
    while pending:
        done = ray_wait_one([*pending, *checks])
        if done in checks:
            framework, python = checks.pop(done)
            try:
                problem = ray.get(done)
            except Exception as e:  # noqa: BLE001 - the check's own failure says nothing of the interpreter
                log.warning("could not check frameworks.%s.python %s: %r", framework, python, e)
                continue
            if problem is not None:
                for t in [t for t in pending.values() if t.python == python]:
                    del pending[t.ref]
                    ray.kill(t.actor)
                    settle(t.key, t.model, _raise(broken_interpreter(framework, python, problem)))
            continue
        t = pending.pop(done)
        settle(t.key, t.model, lambda ref=done: ray.get(ref))
    out = []
    for b in suite.benchmarks:
        for m in suite.models:
            path = _fw_file(run_dir, b.key, m.name)
            if (b.key, m.name) in got:
                out.append(got[(b.key, m.name)])
            elif b.framework != "builtin" and path.exists():
                out.append(FrameworkResult.model_validate_json(path.read_text()))
    return out


def broken_interpreter(framework: str, python: str, problem: str) -> OmnievalUserError:
    return OmnievalUserError(
        f"frameworks.{framework}.python {python} cannot run a Ray worker ({problem}), so its actor would never "
        f"start; rebuild that venv with bash scripts/make_framework_venv.sh {framework} (it links the driver's ray "
        f"and omnieval into it: a moved or deleted checkout breaks the link), or install ray=={ray.__version__} "
        "and omnieval there"
    )


def _raise(e: BaseException) -> Any:
    def get() -> Any:
        raise e

    return get


def framework_failure(key: str, model: str, framework: str, exc: BaseException) -> Any:
    """A framework task that raised, as that benchmark's error row: one line (what, where, fix) instead of a
    traceback that ends the run."""
    from omnieval.adapters import FrameworkResult
    from omnieval.core import user_message

    cause = getattr(exc, "cause", None) or exc  # a RayTaskError wraps the actor's own exception
    msg = user_message(cause) if isinstance(cause, Exception) else str(cause)
    text = f"{type(cause).__name__}: {msg}".splitlines()[0][:500]
    fix = "see the framework actor's log above"
    low = text.lower()
    if any(w in low for w in ("offline", "couldn't reach", "connectionerror", "dataset", "hub")):
        fix = ("its dataset could not be loaded; run it on local files (options.data_files, or your own task "
               "YAMLs in options.include_path) or allow downloads (unset HF_DATASETS_OFFLINE / HF_HUB_OFFLINE)")
    line = f"{key} on {model} failed in its {framework} actor: {text}"
    if not isinstance(cause, OmnievalUserError):  # a user error's message says what, where and the fix already
        line += f" — fix: {fix}"
    row = ScoreRow(model=model, benchmark=key, metric="error", value=None, num_samples=0, framework=framework,
                   error=line)  # fmt: skip
    return FrameworkResult(records=[], scores=[row], benchmark=key, error=line)


def _framework_provenance(suite: SuiteConfig, results: list[Any]) -> list[BenchmarkProvenance]:
    out = []
    for b in suite.benchmarks:
        if b.framework == "builtin":
            continue
        res = next((r for r in results if r.benchmark == b.key), None)
        out.append(BenchmarkProvenance(
            name=b.key, version=";".join(f"{k}={v}" for k, v in (res.versions if res else {}).items()) or "unknown",
            framework=b.framework, task_type=b.name,
            num_samples=len(res.records) if res else 0,
            generation={**suite.generation.model_dump(), **b.generation.as_dict()}, metrics=[{"options": b.options}],
        ))  # fmt: skip
    return out
