"""``omnieval bench federated``: the same suite per-process and federated, side by side in one invocation.

Fairness rules (docs/bench.md): both modes get the same total engine threads, the same Records (same samples,
prompts, max_tokens) and are checked to return the same number of records. Per-process: K benchmark×model jobs in K
concurrent processes with ``threads_total // K`` threads each, one llama-server ``--parallel 1`` per process.
Federated: ``run_suite`` with the suite's pool (replicas × threads == threads_total, ``--parallel N``, concurrent
client actors). Wall time is inference only (engine start-up reported separately); repeats alternate the order so
drift on a shared machine hits both modes alike; the summary uses medians.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from omnieval.core import SuiteConfig
from omnieval.perf._common import median
from omnieval.perf._node_cpu import NodeCpuWatcher, others


def _threads_of(suite: SuiteConfig, threads_total: int) -> SuiteConfig:
    """The suite with llama.cpp replicas sharing ``threads_total`` evenly (unless the suite pins threads)."""
    models = []
    for m in suite.models:
        kw = dict(m.engine_kwargs)
        if m.engine == "llamacpp" and not kw.get("threads"):
            kw["threads"] = max(1, threads_total // max(1, m.replicas))
        models.append(m.model_copy(update={"engine_kwargs": kw}))
    return suite.model_copy(update={"models": models})


def federated_threads(suite: SuiteConfig) -> int:
    return sum(m.replicas * int(m.engine_kwargs.get("threads") or 1) for m in suite.models if m.engine == "llamacpp")


class _CheckpointWatcher:
    """Notes when each checkpoint line appears, so the federated run gets a first-request→last-response window
    comparable to the per-process one (``run_suite``'s ``inference_s`` also includes client-actor start-up)."""

    def __init__(self, out_dir: Path, period_s: float = 0.05) -> None:
        self.out_dir, self.period_s = out_dir, period_s
        self.arrivals: list[float] = []  # wall-clock time at which line i was first seen
        self.last_by_benchmark: dict[str, float] = {}  # when each benchmark's latest Record was seen
        self._offset, self._tail = 0, b""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="bench-ckpt-watch")

    def __enter__(self) -> _CheckpointWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self.look()

    def look(self) -> None:
        """One look at the checkpoint, reading on from where the last stopped (the watch shares the benched node's
        CPU: re-reading the whole file 20 times a second would charge the run for it)."""
        now = time.time()
        files = list(self.out_dir.glob("*/records.partial.jsonl"))
        if not files:
            return
        with open(files[0], "rb") as f:
            f.seek(self._offset)
            chunk = f.read()
        self._offset += len(chunk)
        *lines, self._tail = (self._tail + chunk).split(b"\n")  # a line still being written waits for its newline
        for ln in lines:
            bench = json.loads(ln).get("benchmark")
            if bench:
                self.last_by_benchmark[bench] = now
        self.arrivals += [now] * len(lines)

    def active_window(self, latencies: list[float]) -> float | None:
        """Last arrival minus the earliest implied dispatch (arrival − latency, in checkpoint order)."""
        k = min(len(self.arrivals), len(latencies))
        if k == 0:
            return None
        start = min(self.arrivals[i] - latencies[i] for i in range(k))
        return self.arrivals[k - 1] - start


def run_federated(suite: SuiteConfig, bench_names: list[str], *, probe: Any = None,
                  own_ray: bool = False) -> dict[str, Any]:  # fmt: skip
    """One ``run_suite`` over the benchmarks; engine stats are read before the pool is released, and ``probe``
    (if given) is called with the live replicas' ``ReplicaInfo`` list while they still run.

    ``own_ray``: the run starts its own local Ray, as ``omnieval run`` does (with its engine servers started
    before it, ``pool.prestart``), and Ray is shut down after it; its start is in ``e2e_s`` and ``ray_init_s``."""
    import ray

    try:
        return _run_federated(suite, bench_names, probe, own_ray)
    finally:
        if own_ray and ray.is_initialized():
            ray.shutdown()


def _engine_pids(ids: list[str]) -> dict[int, str]:
    """Engine server pid -> the group its replica's processes are charged to: a server the driver pre-started is
    the driver's child, but its CPU is its replica's."""
    from ray import serve

    out = {}
    for rid in ids:
        try:
            pid = serve.get_app_handle(rid).pid.remote().result(timeout_s=30)
        except Exception:  # noqa: BLE001 - a replica gone by now: its server is gone too
            continue
        if pid is not None:
            out[int(pid)] = f"ray::ServeReplica:{rid}:EngineReplica"
    return out


def _held_server_pids(live: list[Any], prestarted: Any) -> dict[int, str]:
    """Each process of a pre-started server (vLLM's API server and engine core, an engine process) -> its title with
    the replica that took it over (matched by port), so it counts as that replica's work and not as the node's other
    work; the held replica has no Serve process of its own to charge it to."""
    from urllib.parse import urlparse

    from omnieval.perf._node_cpu import snapshot

    if prestarted is None:
        return {}
    by_port = {urlparse(r.endpoint.base_url).port: r.replica_id for r in live if r.endpoint is not None}
    roots = {int(s.server.proc.pid): by_port[s.server.port] for s in prestarted.servers
             if s.server is not None and s.server.proc is not None and s.server.port in by_port}  # fmt: skip
    if not roots:
        return {}
    procs, out = snapshot(), {}
    for pid, p in procs.items():
        q, seen = pid, set()
        while q in procs and q not in seen:  # the nearest pre-started ancestor-or-self
            if q in roots:
                out[pid] = f"{p.title} [{roots[q]}]"
                break
            seen.add(q)
            q = procs[q].ppid
    return out


def _run_federated(suite: SuiteConfig, bench_names: list[str], probe: Any, own_ray: bool) -> dict[str, Any]:
    import ray

    from omnieval._runner import run_suite
    from pool import get_controller


    sub = suite.model_copy(update={"benchmarks": [b for b in suite.benchmarks if b.name in bench_names or b.key in bench_names]})
    with tempfile.TemporaryDirectory(prefix="omnieval-bench-fed-") as out:
        t0 = time.monotonic()
        t0_wall = time.time()
        with _CheckpointWatcher(Path(out)) as watch, NodeCpuWatcher() as node_cpu:
            res = run_suite(sub, output_dir=out, show_progress=False, keep_pool=True, prestart=own_ray or None)
        e2e = time.monotonic() - t0
        t_end_wall = time.time()
        recs = res.records  # read back from the run directory before it goes
        ckpt = next(Path(out).glob("*/records.partial.jsonl"))
        ckpt_lat = [float(json.loads(ln).get("latency") or 0.0) for ln in ckpt.read_text().splitlines() if ln.strip()]
        active = watch.active_window(ckpt_lat)
        done_at = dict(watch.last_by_benchmark)
        for fw in Path(out).glob("*/framework-*.json"):  # framework tasks: when each finished in its actor
            fr = json.loads(fw.read_text())
            if fr.get("records") and fr.get("finished_at"):
                done_at[fr["records"][0]["benchmark"]] = float(fr["finished_at"])
        ctl = get_controller(sub.pool.health_check_period_s)
        try:
            live = ray.get(ctl.replicas.remote())
            ids = [r.replica_id for r in live]
            node_cpu.owners.update(_engine_pids(ids))
            node_cpu.owners.update(_held_server_pids(live, res.prestarted))
            probed = probe(live) if probe is not None else None
        finally:
            ray.get(ctl.release.remote(res.manifest.run_id))
            if res.prestarted is not None:
                res.prestarted.close()
        # the retired replicas' final stats, merged with what clients saw them serve: requests sent straight to an
        # engine's server never pass the replica process, whose own busy time would read 0
        retired = ray.get(ctl.retired.remote())
        stats = [retired[i].stats for i in ids if i in retired and retired[i].stats is not None]
        from omnieval._replica_usage import cpu_span, read_timeline

        timeline_samples = read_timeline(res.run_dir)  # before the run directory goes
    wall = res.manifest.timings["inference_s"]
    tm = res.manifest.timings
    # wall-clock start of the inference phase: run end minus everything after it (scoring, verifier; the artifact
    # write after them is not timed and makes this start a little early, i.e. the window a little long)
    t_inf0 = t_end_wall - tm.get("inference_s", 0.0) - tm.get("scoring_s", 0.0) - tm.get("verifier_s", 0.0)
    threads = {m.name: int(m.engine_kwargs.get("threads") or 1) for m in sub.models}
    t_inf = tm.get("inference_start_unix", t_inf0)
    usage = [u.model_dump() for u in res.manifest.replica_usage]
    for u in usage:  # who else used the node while the replica's CPU was counted (its ``cpu_cores`` window)
        span = cpu_span(sorted((s for s in timeline_samples if s.replica_id == u["replica_id"]), key=lambda s: s.t),
                        t_inf, t_inf + wall)  # fmt: skip
        got = node_cpu.window(span[0].t, span[1].t) if span else None
        u["node_others"] = others(got["cores"], u["replica_id"]) if got else None
    return {
        "wall_s": wall,
        "e2e_s": e2e,
        "ray_inside": own_ray,
        "ray_init_s": tm.get("ray_start_s"),
        "pool_up_s": res.manifest.timings.get("pool_up_s"),
        "active_s": active if active is not None else wall,
        "records": len(recs),
        "errors": sum(1 for r in recs if r.error is not None),
        "output_tokens": sum(r.output.usage.completion_tokens for r in recs if r.output and r.output.usage),
        "engines": [
            {
                "replica": s.replica_id,
                "busy_s": s.busy_s,
                "threads": threads.get(s.model, 1),
                "completed": s.completed,
                "output_tokens": s.output_tokens,
            }
            for s in stats
        ],  # fmt: skip
        "predictions": {f"{r.model}/{r.benchmark}/{r.index}": r.prediction for r in recs},
        "t_start": t0_wall, "t_inference_start": t_inf, "probe": probed,
        "replica_usage": usage,
        "timeline": [s.model_dump() for s in timeline_samples],
        "timings": dict(tm),
        "node_cpu": node_cpu.run_total(),
        "done_at": done_at,
        "by_benchmark": _by_benchmark(
            [(r.benchmark, r.output.usage.completion_tokens if r.output and r.output.usage else 0) for r in recs]
        ),  # fmt: skip
    }


def _by_benchmark(pairs: list[tuple[str, int]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = defaultdict(lambda: {"records": 0, "output_tokens": 0})
    for b, t in pairs:
        out[b]["records"] += 1
        out[b]["output_tokens"] += t
    return dict(out)


def _utilisation(engines: list[dict[str, Any]], wall: float) -> float:
    """Thread-weighted share of the mode's inference wall time during which engines had work in flight."""
    threads = sum(e["threads"] for e in engines) or 1
    return sum(e["busy_s"] * e["threads"] for e in engines) / (threads * max(wall, 1e-9))


def _row(mode: str, modality: str, rep: int, r: dict[str, Any], engines: list[dict[str, Any]]) -> dict[str, Any]:
    w = r["wall_s"]
    return {
        "mode": mode, "modality": modality, "repeat": rep, "wall_s": w, "e2e_s": r["e2e_s"], "active_s": r["active_s"],
        "records": r["records"], "errors": r["errors"], "output_tokens": r["output_tokens"],
        "output_tokens_per_s": r["output_tokens"] / max(w, 1e-9), "requests_per_s": r["records"] / max(w, 1e-9),
        "engine_utilisation": _utilisation(engines, w),
        "engine_utilisation_active": _utilisation(engines, r["active_s"]), "engines": engines,
        "threads_total": sum(e["threads"] for e in engines),
    }  # fmt: skip


def bench_federated(suite: SuiteConfig, *, threads_total: int, repeats: int = 1, log: Any = print) -> dict[str, Any]:
    from cluster import connect
    from omnieval.benchmarks import get_benchmark
    from omnieval.perf._common import no_cache, shutdown_ray
    from omnieval.perf._perprocess import jobs_for, run_per_process

    suite = no_cache(_threads_of(suite, threads_total))
    by_mod: dict[str, list[str]] = defaultdict(list)
    for b in suite.benchmarks:
        by_mod[get_benchmark(b.name).modality].append(b.name)
    fed_threads = federated_threads(suite)
    if fed_threads and fed_threads != threads_total:
        log(f"warning: federated llama.cpp threads {fed_threads} != per-process total {threads_total}")
    rows: list[dict[str, Any]] = []
    checks: dict[str, Any] = {}
    t0 = time.monotonic()
    started = bool(connect(suite.ray).get("started"))
    ray_init_s = time.monotonic() - t0
    try:
        for rep in range(repeats):
            for modality, names in by_mod.items():
                order = ["per_process", "federated"] if rep % 2 == 0 else ["federated", "per_process"]
                got: dict[str, dict[str, Any]] = {}
                for mode in order:
                    log(f"[repeat {rep + 1}/{repeats}] {modality}: {mode} ({', '.join(names)}) ...")
                    if mode == "per_process":
                        pp = run_per_process(jobs_for(suite, names, threads_total))
                        ws = pp["workers"]
                        r = {"wall_s": pp["wall_s"], "e2e_s": pp["e2e_s"], "active_s": pp["wall_s"], "records": sum(w["records"] for w in ws),
                             "errors": sum(w["errors"] for w in ws), "output_tokens": sum(w["output_tokens"] for w in ws),
                             "predictions": {f"{w['model']}/{w['benchmark']}/{i}": p for w in ws
                                             for i, p in w["predictions"].items()}}  # fmt: skip
                        engines = [{"replica": f"per-process-{w['benchmark']}", "busy_s": w["busy_s"],
                                    "threads": w["threads"], "completed": w["records"] - w["errors"],
                                    "output_tokens": w["output_tokens"], "wall_s": w["wall_s"],
                                    "engine_start_s": w["engine_start_s"]} for w in ws]  # fmt: skip
                    else:
                        r = run_federated(suite, names)
                        engines = r["engines"]
                    got[mode] = r
                    rows.append(_row(mode, modality, rep, r, engines))
                    log(f"    wall {r['wall_s']:.1f} s, {r['records']} records, {r['output_tokens']} output tokens")
                a, b = got["per_process"]["predictions"], got["federated"]["predictions"]
                same = [k for k in a if k in b and a[k] == b[k]]
                checks.setdefault(modality, []).append({
                    "repeat": rep, "same_record_count": got["per_process"]["records"] == got["federated"]["records"],
                    "prediction_agreement": len(same) / max(len(a), 1),
                })  # fmt: skip
    finally:
        shutdown_ray(started)
    return {"ray_init_s": ray_init_s, "rows": rows, "checks": checks, "summary": summarise(rows)}


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians per modality and mode, and the speedup (per-process wall / federated wall) with its spread."""
    out: dict[str, Any] = {}
    for modality in sorted({r["modality"] for r in rows}):
        per: dict[str, Any] = {}
        for mode in ("per_process", "federated"):
            rs = [r for r in rows if r["modality"] == modality and r["mode"] == mode]
            per[mode] = {k: median([r[k] for r in rs]) for k in
                         ("wall_s", "active_s", "e2e_s", "output_tokens_per_s", "requests_per_s",
                          "engine_utilisation", "engine_utilisation_active")}  # fmt: skip
            per[mode]["records"] = rs[0]["records"] if rs else 0
            per[mode]["threads_total"] = rs[0]["threads_total"] if rs else 0
        pp = {r["repeat"]: r["wall_s"] for r in rows if r["modality"] == modality and r["mode"] == "per_process"}
        fd = {r["repeat"]: r["wall_s"] for r in rows if r["modality"] == modality and r["mode"] == "federated"}
        ratios = [pp[k] / fd[k] for k in pp if k in fd and fd[k] > 0]
        per["speedup"] = per["per_process"]["wall_s"] / max(per["federated"]["wall_s"], 1e-9)
        per["speedup_active"] = per["per_process"]["active_s"] / max(per["federated"]["active_s"], 1e-9)
        per["speedup_e2e"] = per["per_process"]["e2e_s"] / max(per["federated"]["e2e_s"], 1e-9)
        per["speedup_per_repeat"] = ratios
        per["speedup_median_of_pairs"] = median(ratios)
        per["speedup_min_max"] = [min(ratios), max(ratios)] if ratios else []
        out[modality] = per
    return out


def plot(result: dict[str, Any], path: Path) -> Path | None:
    from omnieval.perf._common import pyplot

    plt = pyplot()
    if plt is None:
        return None
    summ = result["summary"]
    mods = list(summ)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
    width = 0.38
    for ax, key, label in zip(axes, ("wall_s", "output_tokens_per_s", "engine_utilisation"),
                              ("inference wall time (s)", "output tokens / s", "engine utilisation"), strict=True):  # fmt: skip
        for j, mode in enumerate(("per_process", "federated")):
            vals = [summ[m][mode][key] for m in mods]
            ax.bar([i + (j - 0.5) * width for i in range(len(mods))], vals, width, label=mode.replace("_", "-"))
        ax.set_xticks(range(len(mods)), mods)
        ax.set_title(label)
    axes[0].legend()
    sp = ", ".join(f"{m}: {summ[m]['speedup']:.2f}x" for m in mods)
    fig.suptitle(
        f"federated vs per-process (same {summ[mods[0]]['per_process']['threads_total']} threads) — speedup {sp}"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
