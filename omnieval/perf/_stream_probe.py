"""One streaming-memory measurement in a fresh process (peak RSS is per process, so each size gets its own).

``python -m omnieval.perf._stream_probe --n 1000000 --mode run-suite`` prints one JSON line. Modes:
``run-suite`` (``run_suite`` itself, end to end — plan, pool, streaming dispatch, checkpoint, streaming scoring,
``records.parquet`` — against a managed INSTANT-server replica, no model), ``stream-local`` (omnieval._stream with an in-process instant echo worker), ``stream-ray`` (omnieval._stream into
real EvalClient actors and a pool of SIMULATED instant replicas), ``materialised`` (today's runner shape: every
Record and every result held in lists, same echo worker) as the linear baseline.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from omnieval._artifacts import CheckpointWriter
from omnieval.core import GenerationOptions, Message, Output, Record, TextContent, TextOutput, Usage
from serving import SIMULATED_TEXT

BENCH = "synthetic_stream"


def synthetic_records(n: int, model: str = "simulated", max_tokens: int = 8) -> Iterator[Record]:
    """A synthetic benchmark of ``n`` short text samples, generated lazily (never all in memory).

    ``model_construct`` skips validation of these known-good values: the generator's speed is not what is measured.
    """
    opts = GenerationOptions(max_tokens=max_tokens)
    for i in range(n):
        text = TextContent.model_construct(
            type="text", value=f"Synthetic sample {i}: what is {i} modulo 10? Answer with one digit."
        )
        msg = Message.model_construct(role="user", content=[text])
        yield Record.model_construct(
            benchmark=BENCH, index=i, model=model, generation_options=opts, label=str(i % 10), messages=[msg],
            sample_id=None, options=None, output=None, error=None, latency=None, metrics={}, meta={},
        )  # fmt: skip


def echo_chunk(chunk: list[Record]) -> list[Record]:
    """Instant SIMULATED inference: fills the output the way EvalClient would, with placeholder text."""
    for r in chunk:
        n = r.generation_options.max_tokens
        r.output = Output(text=TextOutput(prediction=[f"{SIMULATED_TEXT} {n} tokens"]), finish_reason="length",
                          usage=Usage(prompt_tokens=16, completion_tokens=n), replica="simulated-echo")  # fmt: skip
        r.latency = 0.0
    return chunk


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _stream_local(n: int, chunk: int, window: int, ckpt: CheckpointWriter) -> dict[str, Any]:
    from omnieval._stream import LocalChunkRunner, stream_dispatch

    with LocalChunkRunner(echo_chunk, n_workers=2) as runner:
        st = stream_dispatch(synthetic_records(n), runner, ckpt.write, chunk_size=chunk, window=window)
    return st.__dict__


def _materialised(n: int, chunk: int, ckpt: CheckpointWriter) -> dict[str, Any]:
    from omnieval._stream import lazy_chunks, record_key

    records = list(synthetic_records(n))
    done: list[Record] = []
    for c in lazy_chunks(records, chunk, record_key):
        out = echo_chunk(c)
        ckpt.write(out)
        done += out
    return {"records": len(done), "chunks": -(-n // chunk)}


def _stream_ray(n: int, chunk: int, window: int, ckpt: CheckpointWriter, clients: int) -> dict[str, Any]:
    import ray

    from cluster import connect
    from omnieval._stream import RayChunkRunner, stream_dispatch
    from omnieval.core import ModelConfig, PoolConfig
    from omnieval.perf._common import shutdown_ray
    from pool import EvalClient, get_controller

    started = bool(connect(None).get("started"))
    try:
        ctl = get_controller(5.0)
        model = ModelConfig.model_validate(
            {"name": "simulated", "engine": "simulated", "replicas": 1, "resources": {"num_cpus": 0},
             "source": {"kind": "path", "path": "/dev/null"}, "engine_kwargs": {"time_scale": 0.0, "slots": 256}}
        )  # fmt: skip
        ray.get(ctl.ensure_model.remote(model, "stream-probe"))
        cfg = PoolConfig(clients=clients, max_inflight_per_replica=256, chunk_size=chunk)
        actors = [EvalClient.remote(ctl, cfg, 0, i) for i in range(clients)]  # type: ignore[attr-defined]
        ray.get([a.dispatch_stats.remote() for a in actors])  # actors up: time the dispatch alone
        t0 = time.monotonic()
        st = stream_dispatch(synthetic_records(n), RayChunkRunner(actors), ckpt.write, chunk_size=chunk, window=window)
        return st.__dict__ | {
            "dispatch_s": round(time.monotonic() - t0, 2),
            "dispatch_records_per_s": round(n / (time.monotonic() - t0), 1),
        }
    finally:
        shutdown_ray(started)


def _run_suite(n: int, chunk: int, clients: int, out: Path) -> dict[str, Any]:
    from cluster import connect
    from omnieval._runner import run_suite
    from omnieval.core import SuiteConfig
    from omnieval.perf._common import shutdown_ray
    from omnieval.perf._synthetic import register_synthetic

    name = register_synthetic(n, out / "data", max_tokens=8)
    suite = SuiteConfig.model_validate({
        "name": "stream-probe", "benchmarks": [{"name": name}], "generation": {"max_tokens": 8},
        "models": [{"name": "instant", "engine": "instant", "replicas": 1, "resources": {"num_cpus": 0},
                    "source": {"kind": "path", "path": "/dev/null"}}],
        "pool": {"clients": clients, "chunk_size": chunk}, "cache": {"enabled": False},
    })  # fmt: skip
    started = bool(connect(None).get("started"))
    try:
        res = run_suite(suite, output_dir=str(out / "runs"), show_progress=False)
    finally:
        shutdown_ray(started)
    (score,) = res.manifest.scores
    return {"records": score.num_samples, "errors": score.num_errors, "timings": res.manifest.timings,
            "requests_per_s": res.manifest.throughput["requests_per_s"],
            "checkpoint": res.run_dir / "records.partial.jsonl"}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--mode", choices=["run-suite", "stream-local", "stream-ray", "materialised"], required=True)
    ap.add_argument("--chunk-size", type=int, default=256)
    ap.add_argument("--window", type=int, default=8)
    ap.add_argument("--clients", type=int, default=2)
    a = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="omnieval-stream-probe-"))
    ckpt = CheckpointWriter(tmp)
    base = peak_rss_mib()
    t0 = time.monotonic()
    try:
        if a.mode == "run-suite":
            st = _run_suite(a.n, a.chunk_size, a.clients, tmp)
            ckpt_path = st.pop("checkpoint")
        elif a.mode == "stream-local":
            st = _stream_local(a.n, a.chunk_size, a.window, ckpt)
        elif a.mode == "materialised":
            st = _materialised(a.n, a.chunk_size, ckpt)
        else:
            st = _stream_ray(a.n, a.chunk_size, a.window, ckpt, a.clients)
        wall = time.monotonic() - t0
        ckpt.close()
        if a.mode != "run-suite":
            ckpt_path = tmp / "records.partial.jsonl"
        lines = sum(1 for _ in open(ckpt_path, encoding="utf-8"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out = {"mode": a.mode, "n": a.n, "chunk_size": a.chunk_size, "window": a.window, "wall_s": round(wall, 2),
           "records_per_s": round(a.n / wall, 1), "rss_after_imports_mib": round(base, 1),
           "peak_rss_mib": round(peak_rss_mib(), 1), "checkpoint_lines": lines, "stats": st,
           "engine": "INSTANT server (no model)" if a.mode == "run-suite" else "SIMULATED instant echo (no model)"}  # fmt: skip
    print(json.dumps(out), flush=True)
    return 0 if lines == a.n else 1


if __name__ == "__main__":
    sys.exit(main())
