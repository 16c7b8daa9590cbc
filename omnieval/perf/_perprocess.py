"""The per-process baseline: how evaluation tools run today, one OS process per benchmark owning its own engine.

Each worker (``python -m omnieval.perf._perprocess JOB RESULT``) builds its benchmark's Records exactly as
``run_suite`` does, starts its own engine in-process (llama-server ``--parallel 1``), and sends the requests one at a
time from a single-threaded loop (lm-eval with batch size 1 against an in-process model). The driver starts every
worker, waits until all engines are up, then releases them together, so the measured wall time is inference only
and engine start-up is reported separately.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from omnieval.core import ModelConfig, SuiteConfig


def per_process_engine_kwargs(model: ModelConfig, threads: int) -> dict[str, Any]:
    """The model's engine options with one batch slot and this process's thread share."""
    kw = dict(model.engine_kwargs)
    if model.engine == "llamacpp":
        kw.update(parallel=1, threads=threads)
    elif model.engine == "simulated":
        kw.update(slots=1)
    else:
        raise ValueError(f"bench federated supports engines llamacpp and simulated, not {model.engine!r}")
    return kw


def jobs_for(suite: SuiteConfig, bench_names: list[str], threads_total: int) -> list[dict[str, Any]]:
    from serving import resolve_model

    pairs = [(m, b) for b in suite.benchmarks if b.name in bench_names for m in suite.models
             if b.models is None or m.name in b.models]  # fmt: skip
    threads = max(1, threads_total // max(1, len(pairs)))
    jobs = []
    for m, b in pairs:
        path = resolve_model(m.source)
        jobs.append({
            "benchmark": b.name, "model": m.name, "engine": m.engine, "model_path": str(path) if path else None,
            "engine_kwargs": per_process_engine_kwargs(m, threads), "threads": threads, "limit": b.limit,
            "prompt": b.prompt, "overrides": b.generation.as_dict(), "generation": suite.generation.model_dump(mode="json"),
        })  # fmt: skip
    return jobs


def run_per_process(jobs: list[dict[str, Any]], *, ready_timeout_s: float = 300.0) -> dict[str, Any]:
    """Spawn one worker per job, start them together once all engines are ready, collect their results."""
    tmp = Path(tempfile.mkdtemp(prefix="omnieval-bench-pp-"))
    procs = []
    t_spawn = time.time()
    try:
        for i, job in enumerate(jobs):
            jp, rp = tmp / f"job{i}.json", tmp / f"result{i}.json"
            jp.write_text(json.dumps(job))
            p = subprocess.Popen([sys.executable, "-m", "omnieval.perf._perprocess", str(jp), str(rp)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
            procs.append((p, rp))
        deadline = time.monotonic() + ready_timeout_s
        for p, _ in procs:
            assert p.stdout is not None
            line = p.stdout.readline().strip()
            if line != "READY" or time.monotonic() > deadline:
                raise RuntimeError(f"per-process worker did not become ready (got {line!r}, exit {p.poll()})")
        t_go = time.time()
        for p, _ in procs:
            assert p.stdin is not None
            p.stdin.write("GO\n")
            p.stdin.flush()
        for p, _ in procs:
            if p.wait() != 0:
                raise RuntimeError(f"per-process worker exited with {p.returncode}")
        t_end = time.time()
        results = [json.loads(rp.read_text()) for _, rp in procs]
    finally:
        for p, _ in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for f in tmp.iterdir():
            f.unlink()
        tmp.rmdir()
    return {"t_go": t_go, "wall_s": max(r["t_done"] for r in results) - t_go, "e2e_s": t_end - t_spawn,
            "workers": results}  # fmt: skip


async def _worker(job: dict[str, Any]) -> dict[str, Any]:
    from omnieval.benchmarks import get_benchmark
    from omnieval.core import GenerationOptions
    from serving import ENGINES, GenerationRequest, to_openai

    spec = get_benchmark(job["benchmark"])
    records = spec.records(model=job["model"], generation=GenerationOptions.model_validate(job["generation"]),
                           limit=job["limit"], prompt=job["prompt"], overrides=job["overrides"])  # fmt: skip
    cls = ENGINES.get(job["engine"])
    kwargs = dict(job["engine_kwargs"])
    if job["model_path"]:
        kwargs["model_path"] = job["model_path"]
    engine = cls(replica_id=f"per-process-{job['benchmark']}", model=job["model"], **kwargs)
    t0 = time.monotonic()
    await engine.start()
    start_s = time.monotonic() - t0
    print("READY", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    t_go = time.time()
    preds: dict[int, str | None] = {}
    lat: list[float] = []
    tokens = errors = 0
    try:
        for r in records:  # sequential, one request at a time: the per-process eval loop
            req = GenerationRequest(request_id=f"{r.model}/{r.benchmark}/{r.index}", messages=to_openai(r.messages),
                                    options=r.generation_options)  # fmt: skip
            t1 = time.monotonic()
            try:
                res = await engine.generate(req)
            except Exception:  # noqa: BLE001 - a failed sample is counted, as the pool records it
                errors += 1
                preds[r.index] = None
                continue
            lat.append(time.monotonic() - t1)
            tokens += res.completion_tokens
            preds[r.index] = res.text
        t_done = time.time()
        busy = engine.stats().busy_s
    finally:
        await engine.shutdown()  # a cleanly stopped server's log is removed with it
    return {"benchmark": job["benchmark"], "model": job["model"], "modality": spec.modality, "records": len(records),
            "errors": errors, "output_tokens": tokens, "t_go": t_go, "t_done": t_done, "wall_s": t_done - t_go,
            "busy_s": busy, "threads": job["threads"], "engine_start_s": start_s, "latencies_s": lat,
            "predictions": preds}  # fmt: skip


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[0]).read_text())
    out = asyncio.run(_worker(job))
    Path(argv[1]).write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
