"""``omnieval bench lmeval``: one generative lm-eval task, ``lm_eval`` alone vs the same task in an ``omnieval run``.

Both whole processes are timed from spawn to exit against one INSTANT server (it answers at once, so what is measured
is each tool's own overhead: imports, task indexing, request building, dispatch, scoring, Ray and the pool). Both run
the same task file (lm-eval's bundled gsm8k prompt, filters and metric on N local rows), with lm-eval's own
``local-completions`` client at ``num_concurrent`` for the baseline. Repeats alternate the order; the summary is the
ratio of medians with the per-repeat range.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from omnieval.perf._common import median

DATA = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "lmeval" / "gsm8k_format_asdiv.jsonl"
TASK = "gsm8k_bench"
OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def _write_task(tmp: Path, rows: int) -> Path:
    """``rows`` distinct GSM8K-schema rows (the shipped ASDiv rows, numbered) and a task file that includes lm-eval's
    bundled gsm8k YAML over them."""
    from omnieval.adapters._lmeval_tasks import _tasks_root

    base = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    data = tmp / "rows.jsonl"
    with data.open("w") as f:
        for k in range(rows):
            r = base[k % len(base)]
            f.write(json.dumps({"question": f"{r['question']} (item {k})", "answer": r["answer"]}) + "\n")
    tasks = tmp / "tasks"
    tasks.mkdir()
    (tasks / f"{TASK}.yaml").write_text(
        f"include: {_tasks_root() / 'gsm8k' / 'gsm8k.yaml'}\ntask: {TASK}\ntag: []\ndataset_path: json\n"
        f"dataset_name: null\ndataset_kwargs:\n  data_files: {{test: {data}}}\ntraining_split: null\n"
        "fewshot_split: null\nnum_fewshot: 0\n"
    )
    return tasks


def _timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    t0 = time.monotonic()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return wall, proc.stdout


def bench_lmeval(rows: int = 4000, repeats: int = 3, num_concurrent: int = 64) -> dict[str, Any]:
    from serving import free_port

    with tempfile.TemporaryDirectory(prefix="omnieval-bench-lmeval-") as d:
        tmp = Path(d)
        tasks = _write_task(tmp, rows)
        port = free_port()
        server = subprocess.Popen([sys.executable, "-m", "serving._instant", "--port", str(port)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        env = {**os.environ, **OFFLINE}
        env.pop("OMNIEVAL_RESPONSE_CACHE", None)
        base = f"http://127.0.0.1:{port}/v1"
        suite = tmp / "suite.yaml"
        suite.write_text(json.dumps({
            "name": "bench-lmeval",
            "models": [{"name": "instant", "source": {"kind": "endpoint", "base_url": base}, "engine": "openai"}],
            "benchmarks": [{"name": TASK, "framework": "lmeval", "options": {"include_path": str(tasks)}}],
            "frameworks": {"lmeval": {"env_vars": OFFLINE}}, "cache": {"enabled": False},
        }))  # fmt: skip
        lm_cmd = [sys.executable, "-m", "lm_eval", "run", "--model", "local-completions", "--model_args",
                  f"model=instant,base_url={base}/completions,num_concurrent={num_concurrent},tokenizer_backend=None",
                  "--tasks", TASK, "--include_path", str(tasks)]  # fmt: skip
        om_cmd = [sys.executable, "-m", "omnieval", "run", str(suite), "--no-progress", "--output-dir", str(tmp / "runs")]
        try:
            _wait_ready(base)
            runs: list[dict[str, Any]] = []
            for i in range(repeats):
                order = ["lm_eval", "omnieval"] if i % 2 == 0 else ["omnieval", "lm_eval"]
                rep: dict[str, Any] = {"order": order}
                for mode in order:
                    wall, out = _timed(lm_cmd if mode == "lm_eval" else om_cmd, env, tmp)
                    rep[f"{mode}_s"] = wall
                    if mode == "omnieval":
                        rep["omnieval_manifest"] = _manifest_summary(out)
                rep["ratio"] = rep["omnieval_s"] / rep["lm_eval_s"]
                runs.append(rep)
                print(f"repeat {i + 1}/{repeats}: lm_eval {rep['lm_eval_s']:.1f} s, omnieval {rep['omnieval_s']:.1f} s "
                      f"({rep['ratio']:.2f}x)", flush=True)  # fmt: skip
        finally:
            server.terminate()
            server.wait(timeout=10)
    lm = median([r["lm_eval_s"] for r in runs])
    om = median([r["omnieval_s"] for r in runs])
    ratios = [r["ratio"] for r in runs]
    return {"task": TASK, "rows": rows, "repeats": repeats, "num_concurrent": num_concurrent, "runs": runs,
            "summary": {"lm_eval_s": lm, "omnieval_s": om, "ratio_of_medians": om / lm,
                        "ratio_range": [min(ratios), max(ratios)], "target": 1.1}}  # fmt: skip


def _wait_ready(base: str, timeout_s: float = 30.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:  # a server's readiness is only observable by asking
        try:
            if httpx.get(base + "/models", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"INSTANT server at {base} did not start")


def _manifest_summary(stdout: str) -> dict[str, Any]:
    from omnieval import read_manifest

    line = next(x for x in stdout.splitlines() if x.startswith("artifact: "))
    m = read_manifest(Path(line.removeprefix("artifact: ").strip()))
    return {"timings": m.timings, "samples": sum(s.num_samples for s in m.scores if s.metric.startswith("exact_match"))}


def report(res: dict[str, Any]) -> list[str]:
    s = res["summary"]
    lo, hi = s["ratio_range"]
    return [
        f"lm-eval task {res['task']} ({res['rows']} requests, INSTANT server), whole process, median of {res['repeats']}:",
        f"  lm_eval alone (local-completions, num_concurrent {res['num_concurrent']}): {s['lm_eval_s']:.1f} s",
        f"  omnieval run (same task through the pool): {s['omnieval_s']:.1f} s",
        f"  omnieval / lm_eval = {s['ratio_of_medians']:.2f}x (ratio of medians; per-repeat {lo:.2f}-{hi:.2f}x; "
        f"target <= {s['target']:.1f}x)",
    ]


def plot(res: dict[str, Any], path: Path) -> Path | None:
    from omnieval.perf._common import pyplot

    plt = pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(5, 3.2))
    names = ["lm_eval alone", "omnieval run"]
    keys = ["lm_eval_s", "omnieval_s"]
    meds = [res["summary"][k] for k in keys]
    lo = [meds[i] - min(r[k] for r in res["runs"]) for i, k in enumerate(keys)]
    hi = [max(r[k] for r in res["runs"]) - meds[i] for i, k in enumerate(keys)]
    ax.bar(names, meds, yerr=[lo, hi], capsize=6, color=["#888", "#2a7"])
    ax.set_ylabel("whole run, s (median, min-max)")
    ax.set_title(f"{res['task']}: {res['rows']} requests, INSTANT server\n"
                 f"ratio {res['summary']['ratio_of_medians']:.2f}x")  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
