"""``omnieval bench stream``: ``run_suite``'s driver peak RSS vs benchmark size (and, on request, the dispatch loop
alone or a materialised baseline).

Each (mode, size) runs in a fresh process (``_stream_probe``) because peak RSS is a per-process high-water mark.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def probe(mode: str, n: int, *, chunk_size: int = 256, window: int = 8, timeout_s: float = 1800) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "omnieval.perf._stream_probe", "--n", str(n), "--mode", mode,
           "--chunk-size", str(chunk_size), "--window", str(window)]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"stream probe {mode} n={n} failed ({out.returncode}): {out.stderr[-600:]}")
    return dict(json.loads(lines[-1]))


def bench_stream(
    plan: list[tuple[str, int]], *, chunk_size: int = 256, window: int = 8, log: Any = print
) -> dict[str, Any]:
    rows = []
    for mode, n in plan:
        log(f"  {mode:13s} n={n:>9,d} ...")
        r = probe(mode, n, chunk_size=chunk_size, window=window)
        rows.append(r)
        log(
            f"  {mode:13s} n={n:>9,d}: peak RSS {r['peak_rss_mib']:.0f} MiB (after imports {r['rss_after_imports_mib']:.0f}),"
            f" {r['records_per_s']:.0f} records/s end to end"
        )
    return {"engine": "INSTANT server / SIMULATED echo (no model)", "chunk_size": chunk_size, "window": window, "rows": rows,
            "growth": _growth(rows)}  # fmt: skip


def _growth(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per mode: extra MiB per 100k records between the smallest and largest size (≈0 means O(in-flight))."""
    out = {}
    for mode in {r["mode"] for r in rows}:
        rs = sorted((r for r in rows if r["mode"] == mode), key=lambda r: r["n"])
        if len(rs) >= 2 and rs[-1]["n"] > rs[0]["n"]:
            a, b = rs[0], rs[-1]
            out[mode] = {"from_n": a["n"], "to_n": b["n"],
                         "mib_per_100k_records": (b["peak_rss_mib"] - a["peak_rss_mib"]) / ((b["n"] - a["n"]) / 1e5)}  # fmt: skip
    return out


def plot(result: dict[str, Any], path: Path) -> Path | None:
    from omnieval.perf._common import pyplot

    plt = pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for mode in sorted({r["mode"] for r in result["rows"]}):
        rs = sorted((r for r in result["rows"] if r["mode"] == mode), key=lambda r: r["n"])
        ax.plot([r["n"] for r in rs], [r["peak_rss_mib"] for r in rs], marker="o", label=mode)
    ax.set_xscale("log")
    ax.set_xlabel("samples in the synthetic benchmark")
    ax.set_ylabel("driver peak RSS (MiB)")
    ax.set_title("driver peak RSS vs samples (run_suite, INSTANT server: no model)", fontsize=10)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
