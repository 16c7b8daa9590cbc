"""``omnieval bench pool``: the pool against the engine's own saturated throughput, and per-request overhead.

Ceiling: the pool's own llama.cpp engine started outside Ray (the identical llama-server command line) driven
directly by N = ``--parallel`` concurrent HTTP clients with the exact request bodies the pool sends, no Ray. Pool: the same Records through
``run_suite`` (client actors → llama-server's port, the depth found by the adaptive limit). Ratio = pool tokens/s
÷ ceiling tokens/s.

Line rate (``_linerate``): the pool against the INSTANT server (no model) beside a raw aiohttp client, saturated
and at concurrency 1 — every millisecond there is client and orchestration cost. Matched latency: pool latency −
direct latency of the *same* request on llama-server (the two runs batch differently, so it is indicative).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from omnieval.core import Record, SuiteConfig
from omnieval.perf._common import median, pct


def _key(r: Record) -> str:
    return f"{r.model}/{r.benchmark}/{r.index}"


def _lat_summary(lat_s: list[float]) -> dict[str, float]:
    ms = [x * 1000 for x in lat_s]
    return {"p50_ms": pct(ms, 50), "p99_ms": pct(ms, 99), "mean_ms": sum(ms) / len(ms) if ms else 0.0}


async def _drive(eng: Any, records: list[Record], concurrency: int) -> dict[str, Any]:
    """``concurrency`` closed-loop workers sending the Records through a started engine's own HTTP client."""
    from serving import GenerationRequest, to_openai

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
    return {"wall_s": wall, "records": len(lat), "output_tokens": tokens, "latency_s": lat}


def direct_ceiling(model_path: Path, model: str, records: list[Record], engine_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The pool's own llama.cpp engine started outside Ray (identical llama-server command line and flags), driven
    by ``--parallel`` concurrent requests: every slot busy, nothing queued."""
    from serving import LlamaCppEngine

    async def go() -> dict[str, Any]:
        eng = LlamaCppEngine(replica_id="direct", model=model, model_path=str(model_path), **engine_kwargs)
        await eng.start()
        try:
            return await _drive(eng, records, int(engine_kwargs["parallel"]))
        finally:
            await eng.shutdown()

    return asyncio.run(go())


def through_pool(suite: SuiteConfig) -> dict[str, Any]:
    from omnieval._runner import run_suite
    from omnieval.perf._common import no_cache

    suite = no_cache(suite)
    with tempfile.TemporaryDirectory(prefix="omnieval-bench-pool-") as out:
        res = run_suite(suite, output_dir=out, show_progress=False)
        recs = res.records  # read back from the run directory before it goes
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


def bench_pool(
    suite: SuiteConfig, *, repeats: int = 3, line_requests: int = 20000, seq_requests: int = 2000, log: Any = print
) -> dict[str, Any]:
    """Line rate (INSTANT server) and ceiling (real llama-server), each mode side by side, order alternated."""
    from cluster import connect
    from omnieval._plan import build_records
    from omnieval.perf._common import no_cache, shutdown_ray
    from omnieval.perf._linerate import line_rate
    from serving import resolve_model

    suite = no_cache(suite)
    m = suite.models[0]
    if m.engine != "llamacpp":
        raise ValueError("bench pool measures a llama.cpp model against its own llama-server; use engine llamacpp")
    kw = dict(m.engine_kwargs)
    threads, parallel = int(kw.get("threads") or 1), int(kw.get("parallel") or 4)
    kw.update(threads=threads, parallel=parallel)
    one = m.model_copy(update={"replicas": 1, "max_replicas": None, "engine_kwargs": kw})
    # the direct run keeps every slot busy (N concurrent); the pool finds its own depth with its adaptive limit
    psuite = suite.model_copy(update={"models": [one]})
    records, _ = build_records(psuite)
    model_path = resolve_model(one.source)
    assert model_path is not None
    lr = line_rate(requests=line_requests, seq_requests=seq_requests, repeats=repeats, clients=suite.pool.clients,
                   chunk_size=64, log=log)  # fmt: skip
    started = bool(connect(suite.ray).get("started"))
    direct_runs, pool_runs = [], []
    try:
        for rep in range(repeats):
            for mode in ("direct", "pool") if rep % 2 == 0 else ("pool", "direct"):
                log(
                    f"[repeat {rep + 1}/{repeats}] {mode}: {len(records)} requests, --parallel {parallel}, -t {threads}"
                )
                if mode == "direct":
                    r = direct_ceiling(model_path, one.name, [x.model_copy(deep=True) for x in records], kw)
                    direct_runs.append(r)
                else:
                    r = through_pool(psuite)
                    pool_runs.append(r)
                log(f"    {r['output_tokens'] / r['wall_s']:.1f} tok/s, wall {r['wall_s']:.1f} s")
    finally:
        shutdown_ray(started)
    deltas = [p["latency_s"][k] - d["latency_s"][k] for d, p in zip(direct_runs, pool_runs, strict=True)
              for k in d["latency_s"] if k in p["latency_s"]]  # fmt: skip
    d_tps = [r["output_tokens"] / r["wall_s"] for r in direct_runs]
    p_tps = [r["output_tokens"] / r["wall_s"] for r in pool_runs]
    pairs = [p / d for p, d in zip(p_tps, d_tps, strict=True) if d]
    return {
        "setup": {"model": one.name, "threads": threads, "parallel": parallel, "requests": len(records),
                  "clients": suite.pool.clients, "max_inflight_per_replica": suite.pool.max_inflight_per_replica},
        "line_rate": lr,
        "ceiling_direct": [_rates(r) for r in direct_runs],
        "pool": [_rates(r) | {"errors": r["errors"], "pool_up_s": r["pool_up_s"]} for r in pool_runs],
        "median_ceiling_tokens_per_s": median(d_tps),
        "median_pool_tokens_per_s": median(p_tps),
        "pool_over_ceiling": median(p_tps) / median(d_tps) if median(d_tps) else 0.0,
        "pool_over_ceiling_paired_range": [min(pairs), max(pairs)] if pairs else [],
        "matched_latency_delta": _lat_summary(deltas) | {"n": len(deltas)},
    }  # fmt: skip


def plot(data: dict[str, Any], path: Path) -> Path | None:
    """Two panels: line rate (requests/s, raw vs pool) and ceiling (tokens/s, direct vs pool)."""
    from omnieval.perf._common import pyplot

    plt = pyplot()
    if plt is None:
        return None
    lr = data["line_rate"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    names = ["raw_c1", "pool_external_c1", "raw_c64", "pool_external_saturated", "pool_managed_saturated"]
    vals = [lr[n]["requests_per_s"] for n in names]
    err = [[v - lr[n]["requests_per_s_range"][0] for n, v in zip(names, vals, strict=True)],
           [lr[n]["requests_per_s_range"][1] - v for n, v in zip(names, vals, strict=True)]]  # fmt: skip
    a.bar(range(len(names)), vals, yerr=err, color=["#999", "#4a7", "#999", "#4a7", "#27a"])
    a.set_xticks(range(len(names)), ["raw c1", "pool c1", "raw c64", "pool ext.", "pool managed"], rotation=20)
    a.set_ylabel("requests/s (median, range)")
    a.set_title(f"line rate, INSTANT server: pool/raw {lr['pool_over_raw']:.2f}")
    b.bar([0, 1], [data["median_ceiling_tokens_per_s"], data["median_pool_tokens_per_s"]], color=["#999", "#4a7"])
    b.set_xticks([0, 1], ["llama-server direct", "pool"])
    b.set_ylabel("output tokens/s (median)")
    b.set_title(f"ceiling, real llama-server: pool/direct {data['pool_over_ceiling']:.2f}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
