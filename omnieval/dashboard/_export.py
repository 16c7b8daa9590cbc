"""Static export: the same page with its data inlined, so it opens from ``file://`` or any static host.

Browsers refuse ``fetch()`` of a sibling file under ``file://``, so the data is embedded in ``index.html`` as a JSON
script tag; ``data.json`` beside it carries the same payload for other consumers.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from omnieval.dashboard._app import STATIC_DIR
from omnieval.dashboard._index import ArtifactIndex, sample_view

DATA_MARKER = "<!--OMNIEVAL_DATA-->"


def export_data(index: ArtifactIndex, max_samples: int = 100) -> dict[str, Any]:
    """Winning cells (the page filters them client-side), runs, and up to ``max_samples`` per (run, model, bench)."""
    runs = index.runs()
    samples: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        if not run.get("has_records"):
            continue
        kept: dict[tuple[str, str], int] = {}
        out = []
        for r in sorted(index.records(run["run_id"]), key=lambda r: r.key):
            k = (r.model, r.benchmark)
            if kept.get(k, 0) < max_samples:
                kept[k] = kept.get(k, 0) + 1
                out.append(sample_view(r))
        samples[run["run_id"]] = out
    return {
        "paired": _all_paired(index, runs),
        "static": True,
        "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "max_samples": max_samples,
        "cells": [asdict(c) for c in index.cells()],
        "runs": runs,
        "samples": samples,
    }


MAX_PAIRED = 2000
"""Paired comparisons precomputed for a static page (it has no server to ask); beyond this, none are."""


def _all_paired(index: ArtifactIndex, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Every (run A, model A, run B, model B, benchmark) the page's compare view can pick, keyed as the page looks
    it up: ``"A|model A|B|model B|benchmark"``."""
    by_run: dict[str, dict[tuple[str, str], list[Any]]] = {}
    for run in runs:
        if run.get("has_records"):
            groups: dict[tuple[str, str], list[Any]] = {}
            for r in index.records(run["run_id"]):
                groups.setdefault((r.model, r.benchmark), []).append(r)
            by_run[run["run_id"]] = groups
    out: dict[str, Any] = {}
    for a, ga in by_run.items():
        for b, gb in by_run.items():
            if a == b:
                continue
            for (ma, bench), ra in ga.items():
                for (mb, bench_b), rb in gb.items():
                    if bench_b != bench:
                        continue
                    if len(out) >= MAX_PAIRED:
                        return out
                    out[f"{a}|{ma}|{b}|{mb}|{bench}"] = index.paired(a, b, bench, ra, rb)
    return out


def _embed(data: dict[str, Any]) -> str:
    """JSON safe inside <script>: escaping '<' keeps a '</script>' in a prediction from closing the tag."""
    text = json.dumps(data, separators=(",", ":")).replace("<", "\\u003c")
    return f'<script id="omnieval-data" type="application/json">{text}</script>'


def export_static(runs_dir: Path | str, out_dir: Path | str, max_samples: int = 100) -> Path:
    """Write ``index.html``, ``data.json`` and ``static/`` under ``out_dir``; returns the index.html path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = export_data(ArtifactIndex(Path(runs_dir)), max_samples=max_samples)
    (out / "data.json").write_text(json.dumps(data, indent=1), encoding="utf-8")
    static_out = out / "static"
    static_out.mkdir(exist_ok=True)
    for name in ("app.js", "style.css"):
        shutil.copyfile(STATIC_DIR / name, static_out / name)
    html = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
    if DATA_MARKER not in html:
        raise RuntimeError(f"{STATIC_DIR / 'index.html'} lacks {DATA_MARKER}")
    page = out / "index.html"
    page.write_text(html.replace(DATA_MARKER, _embed(data)), encoding="utf-8")
    return page
