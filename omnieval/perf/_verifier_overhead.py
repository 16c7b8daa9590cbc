"""``omnieval bench verifier-overhead``: what the verifier adds to a suite's wall time, streaming vs as a phase.

The same suite runs three ways per repeat: verifier off, ``verifier.mode: stream`` (the judge works while inference
runs) and ``verifier.mode: after`` (one phase after inference and scoring). Each run is a full ``run_suite`` (pool
start-up to artifact, response cache off), so the wall is what a user waits. The order alternates between repeats
(a warm page cache or a busy neighbour favours neither mode). Reported: per mode the median wall and its range, and
the ratio of medians against "off" with the range of the per-repeat ratios.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import Any

from omnieval.core import SuiteConfig, VerifierConfig
from omnieval.perf._common import median, no_cache

MODES = ("off", "stream", "after")


def judge_config(suite: SuiteConfig, *, max_tokens: int | None = None) -> VerifierConfig:
    """The suite's own verifier settings, else the default offline judge (SmolLM2 + omnieval's LoRA adapter)."""
    cfg = suite.verifier or VerifierConfig()
    update: dict[str, Any] = {"enabled": True}
    if max_tokens is not None:
        update["max_tokens"] = max_tokens
    return cfg.model_copy(update=update)


def suite_for(suite: SuiteConfig, mode: str, judge: VerifierConfig, limit: int | None) -> SuiteConfig:
    benches = [b.model_copy(update={"limit": limit}) if limit is not None else b for b in suite.benchmarks]
    verifier = None if mode == "off" else judge.model_copy(update={"mode": mode})
    return no_cache(suite.model_copy(update={"benchmarks": benches, "verifier": verifier}))


def run_once(suite: SuiteConfig) -> dict[str, Any]:
    from omnieval._runner import run_suite

    with tempfile.TemporaryDirectory(prefix="omnieval-bench-verifier-") as out:
        res = run_suite(suite, output_dir=out, show_progress=False)
    t = res.manifest.timings
    judged = [s for s in res.manifest.scores if s.metric == "verifier"]
    return {
        "wall_s": t["total_s"],
        "inference_s": t["inference_s"],
        "verifier_tail_s": t.get("verifier_tail_s"),
        "verifier_busy_s": t.get("verifier_busy_s"),
        "verifier_startup_s": t.get("verifier_startup_s"),
        "verifier_samples": sum(s.num_samples for s in judged),
        "verifier_errors": sum(s.num_errors for s in judged),
    }


def bench_verifier_overhead(
    suite: SuiteConfig, *, repeats: int = 3, limit: int | None = 10, judge_max_tokens: int | None = None,
    log: Callable[[str], None] = print, runner: Callable[[SuiteConfig], dict[str, Any]] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Every mode ``repeats`` times, order alternating; ``runner`` is replaceable for tests."""
    from cluster import connect
    from omnieval.perf._common import shutdown_ray

    judge = judge_config(suite, max_tokens=judge_max_tokens)
    run = runner or run_once
    started = False
    if runner is None:
        started = bool(connect(suite.ray).get("started"))
    rows: list[dict[str, Any]] = []
    try:
        for rep in range(repeats):
            for mode in MODES if rep % 2 == 0 else tuple(reversed(MODES)):
                r = run(suite_for(suite, mode, judge, limit))
                rows.append({"mode": mode, "repeat": rep, **r})
                log(f"repeat {rep} {mode}: {r['wall_s']:.1f} s (tail {r.get('verifier_tail_s') or 0:.1f} s)")
    finally:
        if runner is None:
            shutdown_ray(started)
    return {"limit": limit, "repeats": repeats, "judge": judge.model_dump(mode="json"), "runs": rows,
            "summary": summarise(rows)}  # fmt: skip


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per mode: median wall, its range, ratio of medians vs off, and the range of per-repeat ratios vs off."""
    walls = {m: [r["wall_s"] for r in rows if r["mode"] == m] for m in MODES}
    off = {r["repeat"]: r["wall_s"] for r in rows if r["mode"] == "off"}
    out: dict[str, Any] = {}
    for m in MODES:
        if not walls[m]:
            continue
        ratios = [r["wall_s"] / off[r["repeat"]] for r in rows if r["mode"] == m and off.get(r["repeat"])]
        tails = [r["verifier_tail_s"] for r in rows if r["mode"] == m and r.get("verifier_tail_s") is not None]
        out[m] = {
            "wall_s_median": median(walls[m]),
            "wall_s_range": [min(walls[m]), max(walls[m])],
            "ratio_vs_off": median(walls[m]) / median(walls["off"]) if walls["off"] else None,
            "ratio_vs_off_range": [min(ratios), max(ratios)] if ratios else None,
            "verifier_tail_s_median": median(tails) if tails else None,
        }
    return out


def table(summary: dict[str, Any]) -> str:
    lines = ["| mode | wall median (s) | range (s) | ratio vs off (per-repeat range) | verifier tail (s) |",
             "|---|---|---|---|---|"]  # fmt: skip
    for m, s in summary.items():
        lo, hi = s["wall_s_range"]
        rr = s["ratio_vs_off_range"]
        ratio = "—" if s["ratio_vs_off"] is None else f"{s['ratio_vs_off']:.2f}"
        if rr:
            ratio += f" ({rr[0]:.2f}–{rr[1]:.2f})"
        tail = "—" if s["verifier_tail_s_median"] is None else f"{s['verifier_tail_s_median']:.1f}"
        lines.append(f"| {m} | {s['wall_s_median']:.1f} | {lo:.1f}–{hi:.1f} | {ratio} | {tail} |")
    return "\n".join(lines)
