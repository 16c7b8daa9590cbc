"""A framework alone vs the same task in an ``omnieval run``: both whole processes, spawn to exit, against one
INSTANT server, repeats alternating the order; the summary is the ratio of medians with the per-repeat range.
Shared by ``bench lmeval`` and ``bench lmms``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omnieval.perf._common import median

OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
TARGET = 1.1
"""omnieval's whole run at most this many times the framework's own."""


def spawn_instant(port: int) -> subprocess.Popen[bytes]:
    """An INSTANT server's process on ``port`` (not yet ready: ``wait_ready``)."""
    return subprocess.Popen([sys.executable, "-m", "serving._instant", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip


def instant_server() -> tuple[subprocess.Popen[bytes], str]:
    """An INSTANT server on a free port, ready; its process and ``/v1`` base URL."""
    from serving import free_port

    port = free_port()
    server = spawn_instant(port)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        wait_ready(base)
    except BaseException:
        server.terminate()
        raise
    return server, base


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    t0 = time.monotonic()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return wall, proc.stdout


def wait_ready(base: str, timeout_s: float = 30.0) -> None:
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


def manifest_summary(stdout: str) -> dict[str, Any]:
    from omnieval import read_manifest

    line = next(x for x in stdout.splitlines() if x.startswith("artifact: "))
    m = read_manifest(Path(line.removeprefix("artifact: ").strip()))
    return {"timings": m.timings, "samples": sum(s.num_samples for s in m.scores if s.metric.startswith("exact_match"))}


def alternate(alone: str, alone_cmd: list[str], om_cmd: list[str], *, repeats: int, env: dict[str, str],
              cwd: Path) -> dict[str, Any]:  # fmt: skip
    """``repeats`` pairs, the order alternating; ``alone`` names the framework's own run in the result's keys."""
    runs: list[dict[str, Any]] = []
    for i in range(repeats):
        order = [alone, "omnieval"] if i % 2 == 0 else ["omnieval", alone]
        rep: dict[str, Any] = {"order": order}
        for mode in order:
            wall, out = timed(alone_cmd if mode == alone else om_cmd, env, cwd)
            rep[f"{mode}_s"] = wall
            if mode == "omnieval":
                rep["omnieval_manifest"] = manifest_summary(out)
        rep["ratio"] = rep["omnieval_s"] / rep[f"{alone}_s"]
        runs.append(rep)
        print(f"repeat {i + 1}/{repeats}: {alone} {rep[f'{alone}_s']:.1f} s, omnieval {rep['omnieval_s']:.1f} s "
              f"({rep['ratio']:.2f}x)", flush=True)  # fmt: skip
    a = median([r[f"{alone}_s"] for r in runs])
    om = median([r["omnieval_s"] for r in runs])
    ratios = [r["ratio"] for r in runs]
    return {"runs": runs, "summary": {f"{alone}_s": a, "omnieval_s": om, "ratio_of_medians": om / a,
                                      "ratio_range": [min(ratios), max(ratios)], "target": TARGET}}  # fmt: skip


def compare(alone: str, framework: str, task: str, tasks: Path, tmp: Path, alone_cmd: Callable[[str], list[str]], *,
            fw_env: dict[str, Any], repeats: int) -> dict[str, Any]:  # fmt: skip
    """One INSTANT server; ``alone_cmd(base_url)`` (the framework's own CLI) against an ``omnieval run`` of the same
    task (``include_path`` = ``tasks``, the server as an external endpoint, response cache off), alternating."""
    server, base = instant_server()
    env = {**os.environ, **OFFLINE}
    env.pop("OMNIEVAL_RESPONSE_CACHE", None)
    suite = tmp / "suite.yaml"
    suite.write_text(json.dumps({
        "name": f"bench-{framework}",
        "models": [{"name": "instant", "source": {"kind": "endpoint", "base_url": base}, "engine": "openai"}],
        "benchmarks": [{"name": task, "framework": framework, "options": {"include_path": str(tasks)}}],
        "frameworks": {framework: {**fw_env, "env_vars": OFFLINE}}, "cache": {"enabled": False},
    }))  # fmt: skip
    om_cmd = [sys.executable, "-m", "omnieval", "run", str(suite), "--no-progress", "--output-dir", str(tmp / "runs")]
    try:
        return alternate(alone, alone_cmd(base), om_cmd, repeats=repeats, env=env, cwd=tmp)
    finally:
        server.terminate()
        server.wait(timeout=10)


def ratio_line(alone: str, res: dict[str, Any]) -> str:
    s = res["summary"]
    lo, hi = s["ratio_range"]
    return (f"  omnieval / {alone} = {s['ratio_of_medians']:.2f}x (ratio of medians; per-repeat {lo:.2f}-{hi:.2f}x; "
            f"target <= {s['target']:.1f}x)")  # fmt: skip


def plot(alone: str, title: str) -> Callable[[dict[str, Any], Path], Path | None]:
    """A bar per tool (median, min-max whiskers)."""

    def draw(res: dict[str, Any], path: Path) -> Path | None:
        from omnieval.perf._common import pyplot

        plt = pyplot()
        if plt is None:
            return None
        fig, ax = plt.subplots(figsize=(5, 3.2))
        keys = [f"{alone}_s", "omnieval_s"]
        meds = [res["summary"][k] for k in keys]
        lo = [meds[i] - min(r[k] for r in res["runs"]) for i, k in enumerate(keys)]
        hi = [max(r[k] for r in res["runs"]) - meds[i] for i, k in enumerate(keys)]
        ax.bar([f"{alone} alone", "omnieval run"], meds, yerr=[lo, hi], capsize=6, color=["#888", "#2a7"])
        ax.set_ylabel("whole run, s (median, min-max)")
        ax.set_title(f"{title.format(**res)}\nratio {res['summary']['ratio_of_medians']:.2f}x")
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        return path

    return draw
