"""``omnieval bench lmeval-mc``: an MMLU-sized multiple-choice lm-eval task scored through the pool.

The workload is lm-eval's bundled MMLU prompt (``mmlu_abstract_algebra``'s YAML) over N real MMLU rows
(``mmlu_large.jsonl``, all 57 subjects), 0-shot: N documents x 4 choices of log-likelihood. Two comparisons, each
side by side in one invocation, repeats alternating the order, reported as the ratio of medians with its range:

- ``--server vllm``: lm-eval's own ``local-completions`` client (``num_concurrent``) against one vLLM server, vs the
  same task in an ``omnieval run`` whose model is that server (``scoring: vllm``); whole processes, spawn to exit.
  Run it in the vLLM venv (scripts/ci_vllm.sh --install-only).
- ``--server instant``: the same ``omnieval run`` against the INSTANT server (no model), vs the raw line rate: a bare
  aiohttp loop posting the pool's own pre-encoded scoring bodies (one per document: lm-eval's prompts, split and
  tokenized as the adapter does) at the same concurrency. The
  pool's rate is documents over the time lm-eval waited on the pool (tokenize + score), and also over the whole run.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from omnieval.perf._alone import OFFLINE, spawn_instant, timed, wait_ready
from omnieval.perf._common import median

DATA = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "lmeval" / "mmlu_large.jsonl"
TASK = "mmlu_bench"


def _write_task(tmp: Path, rows: int) -> Path:
    from omnieval.adapters._lmeval_tasks import _tasks_root

    lines = [ln for ln in DATA.read_text().splitlines() if ln.strip()]
    if rows > len(lines):
        raise ValueError(f"--rows {rows}: mmlu_large.jsonl has {len(lines)} rows")
    data = tmp / "rows.jsonl"
    data.write_text("\n".join(lines[:rows]) + "\n")
    tasks = tmp / "tasks"
    tasks.mkdir()
    (tasks / f"{TASK}.yaml").write_text(
        f"include: {_tasks_root() / 'mmlu' / 'default' / 'mmlu_abstract_algebra.yaml'}\ntask: {TASK}\ntag: []\n"
        f"dataset_path: json\ndataset_name: null\ndataset_kwargs:\n  data_files: {{test: {data}}}\n"
        "fewshot_split: null\nnum_fewshot: 0\n"
    )
    return tasks


def _framework_timings(stdout: str) -> dict[str, Any]:
    line = next(x for x in stdout.splitlines() if x.startswith("artifact: "))
    run = Path(line.removeprefix("artifact: ").strip())
    (fw,) = list(run.glob("framework-*.json"))
    raw = json.loads(fw.read_text())
    timings = (raw.get("raw") or raw).get("timings") or {}
    return {k: timings.get(k) for k in ("requests_s", "tokenize_s", "evaluate_s")}


def _start_server(kind: str, port: int, log: Path) -> tuple[subprocess.Popen[bytes], str | None]:
    """The server and, for vLLM, the tokenizer directory lm-eval's client loads."""
    if kind == "instant":
        return spawn_instant(port), None
    from omnieval._defaults import DEFAULT_MODEL_SOURCE
    from serving import gguf_to_hf, resolve_model

    gguf = resolve_model(DEFAULT_MODEL_SOURCE)
    assert gguf is not None
    ckpt = gguf_to_hf(gguf, name="smollm2")
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "2")}
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(ckpt), "--served-model-name",
           "smollm2", "--host", "127.0.0.1", "--port", str(port), "--enforce-eager", "--max-model-len", "2048"]  # fmt: skip
    return subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env), str(ckpt)


def _pool_bodies(tasks: Path, rows: int, model: str) -> list[bytes]:
    """The scoring bodies the pool sends for this task on the INSTANT server: lm-eval builds the requests (its own
    prompt), they are split and grouped as the adapter does, tokenized as INSTANT tokenizes (by character)."""
    from lm_eval.tasks import TaskManager

    from omnieval.adapters._loglik import encode_pair, group_by_context, texts_to_tokenize
    from serving import ScoreRequest, score_bodies

    task = TaskManager(include_path=str(tasks), include_defaults=False).load([TASK])["tasks"][TASK]
    task.build_all_requests(limit=rows, rank=0, world_size=1)
    pairs = [(str(inst.args[0]), str(inst.args[1])) for inst in task.instances]
    tok = {t: [ord(c) for c in t] for t in texts_to_tokenize(pairs)}
    groups = group_by_context([encode_pair(c, k, tok, 0) for c, k in pairs])
    out = []
    for i, g in enumerate(groups):
        req = ScoreRequest(request_id=str(i), context=g.context, continuations=g.continuations)
        ((_, body),) = score_bodies("vllm", req, model)
        out.append(json.dumps(body).encode())
    return out


async def _raw_line_rate(base: str, bodies: list[bytes], concurrency: int) -> dict[str, Any]:
    """Documents per second of a bare client posting the pool's own scoring bodies (pre-encoded) and parsing the
    replies, with no tokenization, no lm-eval and no pool: the line rate of this workload on this machine."""
    import aiohttp

    queue = list(reversed(bodies))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:

        async def worker() -> None:
            while queue:
                body = queue.pop()
                async with s.post(base + "/completions", data=body, headers={"Content-Type": "application/json"}) as r:
                    json.loads(await r.read())

        t0 = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return {"wall_s": time.monotonic() - t0, "docs": len(bodies)}


def bench_lmeval_mc(*, server: str = "instant", rows: int = 2850, repeats: int = 3, num_concurrent: int = 64) -> dict[str, Any]:
    from serving import free_port

    with tempfile.TemporaryDirectory(prefix="omnieval-bench-mc-") as d:
        tmp = Path(d)
        tasks = _write_task(tmp, rows)
        port = free_port()
        proc, tokenizer = _start_server(server, port, tmp / "server.log")
        base = f"http://127.0.0.1:{port}/v1"
        name = "instant" if server == "instant" else "smollm2"
        env = {**os.environ, **OFFLINE}
        env.pop("OMNIEVAL_RESPONSE_CACHE", None)
        suite = tmp / "suite.yaml"
        suite.write_text(json.dumps({
            "name": "bench-lmeval-mc",
            "models": [{"name": name, "source": {"kind": "endpoint", "base_url": base, "served_model_name": name},
                        "engine": "openai",
                        "engine_kwargs": {"scoring": "vllm", **({"tokenizer": tokenizer} if tokenizer else {})}}],
            "benchmarks": [{"name": TASK, "framework": "lmeval", "options": {"include_path": str(tasks)}}],
            "frameworks": {"lmeval": {"env_vars": OFFLINE}}, "cache": {"enabled": False},
        }))  # fmt: skip
        om_cmd = [sys.executable, "-m", "omnieval", "run", str(suite), "--no-progress", "--output-dir", str(tmp / "runs")]
        lm_cmd = [sys.executable, "-m", "lm_eval", "run", "--model", "local-completions", "--model_args",
                  f"model={name},base_url={base}/completions,num_concurrent={num_concurrent},tokenizer={tokenizer}",
                  "--tasks", TASK, "--include_path", str(tasks)]  # fmt: skip
        baseline = "lm_eval" if server == "vllm" else "raw"
        bodies = _pool_bodies(tasks, rows, name) if server == "instant" else []
        try:
            wait_ready(base, timeout_s=900)
            runs: list[dict[str, Any]] = []
            for i in range(repeats):
                order = [baseline, "omnieval"] if i % 2 == 0 else ["omnieval", baseline]
                rep: dict[str, Any] = {"order": order}
                for mode in order:
                    if mode == "raw":
                        raw = asyncio.run(_raw_line_rate(base, bodies, num_concurrent))
                        rep["raw_s"] = raw["wall_s"]
                    else:
                        wall, out = timed(om_cmd if mode == "omnieval" else lm_cmd, env, tmp)
                        rep[f"{mode}_s"] = wall
                        if mode == "omnieval":
                            rep.update({f"omnieval_{k}": v for k, v in _framework_timings(out).items()})
                if server == "vllm":
                    rep["ratio"] = rep["lm_eval_s"] / rep["omnieval_s"]  # > 1: the pool is faster
                else:
                    rep["ratio"] = rep["raw_s"] / rep["omnieval_requests_s"]  # the pool's share of the line rate
                    rep["whole_run_ratio"] = rep["raw_s"] / rep["omnieval_s"]
                runs.append(rep)
                print(f"repeat {i + 1}/{repeats}: " + ", ".join(f"{k} {v:.1f} s" for k, v in rep.items()
                                                              if k.endswith("_s") and v is not None)
                      + f" ({rep['ratio']:.2f}x)", flush=True)  # fmt: skip
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    ratios = [r["ratio"] for r in runs]
    summary: dict[str, Any] = {"ratio_range": [min(ratios), max(ratios)]}
    if server == "vllm":
        lm, om = median([r["lm_eval_s"] for r in runs]), median([r["omnieval_s"] for r in runs])
        summary.update(lm_eval_s=lm, omnieval_s=om, ratio_of_medians=lm / om, target=1.0,
                       meaning="lm_eval alone / omnieval run, whole process (>= 1: the pool is not slower)")
    else:
        rw, rq = median([r["raw_s"] for r in runs]), median([r["omnieval_requests_s"] for r in runs])
        om = median([r["omnieval_s"] for r in runs])
        summary.update(raw_s=rw, omnieval_requests_s=rq, omnieval_s=om, ratio_of_medians=rw / rq, target=0.25,
                       raw_docs_per_s=rows / rw, pool_docs_per_s=rows / rq, whole_run_docs_per_s=rows / om,
                       meaning="pool documents/s while lm-eval waits on it, as a share of the raw line rate")  # fmt: skip
    return {"server": server, "task": TASK, "rows": rows, "choices": 4 * rows, "repeats": repeats,
            "num_concurrent": num_concurrent, "runs": runs, "summary": summary}


def report(res: dict[str, Any]) -> list[str]:
    s = res["summary"]
    lo, hi = s["ratio_range"]
    head = f"lm-eval MMLU prompt, {res['rows']} documents x 4 choices (log-likelihood), median of {res['repeats']}:"
    if res["server"] == "vllm":
        return [head,
                f"  lm_eval alone (local-completions, num_concurrent {res['num_concurrent']}) on vLLM: {s['lm_eval_s']:.1f} s",
                f"  omnieval run (same task through the pool, same server): {s['omnieval_s']:.1f} s",
                f"  lm_eval / omnieval = {s['ratio_of_medians']:.2f}x (ratio of medians; per-repeat {lo:.2f}-{hi:.2f}x; "
                f"target >= {s['target']:.1f}x)"]  # fmt: skip
    return [head,
            f"  raw line rate (bare aiohttp, the pool's scoring bodies, concurrency {res['num_concurrent']}): "
            f"{s['raw_docs_per_s']:.0f} docs/s",
            f"  omnieval run on the INSTANT server: {s['pool_docs_per_s']:.0f} docs/s while lm-eval waits on the pool "
            f"({s['whole_run_docs_per_s']:.0f} docs/s over the whole run, {s['omnieval_s']:.1f} s)",
            f"  pool / raw = {s['ratio_of_medians']:.2f} (ratio of medians; per-repeat {lo:.2f}-{hi:.2f}; target >= "
            f"{s['target']:.2f})"]  # fmt: skip


def plot(res: dict[str, Any], path: Path) -> Path | None:
    from omnieval.perf._common import pyplot

    plt = pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(5.4, 3.4))
    if res["server"] == "vllm":
        names, keys, unit = ["lm_eval alone", "omnieval run"], ["lm_eval_s", "omnieval_s"], "whole run, s"
        vals = [[r[k] for r in res["runs"]] for k in keys]
    else:
        names, unit = ["raw client", "pool (scoring)", "omnieval whole run"], "documents / s"
        vals = [[res["rows"] / r[k] for r in res["runs"]] for k in ("raw_s", "omnieval_requests_s", "omnieval_s")]
    meds = [median(v) for v in vals]
    err = [[m - min(v) for m, v in zip(meds, vals, strict=True)], [max(v) - m for m, v in zip(meds, vals, strict=True)]]
    ax.bar(names, meds, yerr=err, capsize=6, color=["#888", "#2a7", "#7a2"][: len(names)])
    ax.set_ylabel(f"{unit} (median, min-max)")
    ax.set_title(f"MMLU MC, {res['rows']} docs x 4, {res['server']} server\n"
                 f"ratio {res['summary']['ratio_of_medians']:.2f} (target {res['summary']['target']})")  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
