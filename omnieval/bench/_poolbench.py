"""``omnieval bench pool``: the pool against the engine's own saturated throughput, and per-request overhead.

Ceiling: the same llama-server (same threads, ``--parallel N``) driven directly by N concurrent HTTP clients with
the exact request bodies the pool sends (serving's ``OpenAIEngine``, no Ray). Pool: the same Records through
``run_suite`` (client actors → Serve handle → replica → llama-server), with clients × per-client cap = N so both
sides keep exactly N requests in flight. Ratio = pool tokens/s ÷ ceiling tokens/s.

Overhead: (1) pool latency − direct latency of the *same* request (matched by sample key; an upper bound: the pool
latency also counts time queued in the client for a free slot, and the two runs batch differently), and (2) the clean number: the pool in front of the SIMULATED instant engine
(``time_scale: 0``), where every millisecond of latency is orchestration — at concurrency 1 (one client, one
in-flight request) and saturated (many in flight).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from omnieval._config import SuiteConfig
from omnieval._schema import Record
from omnieval.bench._common import LlamaServer, median, pct


def _key(r: Record) -> str:
    return f"{r.model}/{r.benchmark}/{r.index}"


def _lat_summary(lat_s: list[float]) -> dict[str, float]:
    ms = [x * 1000 for x in lat_s]
    return {"p50_ms": pct(ms, 50), "p99_ms": pct(ms, 99), "mean_ms": sum(ms) / len(ms) if ms else 0.0}


async def _drive(base_url: str, model: str, records: list[Record], concurrency: int) -> dict[str, Any]:
    from serving._messages import to_openai
    from serving._openai import OpenAIEngine
    from serving._types import GenerationRequest

    eng = OpenAIEngine(replica_id="direct", model=model, base_url=base_url + "/v1", slots=concurrency)
    await eng.start()
    queue = list(reversed(records))
    lat: dict[str, float] = {}
    tokens = 0

    async def worker() -> None:
        nonlocal tokens
        while queue:
            r = queue.pop()
            req = GenerationRequest(request_id=_key(r), messages=to_openai(r.messages), options=r.generation_options)
            t0 = time.monotonic()
            res = await eng.generate(req)
            lat[_key(r)] = time.monotonic() - t0
            tokens += res.completion_tokens

    t0 = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.monotonic() - t0
    await eng.shutdown()
    return {"wall_s": wall, "records": len(lat), "output_tokens": tokens, "latency_s": lat}


def direct_ceiling(model_path: Path, model: str, records: list[Record], *, threads: int, parallel: int,
                   ctx_per_slot: int) -> dict[str, Any]:  # fmt: skip
    with LlamaServer(model_path, threads=threads, parallel=parallel, ctx_per_slot=ctx_per_slot) as srv:
        return asyncio.run(_drive(srv.base_url, model, records, parallel))


def through_pool(suite: SuiteConfig) -> dict[str, Any]:
    from omnieval._runner import run_suite
    from omnieval.bench._common import no_cache

    suite = no_cache(suite)
    with tempfile.TemporaryDirectory(prefix="omnieval-bench-pool-") as out:
        res = run_suite(suite, output_dir=out, show_progress=False)
    recs = res.records
    return {
        "wall_s": res.manifest.timings["inference_s"], "records": len(recs),
        "errors": sum(1 for r in recs if r.error is not None),
        "output_tokens": sum(r.output.usage.completion_tokens for r in recs if r.output and r.output.usage),
        "latency_s": {_key(r): r.latency or 0.0 for r in recs}, "pool_up_s": res.manifest.timings.get("pool_up_s"),
    }  # fmt: skip


def _rates(r: dict[str, Any]) -> dict[str, Any]:
    w = max(r["wall_s"], 1e-9)
    return {"wall_s": r["wall_s"], "records": r["records"], "output_tokens": r["output_tokens"],
            "output_tokens_per_s": r["output_tokens"] / w, "requests_per_s": r["records"] / w,
            "latency": _lat_summary(list(r["latency_s"].values()))}  # fmt: skip


def _instant_suite(n: int, clients: int, inflight: int, chunk: int, tmp: Path) -> SuiteConfig:
    from omnieval.bench._synthetic import register_synthetic

    name = register_synthetic(n, tmp)
    return SuiteConfig.model_validate({
        "name": "bench-overhead",
        "models": [{"name": "simulated-instant", "engine": "simulated", "replicas": 1,
                    "source": {"kind": "path", "path": "/dev/null"}, "resources": {"num_cpus": 0},
                    "engine_kwargs": {"time_scale": 0.0, "slots": max(inflight, 1)}}],
        "benchmarks": [{"name": name}], "generation": {"max_tokens": 8},
        "pool": {"clients": clients, "max_inflight_per_replica": inflight, "chunk_size": chunk},
    })  # fmt: skip


def bench_pool(
    suite: SuiteConfig, *, repeats: int = 1, overhead_requests: int = 300, log: Any = print
) -> dict[str, Any]:
    from cluster import connect
    from omnieval._runner import build_records
    from omnieval.bench._common import no_cache, shutdown_ray
    from serving import resolve_model

    suite = no_cache(suite)
    m = suite.models[0]
    if m.engine != "llamacpp":
        raise ValueError("bench pool measures a llama.cpp model against its own llama-server; use engine llamacpp")
    kw = dict(m.engine_kwargs)
    threads, parallel = int(kw.get("threads") or 1), int(kw.get("parallel") or 4)
    kw.update(threads=threads, parallel=parallel)
    one = m.model_copy(update={"replicas": 1, "max_replicas": None, "engine_kwargs": kw})
    # the same concurrency as the direct run: clients x per-client cap == N slots, so neither side queues more
    cap = max(1, parallel // suite.pool.clients)
    psuite = suite.model_copy(update={"models": [one], "pool": suite.pool.model_copy(
        update={"max_inflight_per_replica": cap})})  # fmt: skip
    records, _ = build_records(psuite)
    model_path = resolve_model(one.source)
    assert model_path is not None
    started = bool(connect(suite.ray).get("started"))
    direct_runs, pool_runs = [], []
    try:
        for rep in range(repeats):
            for mode in ("direct", "pool") if rep % 2 == 0 else ("pool", "direct"):
                log(
                    f"[repeat {rep + 1}/{repeats}] {mode}: {len(records)} requests, --parallel {parallel}, -t {threads}"
                )
                if mode == "direct":
                    r = direct_ceiling(model_path, one.name, [x.model_copy(deep=True) for x in records],
                                       threads=threads, parallel=parallel,
                                       ctx_per_slot=int(kw.get("ctx_per_slot") or 2048))  # fmt: skip
                    direct_runs.append(r)
                else:
                    r = through_pool(psuite)
                    pool_runs.append(r)
                log(f"    {r['output_tokens'] / r['wall_s']:.1f} tok/s, wall {r['wall_s']:.1f} s")
        deltas = [p["latency_s"][k] - d["latency_s"][k] for d, p in zip(direct_runs, pool_runs, strict=True)
                  for k in d["latency_s"] if k in p["latency_s"]]  # fmt: skip
        with tempfile.TemporaryDirectory(prefix="omnieval-bench-syn-") as tmp:
            seq = through_pool(_instant_suite(overhead_requests, 1, 1, 1, Path(tmp)))
            sat = through_pool(_instant_suite(overhead_requests, suite.pool.clients, 64, 16, Path(tmp)))
    finally:
        shutdown_ray(started)
    d_tps = median([r["output_tokens"] / r["wall_s"] for r in direct_runs])
    p_tps = median([r["output_tokens"] / r["wall_s"] for r in pool_runs])
    return {
        "setup": {
            "model": one.name,
            "threads": threads,
            "parallel": parallel,
            "requests": len(records),
            "clients": suite.pool.clients,
            "max_inflight_per_replica": cap,
            "pool_in_flight": cap * suite.pool.clients,
        },  # fmt: skip
        "ceiling_direct": [_rates(r) for r in direct_runs],
        "pool": [_rates(r) | {"errors": r["errors"], "pool_up_s": r["pool_up_s"]} for r in pool_runs],
        "median_ceiling_tokens_per_s": d_tps,
        "median_pool_tokens_per_s": p_tps,
        "pool_over_ceiling": p_tps / d_tps if d_tps else 0.0,
        "matched_latency_delta": _lat_summary(deltas) | {"n": len(deltas)},
        "overhead_simulated_instant_engine": {
            "note": "SIMULATED instant engine (time_scale 0): all latency is orchestration",
            "concurrency_1": _rates(seq) | {"amortised_ms_per_request": 1000 * seq["wall_s"] / max(seq["records"], 1)},
            "saturated": _rates(sat) | {"amortised_ms_per_request": 1000 * sat["wall_s"] / max(sat["records"], 1)},
        },
    }
