"""Run a suite end to end: plan → pool up → streaming dispatch via client actors → checkpoint → streaming score →
artifact.

Records are built lazily, checkpointed as they return (before scoring) and never all held by the driver; a killed
driver resumes with ``--resume`` and no sample is inferred twice.
"""

from __future__ import annotations

import itertools
import logging
import socket
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import ray

from omnieval._artifacts import (
    BenchmarkProvenance,
    CheckpointWriter,
    ModelProvenance,
    RecordsWriter,
    RunManifest,
    ScoreRow,
    iter_checkpoint,
    read_records,
    write_manifest,
)
from omnieval._frameworks import (
    _cache_path,
    _finish_frameworks,
    _framework_provenance,
    _fw_file,
    _start_frameworks,
    _start_inline,
)
from omnieval._placement import client_spots
from omnieval._plan import RunPlan, _cfg, iter_records, plan_run
from omnieval._progress import RunProgress
from omnieval._provenance import cluster_hostnames
from omnieval._scoring import group
from omnieval.benchmarks import BenchmarkSpec
from omnieval.core import GenerationOptions, Record, SuiteConfig

if TYPE_CHECKING:
    from pool import ChunkResult

log = logging.getLogger("omnieval")


@dataclass
class RunResult:
    run_dir: Path
    manifest: RunManifest
    prestarted: Any = None
    """With ``run_suite(keep_pool=True, prestart=True)``: the driver's pre-started servers, which the kept replicas
    still use; the caller closes it (``.close()``) once it has released the pool."""

    @cached_property
    def records(self) -> list[Record]:
        """Every Record of the run, read back from ``records.parquet`` on first use (a run never keeps them)."""
        return read_records(self.run_dir)


def _dispatch_all(suite: SuiteConfig, clients: list[Any], records: Iterable[Record], sink: Any, inflight: int) -> None:
    """Chunks stream to the client actors with enough in flight to fill every replica's adaptive limit at its
    ceiling; each finished chunk (a ``ChunkResult``) goes to ``sink`` on arrival and is dropped."""
    from omnieval._stream import RayLinesRunner, stream_dispatch

    size = suite.pool.chunk_size
    window = max(2 * len(clients), -(-inflight // size) + len(clients))
    stream_dispatch(records, RayLinesRunner(clients), sink, chunk_size=size, window=window)


def _turn_waves(seq: list[Record]) -> list[list[Record]]:
    """Wave k holds turn k of every multi-turn conversation whose later turns need the model's own answers."""
    from omnieval.benchmarks.omniassist import turn_waves

    return turn_waves(seq) if seq else []


def _fill_history(wave: list[Record], done: dict[tuple[str, str, int], Record]) -> list[Record]:
    from omnieval.benchmarks.omniassist import fill_history

    out = []
    for r in wave:
        if r.meta.get("history_pending"):
            by_index = {k[2]: v for k, v in done.items() if k[0] == r.model and k[1] == r.benchmark}
            r = fill_history(r, by_index)
        out.append(r)
    return out


@dataclass
class _Tally:
    """Throughput counters of what a run answered, kept instead of the Records themselves."""

    answered: int = 0
    cache_hits: int = 0
    tokens: int = 0

    def add_counts(self, res: ChunkResult) -> None:
        self.answered += len(res)
        self.cache_hits += res.cache_hits
        self.tokens += res.output_tokens


def run_suite(
    suite: SuiteConfig,
    *,
    config_path: str | None = None,
    output_dir: str | None = None,
    resume_dir: str | Path | None = None,
    show_progress: bool | None = None,
    keep_pool: bool = False,
    prestart: bool | None = None,
) -> RunResult:
    """plan (validate, run directory) → execute (pool up, streaming dispatch into the checkpoint) → finalize
    (streaming scoring into ``records.parquet``, manifest). The driver holds the in-flight chunks, not the suite.

    ``prestart``: None follows ``pool.prestart``, off for a kept pool (its replicas outlive the driver, and a
    pre-started server dies with it); True pre-starts with a kept pool too, for a caller that releases the pool
    before it ends and then closes ``RunResult.prestarted`` (the benches)."""
    from cluster import connect
    from pool import get_controller, is_inline, start_serve_early

    t_start = time.monotonic()
    # the framework tasks' check (seconds in their interpreters) overlaps Ray's start; nothing deploys before it
    plan = plan_run(suite, config_path=config_path, output_dir=output_dir, resume_dir=resume_dir,
                    defer_framework_check=True)  # fmt: skip
    suite, run_dir, manifest = plan.suite, plan.run_dir, plan.manifest
    inline = _start_inline(suite, run_dir)  # framework work that needs no Ray overlaps Ray's start and the deploy
    from omnieval._prestart import prestart_engines

    # the engines' servers load while Ray starts; the replicas take them over
    needed = _needed_models(plan)
    from omnieval._cpu_share import share_cores

    # CPU engines sharing the node split its cores (before the pre-started servers' commands are made)
    suite = plan.suite = share_cores(suite, needed, keep_pool=keep_pool)
    prestarted = prestart_engines(suite, needed, keep_pool=keep_pool and not prestart)
    t_ray = time.monotonic()
    try:
        connected = connect(suite.ray)
        suite = plan.suite = share_cores(suite, needed, keep_pool=keep_pool)  # a joined one-node cluster's too
        ray_start_s = time.monotonic() - t_ray
        t_check = time.monotonic()
        plan.await_framework_check()
        check_wait_s = time.monotonic() - t_check
    except BaseException:
        inline.abandon()  # its tasks would otherwise wait for a pool that never comes
        if prestarted is not None:
            prestarted.close()
        raise
    from omnieval._lifecycle import reinstall

    reinstall()  # ray.init replaced the CLI's SIGTERM handler with its own, which aborts the driver
    # Serve's controller boots while the pool controller and the clients start
    # a run whose models are endpoints or pre-started servers needs no Serve: the controller holds their replicas
    # (``pool._inline``); models no benchmark of this run uses start no replica
    serve_start = start_serve_early() if any(not is_inline(m) for m in suite.models if m.name in needed) else None
    manifest.ray_version = ray.__version__
    manifest.hostnames = cluster_hostnames() or [socket.gethostname()]
    controller = get_controller(suite.pool.health_check_period_s)
    from omnieval._lifecycle import Heartbeat
    from omnieval._replica_events import ReplicaEvents

    events = ReplicaEvents(controller, [m.name for m in suite.models])
    heartbeat = Heartbeat(controller, manifest.run_id, suite.pool.lease_grace_s, on_tick=events.poll).start()
    timings: dict[str, float] = {"ray_start_s": ray_start_s} if connected.get("started") else {}
    timings["framework_check_wait_s"] = check_wait_s  # what the check took beyond Ray's start
    timings["setup_s"] = time.monotonic() - t_start  # plan, Ray, the check, Serve and the pool controller asked for
    stream = _start_verifier_stream(suite)
    cancelled = False
    try:
        fw_results, tally = _execute(plan, needed, controller, timings, show_progress, stream, inline,
                                     prestarted)  # fmt: skip
        w = max(timings["inference_s"], 1e-9)
        inferred = tally.answered - tally.cache_hits
        manifest.throughput = {
            "output_tokens": float(tally.tokens),
            "output_tokens_per_s": tally.tokens / w if tally.answered else 0.0,
            "requests_per_s": inferred / w if tally.answered else 0.0,
            "inferred": float(inferred),
            "cache_hits": float(tally.cache_hits),
            "live_tokens_per_s": tally.tokens / w if tally.answered else 0.0,
        }
        manifest.models = _model_provenance(suite, ray.get(controller.replicas.remote()))
        _finalize(plan, controller, fw_results, timings, stream)
    except BaseException as e:
        inline.abandon()
        if stream is not None:
            stream.close()
        from omnieval._lifecycle import cancelled_by

        cancel = cancelled_by(e)
        cancelled = isinstance(e, KeyboardInterrupt) or cancel is not None
        manifest.status = "cancelled" if cancelled else "failed"
        manifest.error = str(cancel) if cancel is not None else f"{type(e).__name__}: {e}"
        write_manifest(run_dir, manifest)
        _upload(run_dir, manifest)  # what was done so far, where the user looks for it (a resume updates it)
        if cancel is not None and cancel is not e:
            raise cancel from None  # the signal, not the Ray call it interrupted
        raise
    finally:
        heartbeat.stop(keep=keep_pool)
        if not cancelled:  # a stopped Ray job has 3 s before its SIGKILL: the release comes first
            events.keep(run_dir)
            if serve_start is not None:
                # a run failing in its first seconds (a placement error) returns while Serve still starts in
                # that thread: the caller's ray.shutdown() under a thread inside ray.get makes Ray's core
                # worker end the process with status 1, losing the run's own exit status
                serve_start.join(timeout=60)
        if not keep_pool:
            try:
                # cancelled: only start the deletions (a stopped Ray job is SIGKILLed 3 s after its SIGTERM)
                ray.get(controller.release.remote(manifest.run_id, wait=not cancelled))
            except Exception as e:  # noqa: BLE001 - cleanup must not hide the run's own outcome
                log.warning("pool release failed: %r", e)
        if prestarted is not None and (not keep_pool or cancelled):  # after the release: what its replicas did not
            prestarted.close()  # end (or all, when cancelled); a kept pool's caller closes it after its release
    timings["total_s"] = time.monotonic() - t_start
    manifest.timings = timings
    manifest.status = outcome(manifest, suite.fail_on.error_rate)
    write_manifest(run_dir, manifest)
    _upload(run_dir, manifest)
    return RunResult(run_dir=run_dir, manifest=manifest, prestarted=prestarted if keep_pool else None)


def _upload(run_dir: Path, manifest: RunManifest) -> None:
    """Copy the artifact to ``output.dir``'s URI, when it is one; a failed copy is said, the local one is kept."""
    if not manifest.artifact_uri:
        return
    from omnieval._output import upload_artifact

    try:
        where = upload_artifact(run_dir, manifest.artifact_uri.rsplit("/", 1)[0])
        print(f"artifact copied to {where}", file=sys.stderr)
    except Exception as e:  # noqa: BLE001 - the run's result is in the local copy; say where, and why not uploaded
        log.error("artifact not copied to %s (%r); it is in %s", manifest.artifact_uri, e, run_dir)


def _start_verifier_stream(suite: SuiteConfig) -> Any:
    """The streaming verifier (``verifier.mode: stream``), its judge starting beside the pool; None otherwise."""
    v = suite.verifier
    if v is None or not v.enabled or v.mode != "stream":
        return None
    from omnieval.verifier import VerifierStream

    return VerifierStream(v).start()


def _keep_usage(plan: RunPlan, timings: dict[str, float], sampler: Any, start: float) -> None:
    """The replicas' timeline into the run, and its summary over this inference phase (ending with the sampler's
    last sample, the counters at the end) into the manifest."""
    from omnieval._replica_usage import summarize, write_timeline

    samples = sampler.stop()
    end = time.time()
    write_timeline(plan.run_dir, samples)
    plan.manifest.replica_usage = summarize(samples, start, end, sampler.startup)
    timings["inference_start_unix"], timings["inference_end_unix"] = start, end


def _needed_models(plan: RunPlan) -> set[str]:
    """The models this run (or what a resume has left of it) sends requests to."""
    suite, run_dir = plan.suite, plan.run_dir
    needed = {m for (m, b), n in plan.totals.items() if plan.done.get((m, b), 0) < n}
    needed |= {b.judge for b in suite.benchmarks if b.judge}
    needed |= {m.name for b in suite.benchmarks if b.framework != "builtin" for m in suite.models
               if (b.models is None or m.name in b.models) and not _fw_file(run_dir, b.key, m.name).exists()}  # fmt: skip
    return needed


def _execute(
    plan: RunPlan, needed: set[str], controller: Any, timings: dict[str, float], show_progress: bool | None,
    stream: Any = None, inline: Any = None, prestarted: Any = None,
) -> tuple[list[Any], _Tally]:
    """Models start in the background; every Record not yet in the checkpoint streams through the client actors
    into it (and into the streaming verifier, when on), each model's Records from the moment its own replicas are
    up: a fast engine works while a slow one still loads."""
    from cluster import replica_runtime_env
    from pool import ChunkResult, EvalClient, ModelStarts, decode_records

    suite, run_dir, specs = plan.suite, plan.run_dir, plan.specs
    cache_path = _cache_path(suite)
    pool_cfg = suite.pool
    # client actors only for built-in Records still to infer (framework tasks bring their own client), on nodes that
    # see the samples' media: checked before anything is deployed
    builtin_models = {m for (m, b), n in plan.totals.items() if plan.done.get((m, b), 0) < n}
    builtin_left = bool(builtin_models)
    n_clients = suite.pool.clients if builtin_left else 0
    spots = client_spots(plan.media_dirs, n_clients)
    # framework actors start first: they import their framework, index its tasks and build their requests while
    # the engines load; their first requests wait for a replica of their model
    fw_refs = _start_frameworks(suite, run_dir, controller, pool_cfg, cache_path)
    starts = ModelStarts(controller, [(m, plan.manifest.run_id, replica_runtime_env()) for m in suite.models
                                      if m.name in needed], suite.pool.start_models).start()  # fmt: skip
    if prestarted is not None:

        def release_unclaimed() -> None:  # once every replica has taken its server or launched its own
            starts.wait_settled()
            prestarted.release_unclaimed()

        threading.Thread(target=release_unclaimed, daemon=True, name="omnieval-prestart-release").start()
    from omnieval._replica_usage import UsageSampler

    sampler = UsageSampler(controller, sorted(needed), suite.pool.usage_sample_period_s).start()
    clients = [
        EvalClient.options(**spots[i]).remote(  # type: ignore[attr-defined]
            controller, pool_cfg, suite.seed, i, cache_path, plan.video_inputs
        )
        for i in range(n_clients)
    ]
    t0 = time.monotonic()
    ray.get([c.ready.remote() for c in clients])
    timings["clients_up_s"] = time.monotonic() - t0
    t0 = time.monotonic()
    t0_unix = time.time()
    tally = _Tally()
    seq_specs = {k: s for k, s in specs.items() if s.sequential_turns}
    # multi-turn conversations that feed the model's own answers back run in turn waves; their Records are few and
    # are kept, everything else streams
    seq_done = {r.key: r for r in iter_checkpoint(run_dir) if r.benchmark in seq_specs} if seq_specs else {}
    seq = [r for r in iter_records(suite, seq_specs) if r.key not in plan.done_keys]
    waves = _turn_waves(seq)
    first_wave = _fill_history(waves[0], seq_done) if waves else []
    rest_specs = {k: s for k, s in specs.items() if k not in seq_specs}
    ckpt = CheckpointWriter(run_dir)
    lock = threading.Lock()
    stop = threading.Event()
    try:
        with RunProgress(plan.totals, enabled=show_progress) as progress:
            progress.preload(plan.done)

            def sink(res: ChunkResult) -> None:
                with lock:  # one thread per model delivers
                    if stop.is_set():
                        return  # the run failed or was cancelled: its checkpoint is closed; a resume redoes these
                    ckpt.write_lines(res.lines)  # persisted before scoring: a crash after this loses nothing
                    progress.advance_counts(res.counts, tokens=res.output_tokens)
                    tally.add_counts(res)
                    recs = None
                    if any(b in seq_specs for _, b in res.counts):  # later turns need these answers
                        recs = decode_records(res.lines)
                        seq_done.update((r.key, r) for r in recs)
                    if stream is not None:  # queued for the judge, which works while inference goes on
                        stream.submit(recs if recs is not None else decode_records(res.lines))

            def model_records(model: str) -> Iterable[Record]:
                rest = (r for r in iter_records(suite, rest_specs, {model}) if r.key not in plan.done_keys)
                for r in itertools.chain(rest, (r for r in first_wave if r.model == model)):
                    if stop.is_set():
                        return
                    yield r

            per_model = _ModelDispatch(suite, clients, starts, sink, stop) if clients else None
            if per_model is not None:
                per_model.start({m: model_records(m) for m in sorted(starts.models) if m in builtin_models})
            if inline is not None:  # framework requests flow (each waits for its model), counted in the progress
                inline.progress = progress
                inline.attach(controller)
            if per_model is not None:
                per_model.join()
            starts.wait_all()
            for wave in waves[1:] if clients else []:
                _dispatch_all(suite, clients, _fill_history(wave, seq_done), sink, _window_records(suite, needed))
            fw_results = _finish_frameworks(suite, run_dir, fw_refs, inline)
    except BaseException:
        stop.set()
        starts.stop()
        raise
    finally:
        with lock:
            stop.set()
            ckpt.close()
        _keep_usage(plan, timings, sampler, t0_unix)
        timings.update({f"up_s.{m}": s for m, s in starts.up_s.items()})
        if starts.up_s:
            timings["pool_up_s"] = max(starts.up_s.values())
    for res in fw_results:  # framework tasks count too
        tally.add_counts(ChunkResult.of(res.records))
    timings["inference_s"] = time.monotonic() - t0
    if stream is not None:
        stream.mark_inference_done()
    return fw_results, tally


def _window_records(suite: SuiteConfig, models: set[str]) -> int:
    """Records in flight to fill ``models``' replicas at their concurrency ceiling, as large as the pool may grow
    (elastic scale-out adds replicas): the adaptive limits, not this window, decide what is sent."""
    return sum(suite.pool.max_inflight_per_replica * max(m.replicas, m.max_replicas or 0)
               for m in suite.models if m.name in models) or 1  # fmt: skip


class _ModelDispatch:
    """One dispatch thread per model: it waits for that model's replicas, then streams its Records with a window
    sized for them. The driver's main thread only joins (polled, so ``ray job stop``'s SIGTERM is handled)."""

    def __init__(self, suite: SuiteConfig, clients: list[Any], starts: Any, sink: Any, stop: threading.Event) -> None:
        self.suite, self.clients, self.starts, self.sink, self.stop = suite, clients, starts, sink, stop
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    def start(self, records: dict[str, Iterable[Record]]) -> None:
        for model, recs in records.items():
            t = threading.Thread(target=self._run, args=(model, recs), daemon=True, name=f"omnieval-dispatch-{model}")
            t.start()
            self.threads.append(t)

    def _run(self, model: str, records: Iterable[Record]) -> None:
        try:
            self.starts.wait(model, self.stop)
            _dispatch_all(self.suite, self.clients, records, self.sink, _window_records(self.suite, {model}))
        except BaseException as e:  # noqa: BLE001 - raised in the main thread by join()
            self.errors.append(e)
            self.stop.set()

    def join(self) -> None:
        for t in self.threads:
            while t.is_alive():
                t.join(0.5)
                if self.errors:
                    break
            if self.errors:
                break
        if self.errors:
            raise self.errors[0]


def _finalize(
    plan: RunPlan, controller: Any, fw_results: list[Any], timings: dict[str, float], stream: Any = None
) -> None:
    """Stream the checkpoint once: each Record is postprocessed, scored and written to ``records.parquet``; only
    judge-scored benchmarks (and, with ``verifier.mode: after``, every Record, which that phase needs together) are
    kept. A streaming verifier has seen every Record inferred by this attempt (through the sink); it first judges
    the rest (a resumed run's earlier Records, framework Records); its verdicts are applied as Records are written."""
    from omnieval._scoring import BenchmarkScorer, score_judged

    suite, specs, manifest = plan.suite, plan.specs, plan.manifest
    engines = {m.name: m.engine for m in suite.models}
    after = suite.verifier is not None and suite.verifier.enabled and stream is None
    fw_records = [r for res in fw_results for r in res.records]
    if stream is not None:
        batch: list[Record] = []
        for r in iter_checkpoint(plan.run_dir) if plan.done_keys else ():  # earlier attempts' Records
            if r.key in plan.done_keys:
                batch.append(r)
            if len(batch) >= 256:
                stream.submit(batch)
                batch = []
        stream.submit(batch + fw_records)
        stream.finish()
        timings.update(stream.timings())
    slim: list[Record] = []  # what verifier_rows reads, not the Records

    def emit(r: Record) -> None:
        if stream is not None:
            from omnieval.verifier import stream_slim

            stream.apply(r)
            slim.append(stream_slim(r))
        writer.add(r)

    t0 = time.monotonic()
    scorers: dict[tuple[str, str], BenchmarkScorer] = {}
    kept: list[Record] = []
    writer = RecordsWriter(plan.run_dir)
    try:
        for r in iter_checkpoint(plan.run_dir):
            spec = specs[r.benchmark]
            if spec.judge_module:
                kept.append(r)
                continue
            key = (r.model, r.benchmark)
            sc = scorers.get(key)
            if sc is None:
                sc = scorers[key] = BenchmarkScorer(spec, model=r.model, engine=engines[r.model])
            sc.add(r)
            (kept.append if after else emit)(r)
        rows: dict[tuple[str, str], list[ScoreRow]] = {k: sc.rows() for k, sc in scorers.items()}
        for (model, bench), recs in group([r for r in kept if specs[r.benchmark].judge_module]).items():
            cfg = _cfg(suite, bench)
            rows[(model, bench)] = score_judged(
                recs, specs[bench], model=model, engine=engines[model], judge_model=cfg.judge, controller=controller,
                pool_cfg=suite.pool, max_tokens=cfg.judge_max_tokens, constrained=cfg.judge_constrained,
            )  # fmt: skip
        order = {b.key: i for i, b in enumerate(suite.benchmarks)}
        models = {m.name: i for i, m in enumerate(suite.models)}
        manifest.scores = [s for k in sorted(rows, key=lambda k: (order[k[1]], models[k[0]])) for s in rows[k]]
        manifest.scores += [s for res in fw_results for s in res.scores]
        timings["scoring_s"] = time.monotonic() - t0
        final = kept + fw_records  # judged Records and framework Records (every Record in mode "after")
        if after:
            from omnieval.verifier import run_verifier

            t0 = time.monotonic()
            run_verifier(final, suite.verifier)  # type: ignore[arg-type]
            timings["verifier_s"] = time.monotonic() - t0
            timings["verifier_tail_s"] = timings["verifier_s"]  # the whole phase comes after inference
            for r in final:
                writer.add(r)
            verified = final
        else:
            for r in final:
                emit(r)
            verified = slim
        if after or stream is not None:
            from omnieval.verifier import verifier_rows

            for model in sorted({r.model for r in verified}, key=lambda m: models[m]):
                manifest.scores += verifier_rows(
                    [r for r in verified if r.model == model], engine=engines[model], specs=specs
                )
        writer.close()
    except BaseException:
        writer.abort()
        raise
    manifest.benchmarks = [_bench_provenance(suite, specs[b.key], plan.totals) for b in suite.benchmarks
                           if b.key in specs]  # fmt: skip
    manifest.benchmarks += _framework_provenance(suite, fw_results)


def outcome(manifest: RunManifest, error_rate: float | None = None) -> Literal["completed", "partial", "failed"]:
    """``completed``, or by the documented rule: a benchmark that failed whole, or whose every sample failed (with
    ``fail_on.error_rate``: whose share of failed samples is above it), is a failed benchmark; the run is
    ``partial`` when some benchmark failed and ``failed`` when all did (exit 1 both)."""
    by_bench: dict[tuple[str, str], list[ScoreRow]] = {}
    for row in manifest.scores:
        by_bench.setdefault((row.model, row.benchmark.split("/")[0]), []).append(row)
    failed = 0
    for (model, bench), rows in by_bench.items():
        if any(r.error for r in rows):
            failed += 1
            continue
        top = rows[0]
        if top.num_samples and top.num_errors >= top.num_samples:
            failed += 1
            for r in rows:
                r.error = (f"{bench} on {model}: every one of its {top.num_samples} samples failed (their errors are "
                           "in records.parquet) — fix the engine or endpoint and run the suite again")  # fmt: skip
        elif error_rate is not None and top.num_samples and top.num_errors / top.num_samples > error_rate:
            failed += 1
            for r in rows:
                r.error = (f"{bench} on {model}: {top.num_errors} of its {top.num_samples} samples failed, above "
                           f"fail_on.error_rate {error_rate:g} (their errors are in records.parquet) — fix the engine "
                           "or endpoint and run the suite again")  # fmt: skip
    if not failed:
        return "completed"
    if failed == len(by_bench):
        manifest.error = "every benchmark failed"
        return "failed"
    return "partial"


def _model_provenance(suite: SuiteConfig, replicas: list[Any]) -> list[ModelProvenance]:
    out = []
    for m in suite.models:
        rep = next((r for r in replicas if r.model == m.name and r.model_sha256), None)
        out.append(
            ModelProvenance(
                name=m.name, engine=m.engine, engine_version=rep.engine_version if rep else None,
                path=rep.model_path if rep else None, sha256=rep.model_sha256 if rep else None,
                source=m.source.model_dump(mode="json"), engine_kwargs=dict(m.engine_kwargs),
            )
        )  # fmt: skip
    return out


def _bench_provenance(
    suite: SuiteConfig, spec: BenchmarkSpec, totals: dict[tuple[str, str], int]
) -> BenchmarkProvenance:
    cfg = _cfg(suite, spec.name)
    gen = GenerationOptions.model_validate(
        {**suite.generation.model_dump(), **spec.generation, **cfg.generation.as_dict()}
    )
    return BenchmarkProvenance(
        name=spec.name, version=spec.version, framework=spec.framework, modality=spec.modality,
        task_type=spec.task_type, data_path=str(spec.data_path), data_sha256=spec.data_sha256(),
        num_samples=sum(n for (_, b), n in totals.items() if b == spec.name),
        prompt_template=spec.prompt_template if cfg.prompt == "native" else spec.uniform_prompt_template,
        template_format=spec.template_format, system_prompt=spec.system_prompt, postprocessor=spec.postprocessor,
        metrics=[{"name": m.name, "settings": m.settings} for m in spec.metrics], generation=gen.model_dump(mode="json"),
        cluster_by=spec.cluster_by,
    )  # fmt: skip
