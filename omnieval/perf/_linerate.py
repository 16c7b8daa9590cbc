"""Line rate: the pool against the INSTANT OpenAI server (no model), beside a raw async HTTP client.

The instant server (``serving._instant``) answers every chat completion at once, so every microsecond measured is
client or orchestration cost. The reference is a bare aiohttp loop posting the exact request bodies the pool sends
(pre-encoded) and parsing the JSON answers — the fastest a Python client on this machine gets. The pool runs the
same requests through ``run_suite`` (Records, client actors, routing, adaptive limits, checkpoint): once with the
server as an external endpoint (engine ``openai``) and once as a managed replica (engine ``instant``, the replica
owns the process and publishes its endpoint). Throughput is records ÷ ``inference_s``; latency at concurrency 1 is
each Record's dispatch-to-response time against the raw client's request time.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from omnieval.core import Record, SuiteConfig
from omnieval.perf._common import median, pct

MAX_TOKENS = 8


def _bodies(records: list[Record], served_model_name: str) -> list[bytes]:
    from serving import GenerationRequest, chat_payload, to_openai

    out = []
    for r in records:
        req = GenerationRequest(request_id=str(r.index), messages=to_openai(r.messages), options=r.generation_options)
        out.append(json.dumps(chat_payload(req, served_model_name)).encode())
    return out


async def _raw(url: str, bodies: list[bytes], concurrency: int) -> dict[str, Any]:
    import aiohttp

    queue = list(reversed(bodies))
    lat: list[float] = []
    errors = 0
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def worker() -> None:
            nonlocal errors
            while queue:
                body = queue.pop()
                t0 = time.monotonic()
                async with session.post(url + "/chat/completions", data=body, headers=headers) as r:
                    data = json.loads(await r.read())
                if r.status != 200 or not data["choices"][0]["message"]["content"]:
                    errors += 1
                lat.append(time.monotonic() - t0)

        t0 = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.monotonic() - t0
    return {"wall_s": wall, "records": len(lat), "errors": errors, "latency_s": lat}


def _suite(name: str, n: int, model: dict[str, Any], pool: dict[str, Any]) -> SuiteConfig:
    return SuiteConfig.model_validate({
        "name": f"linerate-{name}", "models": [model], "benchmarks": [{"name": name, "limit": n}],
        "generation": {"max_tokens": MAX_TOKENS}, "pool": pool, "cache": {"enabled": False},
    })  # fmt: skip


def _through_pool(suite: SuiteConfig) -> dict[str, Any]:
    from omnieval._runner import run_suite

    with tempfile.TemporaryDirectory(prefix="omnieval-bench-linerate-") as out:
        res = run_suite(suite, output_dir=out, show_progress=False)
        recs = res.records  # read back from the run directory before it goes
    return {"wall_s": res.manifest.timings["inference_s"], "records": len(recs),
            "errors": sum(1 for r in recs if r.error is not None or r.output is None),
            "latency_s": [r.latency or 0.0 for r in recs]}  # fmt: skip


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    rps = [r["records"] / max(r["wall_s"], 1e-9) for r in runs]
    p50 = [pct([x * 1000 for x in r["latency_s"]], 50) for r in runs]
    return {"requests_per_s": median(rps), "requests_per_s_range": [min(rps), max(rps)],
            "p50_ms": median(p50), "p50_ms_range": [min(p50), max(p50)],
            "p99_ms": median([pct([x * 1000 for x in r["latency_s"]], 99) for r in runs]),
            "records": [r["records"] for r in runs], "errors": sum(r["errors"] for r in runs)}  # fmt: skip


def line_rate(*, requests: int, seq_requests: int, repeats: int, clients: int, chunk_size: int,
              log: Any = print) -> dict[str, Any]:  # fmt: skip
    """Raw vs pool (external endpoint and managed replica), saturated and at concurrency 1, ``repeats`` times with
    the order rotated; medians with their range."""
    from cluster import connect
    from omnieval._plan import build_records
    from omnieval.perf._common import shutdown_ray
    from omnieval.perf._synthetic import register_synthetic
    from serving import ManagedServer

    tmp = Path(tempfile.mkdtemp(prefix="omnieval-bench-linerate-data-"))
    name = register_synthetic(requests, tmp, max_tokens=MAX_TOKENS)
    server = ManagedServer("instant-bench", [sys.executable, "-m", "serving._instant", "--host", "{host}", "--port",
                                             "{port}"], bind_all=False)  # fmt: skip
    server.launch()
    asyncio.run(server.wait_ready(60))
    url = server.local_url + "/v1"
    external = {"name": "instant-external", "engine": "openai", "replicas": 1, "resources": {"num_cpus": 0},
                "source": {"kind": "endpoint", "base_url": url, "served_model_name": "instant"}}  # fmt: skip
    managed = {"name": "instant-managed", "engine": "instant", "replicas": 1, "resources": {"num_cpus": 0},
               "source": {"kind": "path", "path": "/dev/null"}}  # fmt: skip
    sat = {"clients": clients, "chunk_size": chunk_size, "max_inflight_per_replica": 256}
    one = {"clients": 1, "chunk_size": 1, "max_inflight_per_replica": 1, "initial_inflight_per_replica": 1}
    records, _ = build_records(_suite(name, requests, external, sat))
    bodies = _bodies(records, "instant")
    modes: dict[str, Any] = {
        "raw_c1": lambda: asyncio.run(_raw(url, bodies[:seq_requests], 1)),
        "raw_c64": lambda: asyncio.run(_raw(url, bodies, 64)),
        "pool_external_c1": lambda: _through_pool(_suite(name, seq_requests, external, one)),
        "pool_external_saturated": lambda: _through_pool(_suite(name, requests, external, sat)),
        "pool_managed_saturated": lambda: _through_pool(_suite(name, requests, managed, sat)),
    }
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in modes}
    started = bool(connect(None).get("started"))
    try:
        order = list(modes)
        for rep in range(repeats):
            for mode in order[rep % len(order):] + order[: rep % len(order)]:
                r = modes[mode]()
                runs[mode].append(r)
                log(f"[repeat {rep + 1}/{repeats}] {mode}: {r['records'] / max(r['wall_s'], 1e-9):,.0f} req/s, "
                    f"p50 {pct([x * 1000 for x in r['latency_s']], 50):.2f} ms, errors {r['errors']}")  # fmt: skip
    finally:
        shutdown_ray(started)
        server.stop()
    out = {k: _summary(v) for k, v in runs.items()}
    raw = out["raw_c64"]["requests_per_s"]
    pairs = [p["records"] / p["wall_s"] / (r["records"] / r["wall_s"])
             for p, r in zip(runs["pool_external_saturated"], runs["raw_c64"], strict=True)]  # fmt: skip
    return {
        "note": "INSTANT server (no model): all latency is client and orchestration cost",
        "setup": {"requests": requests, "seq_requests": seq_requests, "clients": clients, "chunk_size": chunk_size,
                  "max_tokens": MAX_TOKENS, "repeats": repeats},
        **out,
        "pool_over_raw": out["pool_external_saturated"]["requests_per_s"] / raw if raw else 0.0,
        "pool_over_raw_paired_range": [min(pairs), max(pairs)] if pairs else [],
        "managed_over_raw": out["pool_managed_saturated"]["requests_per_s"] / raw if raw else 0.0,
        "added_p50_ms_c1": out["pool_external_c1"]["p50_ms"] - out["raw_c1"]["p50_ms"],
    }
