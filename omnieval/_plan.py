"""What a run will do, worked out before anything starts: the suite's samples are validated (O(1) memory), every
framework task and model file is checked, the artifact's destination is resolved, and a resumed run's checkpoint is
read; bad input fails here, before a run directory exists or Ray starts. The framework tasks' check can instead go
on while Ray starts (``plan_run(defer_framework_check=True)``, the runner's way): it then fails the run before
anything deploys, and the run directory made meanwhile goes with it."""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from omnieval._artifacts import (
    RunManifest,
    iter_checkpoint,
    read_manifest,
    write_manifest,
)
from omnieval._modalities import check_modalities
from omnieval._output import resolve_output_dir
from omnieval._provenance import git_commit, package_versions
from omnieval.benchmarks import BenchmarkSpec, custom_spec, get_benchmark
from omnieval.core import OmnievalUserError, Record, SuiteConfig


def new_run_id(suite: SuiteConfig) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{suite.name}-{stamp}-{secrets.token_hex(3)}"


def builtin_specs(suite: SuiteConfig) -> dict[str, BenchmarkSpec]:
    """The suite's built-in benchmarks as it runs them, by key (framework tasks build their own samples)."""
    return {
        b.key: effective_spec(custom_spec(b) if b.define else get_benchmark(b.name), b)
        for b in suite.benchmarks
        if b.framework == "builtin"
    }


def iter_records(suite: SuiteConfig, specs: dict[str, BenchmarkSpec], models: set[str] | None = None) -> Iterator[Record]:
    """The suite's Records one at a time (benchmark order, then model order, then sample order); ``models``: only
    theirs."""
    for b in suite.benchmarks:
        spec = specs.get(b.key)
        if spec is None:
            continue
        for m in suite.models:
            if (b.models is not None and m.name not in b.models) or (models is not None and m.name not in models):
                continue
            yield from spec.iter_records(
                model=m.name, generation=suite.generation, limit=b.limit, prompt=b.prompt, overrides=b.generation.as_dict(),
                options=b.options,
            )  # fmt: skip


def build_records(suite: SuiteConfig) -> tuple[list[Record], dict[str, BenchmarkSpec]]:
    """Every Record at once (benchmarks and tests; a run streams them with ``iter_records``)."""
    specs = builtin_specs(suite)
    return list(iter_records(suite, specs)), specs


def check_frameworks(suite: SuiteConfig) -> None:
    """Every framework task resolved (name, options, local files) in its framework's interpreter, before deploy."""
    from omnieval.adapters._check import check_in
    from serving import ENGINES

    by_python: dict[str | None, list[dict[str, Any]]] = {}  # one check process per interpreter, all at once
    env_vars: dict[str | None, dict[str, str]] = {}
    for i, b in enumerate(suite.benchmarks):
        if b.framework == "builtin":
            continue
        env = suite.frameworks.get(b.framework)
        python = env.python if env else None
        scorers = {m.name: [m.engine, ENGINES.get(m.engine).scoring(m.engine_kwargs)]
                   for m in suite.models if b.models is None or m.name in b.models}  # fmt: skip
        by_python.setdefault(python, []).append(
            {"framework": b.framework, "task": b.name, "options": b.options, "where": f"benchmarks[{i}]",
             "scorers": scorers})  # fmt: skip
        env_vars.setdefault(python, {}).update(env.env_vars if env else {})
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max(len(by_python), 1)) as ex:
        found = list(ex.map(lambda kv: check_in(kv[0], kv[1], env_vars[kv[0]]), by_python.items()))
    errors = [e for errs in found for e in errs]
    if errors:
        raise OmnievalUserError("; ".join(errors))


def start_framework_check(suite: SuiteConfig) -> Future[None]:
    """``check_frameworks`` in a background thread: it runs each framework's interpreter for a few seconds (2.5 s
    for lm-eval's task index on 2 cores), which need not delay Ray's start."""
    from concurrent.futures import ThreadPoolExecutor

    ex = ThreadPoolExecutor(1, thread_name_prefix="omnieval-framework-check")
    try:
        return ex.submit(check_frameworks, suite)
    finally:
        ex.shutdown(wait=False)  # the thread ends with its one task


def preflight(suite: SuiteConfig, *, frameworks: bool = True) -> None:
    """Fail before any deploy on inputs that would otherwise surface as replica start-up failures (``frameworks``:
    the framework tasks too; False when their check runs apart, ``start_framework_check``)."""
    import httpx

    if frameworks:
        check_frameworks(suite)
    for i, m in enumerate(suite.models):
        src = m.source
        if src.kind == "path" and not Path(src.path).expanduser().exists():
            raise OmnievalUserError(f"models[{i}].source.path: model file not found: {src.path}; fix the path")
        if src.kind == "endpoint":
            try:
                httpx.get(src.base_url.rstrip("/") + "/models", timeout=5.0).raise_for_status()
            except (httpx.HTTPError, OSError) as e:
                raise OmnievalUserError(
                    f"models[{i}].source.base_url: endpoint {src.base_url} is unreachable ({type(e).__name__}); "
                    "start the server or fix base_url"
                ) from None


@dataclass
class RunPlan:
    """What a run will do, worked out before anything starts: bad data fails here, before a run directory or Ray."""

    suite: SuiteConfig
    specs: dict[str, BenchmarkSpec]
    totals: dict[tuple[str, str], int]
    """Samples per (model, benchmark)."""
    run_dir: Path
    manifest: RunManifest
    done: dict[tuple[str, str], int]
    """Samples per (model, benchmark) already in the checkpoint (a resumed run)."""
    done_keys: set[tuple[str, str, int]]
    """Their keys."""
    video_inputs: dict[str, str] = field(default_factory=dict)
    """Per model, how clips reach it (``native`` / ``frames``); models sent no video are absent."""
    media_dirs: set[str] = field(default_factory=set)
    """Directories of the local media files the samples name: the nodes clients run on must see them."""
    framework_check: Future[None] | None = None
    """The framework tasks' check, when deferred (``plan_run(defer_framework_check=True)``)."""
    made: Path | None = None
    """The outermost directory this plan created for the run directory (None for a resumed run)."""

    def await_framework_check(self) -> None:
        """Raise the deferred framework check's error, if any, after removing what this plan created (the run
        directory holds only its manifest then): a bad task leaves nothing behind, as when checked up front."""
        if self.framework_check is None:
            return
        try:
            self.framework_check.result()
        except BaseException:
            if self.made is not None:
                shutil.rmtree(self.made, ignore_errors=True)
            raise


def plan_run(
    suite: SuiteConfig, *, config_path: str | None = None, output_dir: str | None = None,
    resume_dir: str | Path | None = None, defer_framework_check: bool = False,
) -> RunPlan:  # fmt: skip
    """``defer_framework_check``: the framework tasks' check goes on after this returns (``RunPlan
    .await_framework_check`` raises its error); any other input error found meanwhile waits for it, so a bad
    framework task is reported first, as when it is checked up front."""
    resume: tuple[Path, RunManifest] | None = None
    if resume_dir is not None:
        resume = (Path(resume_dir), read_manifest(Path(resume_dir)))
        if resume[1].status == "completed":
            raise ValueError(f"{resume_dir} is already completed; nothing to resume (`omnieval rerun` reproduces it)")
        suite = SuiteConfig.model_validate(resume[1].config)
    else:
        resolve_output_dir(output_dir, suite.output.dir)  # refused before the samples are even read
    check = start_framework_check(suite) if defer_framework_check else None
    try:
        plan = _plan(suite, config_path, output_dir, resume, check)
    except BaseException:
        if check is not None:
            check.result()  # its error first (what an up-front check would have said)
        raise
    return plan


def _plan(
    suite: SuiteConfig, config_path: str | None, output_dir: str | None, resume: tuple[Path, RunManifest] | None,
    check: Future[None] | None,
) -> RunPlan:  # fmt: skip
    preflight(suite, frameworks=check is None)
    specs = builtin_specs(suite)
    totals: dict[tuple[str, str], int] = {}
    seen: dict[tuple[str, str], set[str]] = {}
    media_dirs: set[str] = set()
    for r in iter_records(suite, specs):  # validates every sample in O(1) memory; the run builds them again lazily
        totals[(r.model, r.benchmark)] = totals.get((r.model, r.benchmark), 0) + 1
        seen.setdefault((r.model, r.benchmark), set()).update(r.modalities())
        media_dirs.update(os.path.dirname(os.path.abspath(p)) for p in r.media_paths())
    video_inputs = check_modalities(suite, seen)
    made: Path | None = None
    if resume is not None:
        run_dir, old = resume
        run_id, created, config_path = old.run_id, old.created, old.config_path
        upload_to = old.artifact_uri.rsplit("/", 1)[0] if old.artifact_uri else None
    else:
        run_id = new_run_id(suite)
        target = resolve_output_dir(output_dir, suite.output.dir)
        run_dir = target.local / run_id
        made = next(p for p in [*reversed(run_dir.parents), run_dir] if not p.exists())
        run_dir.mkdir(parents=True, exist_ok=False)
        created = datetime.now(timezone.utc).isoformat()
        upload_to = target.uri
    manifest = RunManifest(
        run_id=run_id, suite_name=suite.name, created=created, config=suite.model_dump(mode="json"),
        config_path=config_path, packages=package_versions(), git_commit=git_commit(),
        artifact_uri=f"{upload_to}/{run_id}" if upload_to else None,
    )  # fmt: skip
    write_manifest(run_dir, manifest)
    done: dict[tuple[str, str], int] = {}
    done_keys: set[tuple[str, str, int]] = set()
    for r in iter_checkpoint(run_dir):
        done_keys.add(r.key)
        done[(r.model, r.benchmark)] = done.get((r.model, r.benchmark), 0) + 1
    return RunPlan(suite=suite, specs=specs, totals=totals, run_dir=run_dir, manifest=manifest, done=done,
                   done_keys=done_keys, video_inputs=video_inputs, media_dirs=media_dirs, framework_check=check,
                   made=made)  # fmt: skip


def effective_spec(spec: BenchmarkSpec, cfg: Any) -> BenchmarkSpec:
    """The benchmark as this suite runs it: named by its key (prompt variant), metrics possibly replaced."""
    from omnieval.benchmarks import MetricSpec

    update: dict[str, Any] = {"name": cfg.key}
    if cfg.metrics is not None:
        update["metrics"] = tuple(MetricSpec(name=n) for n in cfg.metrics)
    return spec.model_copy(update=update)


def _cfg(suite: SuiteConfig, key: str) -> Any:
    return next(b for b in suite.benchmarks if b.key == key)
