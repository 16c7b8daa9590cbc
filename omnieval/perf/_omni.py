"""``omnieval bench federated --config``: federated vs conventional evaluation per modality, the paper's Table 7.

One invocation, three modes over the same benchmarks, order rotated between repeats so drift hits every mode:

* ``conventional_sequential`` — each framework evaluates its benchmark with its own in-process model, one process
  after another (``_conventional.py``); end to end = first spawn → last exit;
* ``conventional_concurrent`` — the same processes at once, each pinned to its share of the cores;
* ``federated`` — ``run_suite`` on the suite: one pool serves every benchmark at once; end to end = Ray start-up
  (measured once, charged to every repeat) + the whole run (replica start-up, inference, scoring, artifact);
* ``federated_same_engine`` — pooling alone: every model on the conventional runners' own engine (transformers),
  one federated run per modality as each conventional job runs alone; its overall row is their sum.

Per modality, a conventional job's own process wall is compared with the federated run's time to that modality's
last result (from the run's start, so the federated side pays all of the pool's start-up in every row), and with
the same-engine run of that modality alone. Each replica is judged from its engine's own counters against a
calibrated roofline (``_roofline``), and the run's floor on this machine bounds the speedup it can show. The engine's
own batching gain (output tok/s at 16 concurrent requests vs 1, ``_engine_probe.batching_gain``) is measured on the
live federated replica after the first federated run and printed beside the speedups. The optional
``same_engine_suite`` adds today's per-process vs federated comparison on identical llama.cpp engines.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict

from omnieval.perf._common import median
from omnieval.perf._conventional import ConventionalJob, check_interpreters, plan_jobs, run_jobs

Mode = Literal["conventional_sequential", "conventional_concurrent", "federated", "federated_same_engine"]
MODES: tuple[Mode, ...] = ("conventional_sequential", "conventional_concurrent", "federated", "federated_same_engine")
BASELINES: tuple[Mode, ...] = ("conventional_sequential", "conventional_concurrent")
FEDERATED: tuple[Mode, ...] = ("federated", "federated_same_engine")


class ConventionalEntry(ConventionalJob):
    modality: Literal["text", "image", "video", "audio"]
    """The row this benchmark belongs to."""


class FederatedBenchConfig(BaseModel):
    """``examples/bench_federated.yaml``: paths are relative to the file."""

    model_config = ConfigDict(extra="forbid")
    suite: str
    """The federated suite: its pool serves every benchmark below at once."""
    same_engine_suite: str | None = None
    """A llama.cpp suite for the per-process vs federated comparison on identical engines (pooling alone)."""
    same_engine_federated: str | None = None
    """The federated suite again with every model on the engine the conventional runners use in-process
    (transformers): a ``federated_same_engine`` row per modality that differs from conventional only by pooling.
    Each modality runs as its own federated run, as each conventional job runs alone."""
    conventional: list[ConventionalEntry]
    """One entry per benchmark of ``suite``: how it is evaluated conventionally."""
    probe_model: str | None = None
    """Suite model whose replica's batching gain is measured (default: the first vLLM model)."""
    calibration: dict[str, str | list[str]] = {}
    """Engine -> ``omnieval bench calibrate`` JSON (relative to this file), or a list of them measured on different
    CPUs: each replica's roofline bound, from the file measured on the benched machine's kind of CPU."""


def load_config(path: str | Path) -> tuple[FederatedBenchConfig, Path, Path | None]:
    p = Path(path)
    cfg = FederatedBenchConfig.model_validate(yaml.safe_load(p.read_text()))
    same = (p.parent / cfg.same_engine_suite).resolve() if cfg.same_engine_suite else None
    return cfg, (p.parent / cfg.suite).resolve(), same


def _modes(rows: list[dict[str, Any]]) -> list[Mode]:
    return [m for m in MODES if any(r["mode"] == m for r in rows)]


def _probe(model: str | None) -> Any:
    def probe(replicas: list[Any]) -> dict[str, Any] | None:
        from omnieval.perf._engine_probe import batching_gain

        for r in replicas:
            if r.endpoint is not None and (r.model == model or (model is None and r.engine == "vllm")):
                gain = batching_gain(r.endpoint.base_url, r.endpoint.served_model_name, api_key=r.endpoint.api_key)
                return {"replica": r.replica_id, "model": r.model, "engine": r.engine, **gain}
        return None

    return probe


def calibrate_here(cfg: FederatedBenchConfig, suite: Any, out: Path, log: Any = print) -> dict[str, Path]:
    """Measure each calibrated engine on this machine, on the suite's own model for it (``bench calibrate``'s
    measurement, its JSON written to ``out``): a bound is only this CPU's when its profile was measured here."""
    from omnieval.perf._calibrate import measure_engine
    from omnieval.perf._common import machine_context, write_json

    paths: dict[str, Path] = {}
    for engine in cfg.calibration:
        model = next((m for m in suite.models if m.engine == engine), None)
        if model is None or model.source.kind != "path":
            raise ValueError(f"--calibrate: the suite has no {engine} model with a local path to calibrate")
        model_dir = Path(str(model.source.path)).expanduser()
        log(f"calibrating {engine} on this machine ({model_dir}) ...")
        if engine not in ("vllm", "transformers"):
            raise ValueError(f"--calibrate: no in-bench calibration for engine {engine!r} (vllm, transformers); "
                             f"run `omnieval bench calibrate --engine {engine}` and name its JSON in calibration")  # fmt: skip
        threads = int((model.engine_kwargs or {}).get("threads") or 1)
        res = measure_engine(engine, model_dir, threads=threads, log=log)
        paths[engine] = write_json(out / f"calibration-{engine}.json", {"bench": "calibrate",
                                                                         "context": machine_context(), **res})  # fmt: skip
        log(f"  wrote {paths[engine]}")
    return paths


def bench_omni(config: str | Path, *, repeats: int = 3, cpus: int, log: Any = print,
               modes: list[str] | None = None, calibrate_to: Path | None = None) -> dict[str, Any]:  # fmt: skip
    """``calibrate_to``: measure the roofline's profiles on this machine first (into that directory) instead of
    using the config's calibration files."""
    from cluster import connect, starts_local_ray
    from omnieval._suite import load_suite
    from omnieval.perf._common import no_cache, shutdown_ray
    from omnieval.perf._federated import bench_federated, run_federated

    cfg, suite_path, same_path = load_config(config)
    suite = no_cache(load_suite(suite_path))
    same_fed = no_cache(load_suite(Path(config).parent / cfg.same_engine_federated)) if cfg.same_engine_federated else None
    if modes is not None and (bad := sorted(set(modes) - set(MODES))):
        raise ValueError(f"--modes: unknown {bad}; choose from {list(MODES)}")
    modes = [m for m in MODES if (m != "federated_same_engine" or same_fed is not None)
             and (modes is None or m in modes)]  # fmt: skip
    if any(m.startswith("conventional") for m in modes):
        check_interpreters(list(cfg.conventional), str(config))
    seq_jobs = plan_jobs(list(cfg.conventional), suite_path, cpus=cpus, concurrent=False)
    conc_jobs = plan_jobs(list(cfg.conventional), suite_path, cpus=cpus, concurrent=True)
    missing = sorted({b.key for b in suite.benchmarks} - {j["key"] for j in seq_jobs})
    if missing:
        raise ValueError(f"{config}: conventional has no entry for suite benchmarks {missing}")
    from omnieval.perf._common import cpu_identity
    from omnieval.perf._roofline import diagnose, load_profiles, pick_calibration

    here = cpu_identity()
    calibration = {e: pick_calibration([Path(config).parent / f for f in (fs if isinstance(fs, list) else [fs])], here)
                   for e, fs in cfg.calibration.items()}  # fmt: skip
    if calibrate_to is not None:  # before Ray and the pool: the engines are measured alone
        calibration.update(calibrate_here(cfg, suite, calibrate_to, log))
    # Records carry the suite key; conventional results the entry's name
    modality = {n: j["modality"] for j in seq_jobs for n in (j["key"], j["benchmark"])}
    rows: list[dict[str, Any]] = []
    probe_result: dict[str, Any] | None = None
    # each federated run starts its own Ray, as `omnieval run` does (its engine servers loading meanwhile); only
    # where the bench joins a cluster it did not start is that one Ray start charged to every run
    own_ray = starts_local_ray(suite.ray)
    t0 = time.monotonic()
    started = False if own_ray else bool(connect(suite.ray).get("started"))
    ray_init_s = 0.0 if own_ray else time.monotonic() - t0
    try:
        for rep in range(repeats):
            order = list(modes) if rep % 2 == 0 else list(reversed(modes))
            for mode in order:
                log(f"[repeat {rep + 1}/{repeats}] {mode} ...")
                if mode == "federated":
                    probe = _probe(cfg.probe_model) if probe_result is None else None
                    r = run_federated(suite, [b.key for b in suite.benchmarks], probe=probe, own_ray=own_ray)
                    probe_result = probe_result or r.get("probe")
                    row = _federated_row(r, rep, ray_init_s, modality)
                elif mode == "federated_same_engine":
                    assert same_fed is not None
                    row = _same_engine_row(same_fed, rep, ray_init_s, modality, log, own_ray)
                else:
                    c = run_jobs(seq_jobs if mode == "conventional_sequential" else conc_jobs,
                                 concurrent=mode == "conventional_concurrent", log=log)  # fmt: skip
                    row = _conventional_row(mode, c, rep, modality)
                rows.append(row)
                log(f"    {mode}: end to end {row['e2e_s']:.1f} s, inference {row['inference_s']:.1f} s, "
                    f"{row['output_tokens']} output tokens, {row['records']} records")  # fmt: skip
    finally:
        shutdown_ray(started)
    same = None
    if same_path is not None and "conventional_sequential" in modes:
        log(f"same-engine comparison ({same_path.name}) ...")
        same = bench_federated(load_suite(same_path), threads_total=cpus, repeats=repeats, log=log)
    profiles = load_profiles(calibration)
    paths = {**checkpoints(suite), **(checkpoints(same_fed) if same_fed is not None else {})}
    for r in rows:
        if r["mode"] == "federated":
            r["diagnosis"] = diagnose(r, profiles, cpus, here, checkpoints(suite))
        for sub in (r.get("runs") or {}).values():  # the same-engine row's per-modality runs
            sub["diagnosis"] = diagnose(sub, profiles, cpus, here, checkpoints(same_fed))
    fed = [r for r in rows if r["mode"] == "federated"]
    diag = _median_run(fed)["diagnosis"] if fed else None
    se_floor = same_engine_floor(rows, list(cfg.conventional), same_fed, paths, profiles) if same_fed else None
    return {"config": str(config), "suite": str(suite_path), "cpus": cpus, "repeats": repeats,
            "calibration": {e: str(p) for e, p in calibration.items()},
            "ray_init_s": ray_init_s, "rows": rows, "engine_batching": probe_result,
            "summary": summarise(rows), "same_engine": same,
            "diagnosis": diag, "ceiling": ceiling(rows, diag, cpus), "same_engine_floor": se_floor}  # fmt: skip


def checkpoints(suite: Any) -> dict[str, str]:
    """Model name -> the path of its weights, for the suite's models loaded from a local path."""
    return {m.name: m.source.path for m in suite.models if getattr(m.source, "kind", None) == "path"}


def same_engine_floor(rows: list[dict[str, Any]], conventional: list[Any], suite: Any, paths: dict[str, str],
                      profiles: dict[str, dict[str, Any]]) -> dict[str, Any]:  # fmt: skip
    """Per same-engine modality, the least end to end its pool can take on this machine, against its conventional
    job's: Ray's start-up (the in-process job has none), then its models' replicas loaded (no faster than the
    conventional built-in job that imports the same engine and loads the same weights alone in one process; the
    engine's in-process construction after its imports where no such job exists), then the node roofline of the
    work its replicas did (``_roofline.node_bound``, medians over repeats). A floor above the conventional job's end
    to end says pooling cannot come out ahead on this hardware whatever the pool does; the job's own inference
    against the same roofline says how much of it pooling could ever win."""
    from omnieval.perf._roofline import same_checkpoint

    conv = [r for r in rows if r["mode"] == "conventional_sequential"]
    same = [r for r in rows if r["mode"] == "federated_same_engine" and r.get("runs")]
    if not conv or not same:
        return {}

    def expand(p: str) -> str:
        return str(Path(p).expanduser().resolve())

    builtin_loads: dict[str, list[float]] = {}  # weights path -> load times of built-in jobs on them
    for r in conv:
        for j in r.get("jobs") or []:
            entry = next((e for e in conventional if e.benchmark == j["benchmark"]), None)
            if entry is not None and entry.runner == "builtin" and j.get("load_s") is not None:
                builtin_loads.setdefault(expand(entry.pretrained), []).append(float(j["load_s"]))
    by_key = {b.key: b for b in suite.benchmarks}
    out: dict[str, Any] = {}
    for mod in same[0]["runs"]:
        runs = [r["runs"][mod] for r in same if mod in r["runs"]]
        models = sorted({m for k in runs[0].get("benchmarks") or [] if k in by_key
                         for m in (by_key[k].models or [x.name for x in suite.models])})  # fmt: skip
        loads, how = [], []
        for m in models:
            path = paths.get(m)
            if path is not None and builtin_loads.get(expand(path)):
                loads.append(median(builtin_loads[expand(path)]))
                how.append(f"{m}: the built-in conventional job's own load of it")
                continue
            engine = next((x.engine for x in suite.models if x.name == m), None)
            prof = profiles.get(engine or "")
            if prof is not None and prof.get("startup_s") is not None:
                loads.append(float(prof["startup_s"]))
                mine = same_checkpoint(prof, path)
                how.append(f"{m}: {engine}'s construction in process after its imports"
                           + ("" if mine else " (calibrated on another checkpoint)"))  # fmt: skip
        nodes = [((x.get("diagnosis") or {}).get("node") or {}).get("bound_s") for x in runs]
        if not loads or any(n is None for n in nodes):
            out[mod] = {"floor_s": None, "why": "no calibration or load time for its models"}
            continue
        ray_s = median([float(x["ray_init_s"]) for x in runs])
        node_s = median([float(n) for n in nodes])  # type: ignore[arg-type]
        c_e2e = median([r["by_modality"][mod]["e2e_s"] for r in conv if mod in r["by_modality"]] or [0.0])
        c_inf = median([r["by_modality"][mod]["inference_s"] for r in conv if mod in r["by_modality"]] or [0.0])
        fl = ray_s + max(loads) + node_s
        out[mod] = {"floor_s": fl, "ray_init_s": ray_s, "load_s": max(loads), "load_from": how, "node_bound_s": node_s,
                    "conventional_e2e_s": c_e2e, "conventional_inference_s": c_inf,
                    "conventional_efficiency": node_s / c_inf if c_inf else None,
                    "federated_e2e_s": median([float(x["e2e_s"]) for x in runs]),
                    "possible": fl <= c_e2e}  # fmt: skip
    return out


PAPER_BEST = 2.8
"""The paper's best end-to-end speedup row (Table 7)."""


def ceiling(rows: list[dict[str, Any]], diag: dict[str, Any] | None, cpus: int | None = None) -> dict[str, Any] | None:
    """The most end-to-end speedup this machine allows over the sequential baseline: its median end to end over the
    federated run's floor (``_roofline.floor``, median repeat); beside it, the floor the paper's best row needs.

    And what the run's own CPU work allows (``work_*``): on a CPU node no schedule ends before the node has done
    the CPU work the run did (every process's kernel-counted CPU seconds over its cores). The floor above counts
    only the critical engine's load and roofline; this one counts the frameworks', Ray's, the clients' and the other
    engines' work too, as this run did it. Above the paper's need, that run's work rules it out; less work (not a
    better schedule) is then the only way there."""
    seq = [r["e2e_s"] for r in rows if r["mode"] == "conventional_sequential"]
    fl = ((diag or {}).get("floor") or {}).get("floor_s")
    if not seq or not fl:
        return None
    base = median(seq)
    out: dict[str, Any] = {"sequential_e2e_s": base, "floor_s": fl, "best_speedup_e2e": base / fl,
                           "paper_best": PAPER_BEST, "paper_best_needs_s": base / PAPER_BEST,
                           "possible": base / fl >= PAPER_BEST}  # fmt: skip
    fed = [r for r in rows if r["mode"] == "federated" and r.get("cpu_s")]
    if fed and cpus:
        work = float(_median_run(fed)["cpu_s"])
        out.update(cpus=cpus, work_core_s=work, work_floor_s=work / cpus, best_speedup_at_this_work=base * cpus / work,
                   paper_best_needs_core_s=base / PAPER_BEST * cpus)  # fmt: skip
    return out


def _median_run(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The federated repeat whose end-to-end time is the median one (the one the report details)."""
    ordered = sorted(rows, key=lambda r: r["e2e_s"])
    return ordered[(len(ordered) - 1) // 2]


def _total_cpu(parts: list[Any]) -> float | None:
    """The parts' CPU seconds summed; None when any part was not measured (a partial sum would read as less work)."""
    return sum(float(x) for x in parts) if parts and None not in parts else None


def _conventional_row(mode: str, c: dict[str, Any], rep: int, modality: dict[str, str]) -> dict[str, Any]:
    per: dict[str, dict[str, float]] = {}
    for j in c["jobs"]:
        m = per.setdefault(
            modality[j["benchmark"]], {"e2e_s": 0.0, "inference_s": 0.0, "output_tokens": 0, "records": 0}
        )
        m["e2e_s"] += j["e2e_s"]
        m["inference_s"] += j["inference_s"]
        m["output_tokens"] += j["output_tokens"]
        m["records"] += j["records"]
        if j.get("cpu_s") is not None:
            m["cpu_s"] = m.get("cpu_s", 0.0) + float(j["cpu_s"])
    tokens = sum(j["output_tokens"] for j in c["jobs"])
    cpu_s = _total_cpu([j.get("cpu_s") for j in c["jobs"]])
    return {
        "mode": mode, "repeat": rep, "e2e_s": c["e2e_s"], "inference_s": c["inference_s"], "output_tokens": tokens,
        "cpu_s": cpu_s,
        "records": sum(j["records"] for j in c["jobs"]), "errors": sum(j["errors"] for j in c["jobs"]),
        "output_tokens_per_s": tokens / max(c["inference_s"], 1e-9),
        "engine_utilisation": c["inference_s"] / max(c["e2e_s"], 1e-9), "by_modality": per,
        "jobs": [{k: v for k, v in j.items() if k != "predictions"} for j in c["jobs"]],
    }  # fmt: skip


def _federated_row(r: dict[str, Any], rep: int, ray_init_s: float, modality: dict[str, str]) -> dict[str, Any]:
    """``ray_init_s``: the bench's one Ray start, charged to every run; a run that started its own Ray
    (``ray_inside``) has its own start in its times already."""
    charged = 0.0 if r.get("ray_inside") else ray_init_s
    if r.get("ray_inside") and r.get("ray_init_s") is not None:
        ray_init_s = float(r["ray_init_s"])
    e2e = charged + r["e2e_s"]
    per: dict[str, dict[str, float]] = {}
    for bench, d in r["by_benchmark"].items():
        m = per.setdefault(
            modality.get(bench, "text"), {"e2e_s": 0.0, "inference_s": 0.0, "output_tokens": 0, "records": 0}
        )
        done = r["done_at"].get(bench)
        if done is not None:  # time to this modality's last result, from the run's start (+ Ray start-up)
            m["e2e_s"] = max(m["e2e_s"], charged + done - r["t_start"])
            m["inference_s"] = max(m["inference_s"], done - r["t_inference_start"])
        m["output_tokens"] += d["output_tokens"]
        m["records"] += d["records"]
    engines = r["engines"]
    nc = r.get("node_cpu") or {}
    return {
        "mode": "federated", "repeat": rep, "e2e_s": e2e, "inference_s": r["wall_s"], "ray_init_s": ray_init_s,
        "cpu_s": nc.get("busy_core_s"),  # the whole node's over the run: every process the run started, and any other
        "output_tokens": r["output_tokens"], "records": r["records"], "errors": r["errors"],
        "output_tokens_per_s": r["output_tokens"] / max(r["wall_s"], 1e-9),
        "engine_utilisation": r["wall_s"] / max(e2e, 1e-9), "pool_up_s": r["pool_up_s"], "by_modality": per,
        "engines": engines, "replica_usage": r.get("replica_usage"), "timeline": r.get("timeline"),
        "timings": r.get("timings"), "node_cpu": r.get("node_cpu"),
    }  # fmt: skip


def _same_engine_row(suite: Any, rep: int, ray_init_s: float, modality: dict[str, str], log: Any,
                     own_ray: bool = False) -> dict[str, Any]:  # fmt: skip
    """Pooling alone, per modality as the conventional jobs run: one federated run per modality (its benchmarks,
    the replicas they need, Ray's start-up charged to each), so a modality's row is its own pool's whole run against
    its own in-process job; the overall row is their sum, as the sequential baseline's is the sum of its jobs."""
    from omnieval.perf._federated import run_federated

    groups: dict[str, list[str]] = {}
    for b in suite.benchmarks:
        groups.setdefault(modality.get(b.key, modality.get(b.name, "text")), []).append(b.key)
    runs: dict[str, dict[str, Any]] = {}
    for mod, keys in groups.items():
        sub = _federated_row(run_federated(suite, keys, own_ray=own_ray), rep, ray_init_s, modality)
        runs[mod] = {**sub, "mode": "federated_same_engine", "benchmarks": keys}
        log(f"      {mod} ({', '.join(keys)}): end to end {sub['e2e_s']:.1f} s, inference {sub['inference_s']:.1f} s")
    per = {mod: {"e2e_s": r["e2e_s"], "inference_s": r["inference_s"], "output_tokens": r["output_tokens"],
                 "records": r["records"], "cpu_s": r.get("cpu_s")} for mod, r in runs.items()}  # fmt: skip
    cpu_s = _total_cpu([r.get("cpu_s") for r in runs.values()])
    e2e, inf = sum(r["e2e_s"] for r in runs.values()), sum(r["inference_s"] for r in runs.values())
    tokens = sum(r["output_tokens"] for r in runs.values())
    if own_ray:
        ray_init_s = sum(r["ray_init_s"] for r in runs.values()) / max(1, len(runs))
    return {
        "mode": "federated_same_engine", "repeat": rep, "e2e_s": e2e, "inference_s": inf, "ray_init_s": ray_init_s,
        "cpu_s": cpu_s, "output_tokens": tokens, "records": sum(r["records"] for r in runs.values()),
        "errors": sum(r["errors"] for r in runs.values()), "output_tokens_per_s": tokens / max(inf, 1e-9),
        "engine_utilisation": inf / max(e2e, 1e-9), "by_modality": per, "runs": runs,
    }  # fmt: skip


def _ratio(rows: list[dict[str, Any]], base: str, key: str, modality: str | None = None,
           target: str = "federated") -> dict[str, Any]:  # fmt: skip
    """Ratio of medians (base ÷ target) with the per-repeat paired range."""

    def val(r: dict[str, Any]) -> float | None:
        v = r[key] if modality is None else r["by_modality"].get(modality, {}).get(key)
        return float(v) if v else None

    b = {r["repeat"]: val(r) for r in rows if r["mode"] == base}
    f = {r["repeat"]: val(r) for r in rows if r["mode"] == target}
    pairs = [b[k] / f[k] for k in b if f.get(k) and b[k]]  # type: ignore[operator]
    bm, fm = median([v for v in b.values() if v]), median([v for v in f.values() if v])
    return {"ratio_of_medians": bm / fm if fm else None, "per_repeat": pairs,
            "range": [min(pairs), max(pairs)] if pairs else []}  # fmt: skip


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"overall": {}, "modalities": {}}
    modes = _modes(rows)
    for mode in modes:
        rs = [r for r in rows if r["mode"] == mode]
        out["overall"][mode] = {k: median([r[k] for r in rs]) for k in
                                ("e2e_s", "inference_s", "output_tokens_per_s", "engine_utilisation", "output_tokens")}  # fmt: skip
    bases = [b for b in BASELINES if b in modes]
    for base in bases:
        if "federated" in modes:
            out["overall"][f"speedup_vs_{base}"] = {k: _ratio(rows, base, k) for k in ("e2e_s", "inference_s")}
        if "federated_same_engine" in modes:
            out["overall"][f"same_engine_speedup_vs_{base}"] = {
                k: _ratio(rows, base, k, target="federated_same_engine") for k in ("e2e_s", "inference_s")}  # fmt: skip
    mods = sorted({m for r in rows for m in r["by_modality"]})
    for m in mods:
        d: dict[str, Any] = {}
        for mode in modes:
            vals = [r["by_modality"][m] for r in rows if r["mode"] == mode and m in r["by_modality"]]
            d[mode] = {k: median([v[k] for v in vals]) for k in ("e2e_s", "inference_s", "output_tokens", "records")}
            d[mode]["output_tokens_per_s"] = d[mode]["output_tokens"] / max(d[mode]["inference_s"], 1e-9)
        for base in bases:
            if "federated" in modes:
                d[f"speedup_vs_{base}"] = {k: _ratio(rows, base, k, m) for k in ("e2e_s", "inference_s")}
            if "federated_same_engine" in modes:
                d[f"same_engine_speedup_vs_{base}"] = {
                    k: _ratio(rows, base, k, m, target="federated_same_engine") for k in ("e2e_s", "inference_s")}  # fmt: skip
        out["modalities"][m] = d
    return out


def plot(result: dict[str, Any], path: Path) -> Path | None:
    from omnieval.perf._common import pyplot

    plt = pyplot()
    if plt is None:
        return None
    s = result["summary"]
    groups = [*s["modalities"], "overall"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    modes = [m for m in MODES if m in s["overall"]]
    width = 0.8 / len(modes)
    for ax, key, title in zip(
        axes, ("e2e_s", "inference_s"), ("end-to-end wall (s)", "inference wall (s)"), strict=True
    ):
        for j, mode in enumerate(modes):
            vals = [(s["overall"] if g == "overall" else s["modalities"][g])[mode][key] for g in groups]
            ax.bar([i + (j - (len(modes) - 1) / 2) * width for i in range(len(groups))], vals, width,
                   label=mode.replace("_", " "))  # fmt: skip
        ax.set_xticks(range(len(groups)), groups)
        ax.set_title(title)
    axes[0].legend(fontsize=8)
    sp = (s["overall"].get("speedup_vs_conventional_sequential") or {}).get("e2e_s", {}).get("ratio_of_medians") or 0.0
    gain = (result.get("engine_batching") or {}).get("ratio")
    fig.suptitle(f"federated vs conventional ({result['cpus']} CPUs, {result['repeats']} repeats): end to end "
                 f"{sp:.2f}x vs sequential" + (f"; engine batching gain 16 vs 1: {gain:.1f}x" if gain else ""))  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    fed = [r for r in result["rows"] if r["mode"] == "federated" and r.get("timeline")]
    if fed:
        from omnieval.perf._roofline import plot_timeline

        plot_timeline(_median_run(fed), path.with_name(path.stem + "-timeline.png"))
    return path


def same_engine_why(res: dict[str, Any]) -> list[str]:
    """Where each same-engine modality's time goes, medians over repeats: the conventional job's start (process,
    imports, weights) and inference one at a time, against the pool's start (Ray, then the replica up: its own load
    inside Serve's deploy), its engine's busy time and the rest (planning, gaps, scoring, the artifact). Pooling can
    only win engine time; its start-up is what it adds."""
    conv = [r for r in res.get("rows", []) if r["mode"] == "conventional_sequential"]
    same = [r for r in res.get("rows", []) if r["mode"] == "federated_same_engine" and r.get("runs")]
    if not conv or not same:
        return []
    lines = ["same engine, where the time goes (medians): conventional = its process's start-up, imports and load + "
             "inference one request at a time; federated = Ray start-up + first replica up (the engine's load inside Serve's "
             "deploy) + the engines' busy time + the rest (planning, gaps, scoring, artifact)"]  # fmt: skip
    for mod in same[0]["runs"]:
        c_e2e = median([r["by_modality"][mod]["e2e_s"] for r in conv if mod in r["by_modality"]] or [0.0])
        c_inf = median([r["by_modality"][mod]["inference_s"] for r in conv if mod in r["by_modality"]] or [0.0])
        runs = [r["runs"][mod] for r in same if mod in r["runs"]]
        f_e2e = median([x["e2e_s"] for x in runs])
        ray_s = median([x["ray_init_s"] for x in runs])
        up = median([x.get("pool_up_s") or 0.0 for x in runs])
        # replicas of a model work side by side: the busiest one's time is the least wall they cover (the sum counted
        # a second replica's work as more time; a mean hid a replica that got no request)
        busy = median([max((e["busy_s"] for e in x.get("engines") or []), default=0.0) for x in runs])
        n_eng = max(len(x.get("engines") or []) for x in runs)
        rest = f_e2e - ray_s - up - busy
        start_gap, engine_gap = ray_s + up - (c_e2e - c_inf), busy - c_inf
        unused = median([sum(1 for u in x.get("replica_usage") or [] if not u.get("requests")) for x in runs])
        if f_e2e <= c_e2e:
            verdict = "the pool is faster"
        elif unused >= 1 and n_eng > 1:
            verdict = (f"{unused:g} of its {n_eng} replicas served no request: every request was sent to the first "
                       "replica up before the other was healthy (a sent request stays on its replica; the first "
                       "requests wait for a sibling only within the start burst's share window, pool._burst), so "
                       "one replica did all the work")  # fmt: skip
        elif engine_gap >= 0:
            verdict = ("the replica's engine time is no shorter than one request at a time in-process (batching "
                       "shares decode steps; a prefill-bound request has few), so nothing wins back the start-up")
        else:
            verdict = "the pool's start-up outweighs the engine time pooling saved"
        lines.append(
            f"  {mod:6s} conventional {c_e2e:.1f} s = start {c_e2e - c_inf:.1f} + inference {c_inf:.1f} | same engine "
            f"{f_e2e:.1f} s = Ray {ray_s:.1f} + replica up {up:.1f} + engine busy {busy:.1f}"
            + (f" (the busiest of {n_eng} replicas)" if n_eng > 1 else "") + f" + rest {rest:.1f} -> "
            f"start-up {start_gap:+.1f} s, engine time {engine_gap:+.1f} s ({c_inf / busy if busy else 0:.2f}x): {verdict}"
        )  # fmt: skip
        if (fl := (res.get("same_engine_floor") or {}).get(mod)) and fl.get("floor_s") is not None:
            lines.append("         " + floor_line(fl))
        c_cpu = [float(v) for r in conv if (v := r["by_modality"].get(mod, {}).get("cpu_s")) is not None]
        f_cpu = [float(x["cpu_s"]) for x in runs if x.get("cpu_s") is not None]
        if c_cpu and f_cpu and res.get("cpus"):
            cc, fc, n = median(c_cpu), median(f_cpu), int(res["cpus"])
            lines.append(
                f"         CPU: the in-process job {cc:.1f} core-s, the pool's run {fc:.1f} core-s over the node "
                f"({fc - cc:+.1f}); on {n} cores the pool's work alone takes {fc / n:.1f} s"
                + (f", more than the job's whole {c_e2e:.1f} s: with that much work no schedule comes out ahead"
                   if fc / n > c_e2e else "")
            )  # fmt: skip
    return lines


def floor_line(fl: dict[str, Any]) -> str:
    """One same-engine modality's floor (``same_engine_floor``) and what it says about reaching 1x."""
    eff = fl.get("conventional_efficiency")
    head = (f"floor {fl['floor_s']:.1f} s = Ray {fl['ray_init_s']:.1f} + replica load {fl['load_s']:.1f} "
            f"({'; '.join(fl['load_from'])}) + node roofline {fl['node_bound_s']:.1f} s of its work (the in-process "
            f"job's inference, {fl['conventional_inference_s']:.1f} s, ran at {eff:.2f} of that roofline)")  # fmt: skip
    if not fl["possible"]:
        return (f"{head} -> above the conventional job's {fl['conventional_e2e_s']:.1f} s: no pool comes out ahead "
                "of it on this machine")  # fmt: skip
    return (f"{head} -> 1x is possible in principle (the job takes {fl['conventional_e2e_s']:.1f} s); the pool "
            f"took {fl['federated_e2e_s'] - fl['floor_s']:.1f} s over its floor")  # fmt: skip


def report(res: dict[str, Any]) -> list[str]:
    """The printed table: every speedup beside its baseline, ratio of medians and per-repeat range."""
    s = res["summary"]
    lines = []

    def fmt(r: dict[str, Any]) -> str:
        rm = r["ratio_of_medians"]
        rng = r["range"]
        return f"{rm:.2f}x ({rng[0]:.2f}-{rng[1]:.2f})" if rm and rng else "n/a"

    complete = all(m in s["overall"] for m in ("conventional_sequential", "federated"))
    for g, d in [*s["modalities"].items(), ("overall", s["overall"])] if complete else []:
        seq, vs_cc = d["speedup_vs_conventional_sequential"], d.get("speedup_vs_conventional_concurrent")
        cols = [(name, d[m]) for name, m in (("sequential", "conventional_sequential"),
                                             ("concurrent", "conventional_concurrent"), ("federated", "federated"))
                if m in d]  # the concurrent run is absent when --modes left it out  # fmt: skip
        lines.append(
            f"{g:8s} e2e: " + " | ".join(f"{name} {c['e2e_s']:.1f} s" for name, c in cols)
            + f" -> {fmt(seq['e2e_s'])} vs sequential" + (f", {fmt(vs_cc['e2e_s'])} vs concurrent" if vs_cc else "")
            + "; inference: " + " / ".join(f"{c['inference_s']:.1f}" for _, c in cols) + f" s -> {fmt(seq['inference_s'])}"
            + "; tok/s " + " / ".join(f"{c['output_tokens_per_s']:.1f}" for _, c in cols)
        )  # fmt: skip
    if not complete:
        for g, d in [*s["modalities"].items(), ("overall", s["overall"])]:
            lines.append(f"{g:8s} " + " | ".join(f"{m} e2e {v['e2e_s']:.1f} s, inference {v['inference_s']:.1f} s"
                                                  for m, v in d.items() if m in MODES))  # fmt: skip
    if "federated_same_engine" in s["overall"] and "conventional_sequential" in s["overall"]:
        lines.append("same engine (the pool's transformers replicas vs the conventional runners' in-process "
                     "transformers): pooling alone")  # fmt: skip
        for g, d in [*s["modalities"].items(), ("overall", s["overall"])]:
            cs, fs = d["conventional_sequential"], d["federated_same_engine"]
            vs_conc = d.get("same_engine_speedup_vs_conventional_concurrent")  # absent when --modes left it out
            lines.append(
                f"{g:8s} e2e: sequential {cs['e2e_s']:.1f} s | federated same engine {fs['e2e_s']:.1f} s -> "
                f"{fmt(d['same_engine_speedup_vs_conventional_sequential']['e2e_s'])} vs sequential"
                + (f", {fmt(vs_conc['e2e_s'])} vs concurrent" if vs_conc else "")
                + f"; inference {cs['inference_s']:.1f} / {fs['inference_s']:.1f} s"
            )  # fmt: skip
        lines += same_engine_why(res)
    o = s["overall"]
    lines.append("engine utilisation (inference share of the end-to-end wall): " + ", ".join(
        f"{m} {o[m]['engine_utilisation']:.2f}" for m in MODES if m in o))  # fmt: skip
    from omnieval.perf._roofline import report_lines

    runs = [r for r in res.get("rows", []) if r["mode"] == "federated" and r.get("diagnosis")]
    if runs:
        lines.append("median federated repeat:")
        lines += report_lines(_median_run(runs)["diagnosis"])
    same = [r for r in res.get("rows", []) if r["mode"] == "federated_same_engine" and r.get("runs")]
    if same:
        med = _median_run(same)
        for mod, sub in med["runs"].items():
            if sub.get("diagnosis"):
                lines.append(f"median federated same engine repeat, {mod} run ({', '.join(sub['benchmarks'])}):")
                lines += report_lines(sub["diagnosis"])
    c, fl = res.get("ceiling"), ((res.get("diagnosis") or {}).get("floor") or {})
    if c:
        what = (f"{fl['replica']}'s engine load {fl['load_s']:.1f} s + its roofline {fl['bound_s']:.1f} s"
                if fl["by"] == "replica" else f"the node roofline {fl['node_bound_s']:.1f} s")  # fmt: skip
        start = (f"the later of Ray's start-up {fl['ray_init_s']:.1f} s and {what.split(' + ')[0]} (pre-started: "
                 f"they overlap), + its roofline {fl['bound_s']:.1f} s") if fl.get("prestarted") and fl["by"] == "replica" \
            else f"Ray start-up {fl['ray_init_s']:.1f} s + {what}"  # fmt: skip
        lines.append(
            f"ceiling: the federated run cannot end before {c['floor_s']:.1f} s on this machine ({start}): at most {c['best_speedup_e2e']:.2f}x over the sequential baseline's "
            f"{c['sequential_e2e_s']:.1f} s; the paper's {c['paper_best']}x needs {c['paper_best_needs_s']:.1f} s -> "
            + ("possible here" if c["possible"] else "not possible on this hardware")
        )  # fmt: skip
        if c.get("work_core_s"):
            need = c["paper_best_needs_core_s"]
            lines.append(
                f"ceiling at the run's own CPU work: the median federated repeat kept the node's {c['cpus']} cores "
                f"busy {c['work_core_s']:.0f} core-s (engines, frameworks, Ray, clients: by process above), which "
                f"alone take {c['work_floor_s']:.1f} s: at most {c['best_speedup_at_this_work']:.2f}x with that work; "
                f"{c['paper_best']}x needs it done in {c['paper_best_needs_s']:.1f} s, at most {need:.0f} core-s -> "
                + (f"{c['work_core_s'] - need:.0f} core-s less work needed, however it is scheduled"
                   if c["work_core_s"] > need else "the work fits; the schedule is what is short")
            )  # fmt: skip
    g = res.get("engine_batching")
    if g:
        lines.append(f"engine batching gain ({g['engine']} {g['model']}): {g['tok_s_1']:.1f} tok/s at 1 request, "
                     f"{g['tok_s_saturated']:.1f} at {g['concurrency']} -> {g['ratio']:.2f}x")  # fmt: skip
    return lines
