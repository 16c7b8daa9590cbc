"""Run a suite end to end: pool up → shard → dispatch via client actors → checkpoint → score → artifact.

Records are checkpointed as they return (before scoring), so a killed driver resumes with ``--resume`` and no
sample is inferred twice.
"""

from __future__ import annotations

import logging
import secrets
import socket
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import ray

from omnieval._artifacts import (
    BenchmarkProvenance,
    CheckpointWriter,
    ModelProvenance,
    RunManifest,
    ScoreRow,
    read_checkpoint,
    read_manifest,
    write_manifest,
    write_records,
)
from omnieval._config import SuiteConfig
from omnieval._progress import RunProgress
from omnieval._provenance import cluster_hostnames, git_commit, package_versions
from omnieval._schema import Record
from omnieval._scoring import group, score_benchmark
from omnieval.benchmarks import BenchmarkSpec, get_benchmark

log = logging.getLogger("omnieval")


@dataclass
class RunResult:
    run_dir: Path
    manifest: RunManifest
    records: list[Record] = field(default_factory=list)


def new_run_id(suite: SuiteConfig) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{suite.name}-{stamp}-{secrets.token_hex(3)}"


def build_records(suite: SuiteConfig) -> tuple[list[Record], dict[str, BenchmarkSpec]]:
    specs: dict[str, BenchmarkSpec] = {}
    out: list[Record] = []
    for b in suite.benchmarks:
        if b.framework != "builtin":
            continue  # framework tasks build their own samples inside their client actors
        spec = effective_spec(get_benchmark(b.name), b)
        specs[b.key] = spec
        for m in suite.models:
            if b.models is not None and m.name not in b.models:
                continue
            out += spec.records(
                model=m.name, generation=suite.generation, limit=b.limit, prompt=b.prompt, overrides=b.generation,
                options=b.options,
            )  # fmt: skip
    return out, specs


def preflight(suite: SuiteConfig) -> None:
    """Fail before any deploy on inputs that would otherwise surface as replica start-up failures."""
    import httpx

    from omnieval.errors import OmnievalUserError

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


def _dispatch_all(
    suite: SuiteConfig, clients: list[Any], records: list[Record], ckpt: CheckpointWriter, progress: RunProgress,
    inflight: int,
) -> list[Record]:
    """Chunks stream to the client actors with enough in flight to fill every replica's adaptive limit at its
    ceiling; each finished chunk is checkpointed on arrival (before scoring: a crash after this loses nothing)."""
    from omnieval._stream import RayChunkRunner, stream_dispatch

    done: list[Record] = []

    def sink(recs: list[Record]) -> None:
        ckpt.write(recs)
        progress.advance(recs)
        done.extend(recs)

    size = suite.pool.chunk_size
    window = max(2 * len(clients), -(-inflight // size) + len(clients))
    stream_dispatch(records, RayChunkRunner(clients), sink, chunk_size=size, window=window)
    return done


def _phases(todo: list[Record], specs: dict[str, BenchmarkSpec]) -> list[list[Record]]:
    """Wave k holds turn k of every multi-turn conversation whose later turns need the model's own answers;
    everything else runs in the first wave."""
    from omnieval.benchmarks.omniassist import turn_waves

    seq = [r for r in todo if specs[r.benchmark].sequential_turns]
    rest = [r for r in todo if not specs[r.benchmark].sequential_turns]
    waves = turn_waves(seq) if seq else []
    if not waves:
        return [rest]
    return [rest + waves[0], *waves[1:]]


def _fill_history(wave: list[Record], done: dict[tuple[str, str, int], Record]) -> list[Record]:
    from omnieval.benchmarks.omniassist import fill_history

    out = []
    for r in wave:
        if r.meta.get("history_pending"):
            by_index = {k[2]: v for k, v in done.items() if k[0] == r.model and k[1] == r.benchmark}
            r = fill_history(r, by_index)
        out.append(r)
    return out


def run_suite(
    suite: SuiteConfig,
    *,
    config_path: str | None = None,
    output_dir: str | None = None,
    resume_dir: str | Path | None = None,
    show_progress: bool | None = None,
    keep_pool: bool = False,
) -> RunResult:
    from cluster import connect
    from pool import EvalClient, get_controller

    t_start = time.monotonic()
    timings: dict[str, float] = {}
    if resume_dir is not None:
        run_dir = Path(resume_dir)
        old = read_manifest(run_dir)
        if old.status == "completed":
            raise ValueError(f"{run_dir} is already completed; nothing to resume (use `omnieval rerun` to reproduce)")
        suite = SuiteConfig.model_validate(old.config)
    preflight(suite)
    records, specs = build_records(suite)  # bad data fails here, before a run directory or Ray exists
    if resume_dir is not None:
        run_id, created, config_path = old.run_id, old.created, old.config_path
    else:
        run_id = new_run_id(suite)
        run_dir = Path(output_dir or suite.output.dir) / run_id
        run_dir.mkdir(parents=True, exist_ok=False)
        created = datetime.now(timezone.utc).isoformat()
    manifest = RunManifest(
        run_id=run_id, suite_name=suite.name, created=created, config=suite.model_dump(mode="json"),
        config_path=config_path, packages=package_versions(), git_commit=git_commit(),
    )  # fmt: skip
    write_manifest(run_dir, manifest)
    connect(suite.ray)
    manifest.ray_version = ray.__version__
    manifest.hostnames = cluster_hostnames() or [socket.gethostname()]
    previous = {r.key: r for r in read_checkpoint(run_dir)}
    todo = [r for r in records if r.key not in previous]
    controller = get_controller(suite.pool.health_check_period_s)
    ckpt = CheckpointWriter(run_dir)
    try:
        t0 = time.monotonic()
        needed = {r.model for r in todo} | {b.judge for b in suite.benchmarks if b.judge}
        needed |= {m.name for b in suite.benchmarks if b.framework != "builtin" for m in suite.models
                   if (b.models is None or m.name in b.models) and not _fw_file(run_dir, b.key, m.name).exists()}  # fmt: skip
        for m in suite.models:
            if m.name in needed:
                ray.get(controller.ensure_model.remote(m.model_dump(mode="json"), run_id))
        timings["pool_up_s"] = time.monotonic() - t0
        # size the in-flight window for the largest the pool may grow to (elastic scale-out adds replicas), each
        # replica at its concurrency ceiling: the adaptive limits, not this window, decide what is sent
        inflight = sum(suite.pool.max_inflight_per_replica * max(m.replicas, m.max_replicas or 0)
                       for m in suite.models if m.name in needed) or 1  # fmt: skip
        cache_path = None
        if suite.cache.enabled:
            from omnieval._cache import default_cache_path

            cache_path = suite.cache.path or str(default_cache_path())
        pool_cfg = suite.pool.model_dump(mode="json")
        clients = [EvalClient.remote(controller, pool_cfg, suite.seed, i, cache_path) for i in range(suite.pool.clients)]
        t0 = time.monotonic()
        ray.get([c.ready.remote() for c in clients])
        timings["clients_up_s"] = time.monotonic() - t0
        totals: dict[tuple[str, str], int] = {}
        for r in records:
            totals[(r.model, r.benchmark)] = totals.get((r.model, r.benchmark), 0) + 1
        t0 = time.monotonic()
        fw_refs = _start_frameworks(suite, run_dir, controller, pool_cfg, cache_path)
        done = dict(previous)
        new: list[Record] = []
        with RunProgress(totals, enabled=show_progress) as progress:
            progress.advance(list(previous.values()), already_done=True)
            for wave in _phases(todo, specs):
                wave = _fill_history(wave, done)
                got = _dispatch_all(suite, clients, wave, ckpt, progress, inflight)
                done.update((r.key, r) for r in got)
                new += got
            fw_results = _finish_frameworks(suite, run_dir, fw_refs)
            tokens_per_s = progress.tokens_per_s
        timings["inference_s"] = time.monotonic() - t0
        answered = new + [r for res in fw_results for r in res.records]  # framework tasks count too
        inferred = [r for r in answered if not r.meta.get("cache_hit")]
        n_tokens = sum(r.output.usage.completion_tokens for r in inferred if r.output and r.output.usage)
        manifest.throughput = {
            "output_tokens": float(n_tokens),
            "output_tokens_per_s": n_tokens / timings["inference_s"] if answered else 0.0,
            "requests_per_s": len(inferred) / timings["inference_s"] if answered else 0.0,
            "inferred": float(len(inferred)),
            "cache_hits": float(len(answered) - len(inferred)),
            "live_tokens_per_s": tokens_per_s,
        }
        final = [done[r.key] for r in records] + [r for res in fw_results for r in res.records]
        manifest.models = _model_provenance(suite, ray.get(controller.replicas.remote()))

        t0 = time.monotonic()
        manifest.scores = _score(suite, [r for r in final if r.benchmark in specs], specs, controller)
        manifest.scores += [s for res in fw_results for s in res.scores]
        timings["scoring_s"] = time.monotonic() - t0
        if suite.verifier is not None and suite.verifier.enabled:
            from omnieval.verifier import run_verifier, verifier_rows

            t0 = time.monotonic()
            run_verifier(final, suite.verifier)
            engines = {m.name: m.engine for m in suite.models}
            for model in {r.model for r in final}:
                manifest.scores += verifier_rows([r for r in final if r.model == model], engine=engines[model])
            timings["verifier_s"] = time.monotonic() - t0
    except BaseException as e:
        manifest.status = "interrupted" if isinstance(e, KeyboardInterrupt) else "failed"
        manifest.error = f"{type(e).__name__}: {e}"
        write_manifest(run_dir, manifest)
        raise
    finally:
        ckpt.close()
        if not keep_pool:
            try:
                ray.get(controller.release.remote(run_id))
            except Exception as e:  # noqa: BLE001 - cleanup must not hide the run's own outcome
                log.warning("pool release failed: %r", e)

    manifest.benchmarks = [_bench_provenance(suite, specs[b.key], final) for b in suite.benchmarks if b.key in specs]
    manifest.benchmarks += _framework_provenance(suite, fw_results, final)
    write_records(run_dir, final)
    timings["total_s"] = time.monotonic() - t_start
    manifest.timings = timings
    manifest.status = "completed"
    write_manifest(run_dir, manifest)
    return RunResult(run_dir=run_dir, manifest=manifest, records=final)


def _fw_file(run_dir: Path, key: str, model: str) -> Path:
    return run_dir / f"framework-{key.replace(':', '_').replace('/', '_')}-{model}.json"


def _start_frameworks(
    suite: SuiteConfig, run_dir: Path, controller: Any, pool_cfg: dict[str, Any], cache_path: str | None
) -> list[tuple[str, str, Any]]:
    """One framework client actor per (task, model), in the framework's own environment when configured."""
    from omnieval.adapters._actor import FrameworkClient

    refs = []
    for b in suite.benchmarks:
        if b.framework == "builtin":
            continue
        env = suite.frameworks.get(b.framework)
        runtime_env: dict[str, Any] = {}
        if env is not None and env.python:
            runtime_env["py_executable"] = env.python
        if env is not None and env.env_vars:
            runtime_env["env_vars"] = dict(env.env_vars)
        for m in suite.models:
            if (b.models is not None and m.name not in b.models) or _fw_file(run_dir, b.key, m.name).exists():
                continue
            actor = FrameworkClient.options(runtime_env=runtime_env or None).remote(controller, pool_cfg, suite.seed, cache_path)
            gen = {**suite.generation.model_dump(), **b.generation}
            opts = dict(b.options)
            if isinstance(opts.get("data_files"), dict):  # actors may run elsewhere: ship absolute paths
                opts["data_files"] = {k: str(Path(v).resolve()) for k, v in opts["data_files"].items()}
            ref = actor.run.remote(b.framework, task=b.name, options=opts, model=m.name, limit=b.limit, generation=gen)
            refs.append((b.key, m.name, ref))
    return refs


def _finish_frameworks(suite: SuiteConfig, run_dir: Path, refs: list[tuple[str, str, Any]]) -> list[Any]:
    """Framework results, each persisted whole on arrival so a resumed run does not redo a finished task."""
    from omnieval.adapters import FrameworkResult

    engines = {m.name: m.engine for m in suite.models}
    out = []
    for b in suite.benchmarks:
        for m in suite.models:
            path = _fw_file(run_dir, b.key, m.name)
            ref = next((r for k, mm, r in refs if k == b.key and mm == m.name), None)
            if ref is not None:
                res: FrameworkResult = ray.get(ref)
                for sc in res.scores:
                    sc.engine = engines[m.name]
                path.write_text(res.model_dump_json())
                out.append(res)
            elif b.framework != "builtin" and path.exists():
                out.append(FrameworkResult.model_validate_json(path.read_text()))
    return out


def _framework_provenance(suite: SuiteConfig, results: list[Any], records: list[Record]) -> list[BenchmarkProvenance]:
    out = []
    for b in suite.benchmarks:
        if b.framework == "builtin":
            continue
        res = next((r for r in results if r.records and r.records[0].benchmark == b.key), None)
        out.append(BenchmarkProvenance(
            name=b.key, version=";".join(f"{k}={v}" for k, v in (res.versions if res else {}).items()) or "unknown",
            framework=b.framework, task_type=b.name, num_samples=sum(1 for r in records if r.benchmark == b.key),
            generation={**suite.generation.model_dump(), **b.generation}, metrics=[{"options": b.options}],
        ))  # fmt: skip
    return out


def effective_spec(spec: BenchmarkSpec, cfg: Any) -> BenchmarkSpec:
    """The benchmark as this suite runs it: named by its key (prompt variant), metrics possibly replaced."""
    from omnieval.benchmarks import MetricSpec

    update: dict[str, Any] = {"name": cfg.key}
    if cfg.metrics is not None:
        update["metrics"] = tuple(MetricSpec(name=n) for n in cfg.metrics)
    return spec.model_copy(update=update)


def _cfg(suite: SuiteConfig, key: str) -> Any:
    return next(b for b in suite.benchmarks if b.key == key)


def _score(
    suite: SuiteConfig, records: list[Record], specs: dict[str, BenchmarkSpec], controller: Any
) -> list[ScoreRow]:
    from omnieval._scoring import score_judged

    engines = {m.name: m.engine for m in suite.models}
    rows: list[ScoreRow] = []
    for (model, bench), recs in group(records).items():
        spec = specs[bench]
        if spec.judge_module:
            cfg = _cfg(suite, bench)
            rows += score_judged(recs, spec, model=model, engine=engines[model], judge_model=cfg.judge,
                                 controller=controller, pool_cfg=suite.pool, max_tokens=cfg.judge_max_tokens)  # fmt: skip
        else:
            rows += score_benchmark(recs, spec, model=model, engine=engines[model])
    return rows


def _model_provenance(suite: SuiteConfig, replicas: list[Any]) -> list[ModelProvenance]:
    out = []
    for m in suite.models:
        rep = next((r for r in replicas if r.model == m.name and r.model_sha256), None)
        out.append(
            ModelProvenance(
                name=m.name, engine=m.engine, engine_version=rep.engine_version if rep else None,
                path=rep.model_path if rep else None, sha256=rep.model_sha256 if rep else None,
                source=m.source.model_dump(mode="json"),
            )
        )  # fmt: skip
    return out


def _bench_provenance(suite: SuiteConfig, spec: BenchmarkSpec, records: list[Record]) -> BenchmarkProvenance:
    cfg = _cfg(suite, spec.name)
    gen = suite.generation.model_copy(update={**spec.generation, **cfg.generation})
    return BenchmarkProvenance(
        name=spec.name, version=spec.version, framework=spec.framework, modality=spec.modality,
        task_type=spec.task_type, data_path=str(spec.data_path), data_sha256=spec.data_sha256(),
        num_samples=sum(1 for r in records if r.benchmark == spec.name),
        prompt_template=spec.prompt_template if cfg.prompt == "native" else spec.uniform_prompt_template,
        system_prompt=spec.system_prompt, postprocessor=spec.postprocessor,
        metrics=[{"name": m.name, "settings": m.settings} for m in spec.metrics], generation=gen.model_dump(mode="json"),
    )  # fmt: skip
