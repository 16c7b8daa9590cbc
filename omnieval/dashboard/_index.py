"""Scan a runs directory into leaderboard data; rescans cheaply on every call so new runs appear without restart.

A manifest is re-parsed only when its (mtime, size, inode) changes; ``write_manifest`` replaces the file atomically,
so a changed inode is a reliable "rewritten" signal even on coarse-mtime filesystems.
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from omnieval._artifacts import MANIFEST, RECORDS, RunManifest, read_manifest, read_records
from omnieval.core import Record

VERIFIER = "verifier"
FILTER_KEYS = ("modality", "engine", "framework", "model")


@dataclass(frozen=True)
class Cell:
    """One (model, benchmark) leaderboard entry, taken from the newest completed run that scored it."""

    model: str
    benchmark: str
    metric: str | None
    value: float | None
    verifier: float | None
    run_id: str
    created: str
    engine: str
    framework: str
    modality: str
    num_samples: int
    num_errors: int
    verifiers: dict[str, float | None] = field(default_factory=dict)
    """Every verifier score row of the cell by metric (``verifier``, ``verifier_prob``, ...)."""
    stderr: float | None = None
    """Standard error of ``value`` (the page draws its 95 % interval, ±1.96 of it)."""
    verifier_stderr: float | None = None
    """Standard error of ``verifier``."""
    stderr_method: str | None = None
    """How ``stderr`` was computed (mean, clustered, bootstrap, ...)."""


def is_verifier(metric: str | None) -> bool:
    """Verifier score rows (``verifier``, ``verifier_prob``, any ``verifier*``): never a benchmark's native metric."""
    return bool(metric) and str(metric).startswith(VERIFIER)


@dataclass
class _Entry:
    sig: tuple[int, int, int]
    manifest: RunManifest | None
    error: str | None = None
    records_sig: tuple[int, int, int] | None = None
    records: list[Record] | None = field(default=None, repr=False)


def _sig(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _created_key(created: str) -> float:
    """Sortable timestamp; naive ISO times are taken as UTC, unparsable ones sort oldest."""
    try:
        dt = datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return -math.inf
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def _num(v: float | None) -> float | None:
    """NaN/inf are not JSON; treat them as "no score"."""
    if v is None or not math.isfinite(v):
        return None
    return float(v)


def _native_metric(m: RunManifest, benchmark: str, names: list[str]) -> str | None:
    """The benchmark's first declared metric, else the first non-verifier metric that was scored."""
    for b in m.benchmarks:
        if b.name == benchmark:
            for spec in b.metrics:
                if spec.get("name") in names and not is_verifier(spec.get("name")):
                    return str(spec["name"])
    return next((n for n in names if not is_verifier(n)), None)


def cells_of(m: RunManifest) -> list[Cell]:
    """Fold a manifest's score rows into one Cell per (model, benchmark)."""
    engines = {mp.name: mp.engine for mp in m.models}
    bench = {b.name: b for b in m.benchmarks}
    groups: dict[tuple[str, str], list[Any]] = {}
    for row in m.scores:
        if row.error:  # a benchmark that failed whole has no score: it must not hide an older run's
            continue
        groups.setdefault((row.model, row.benchmark), []).append(row)
    out = []
    for (model, benchmark), rows in groups.items():
        by_metric = {r.metric: r for r in rows}
        native = _native_metric(m, benchmark, list(by_metric))
        first = rows[0]
        bp = bench.get(benchmark)
        out.append(
            Cell(
                model=model,
                benchmark=benchmark,
                metric=native,
                value=_num(by_metric[native].value) if native else None,
                verifier=_num(by_metric[VERIFIER].value) if VERIFIER in by_metric else None,
                run_id=m.run_id,
                created=m.created,
                engine=first.engine or engines.get(model, ""),
                framework=first.framework or (bp.framework if bp else "builtin"),
                modality=first.modality or (bp.modality if bp else "text"),
                num_samples=max(r.num_samples for r in rows),
                num_errors=max(r.num_errors for r in rows),
                verifiers={k: _num(r.value) for k, r in by_metric.items() if is_verifier(k)},
                stderr=_num(by_metric[native].stderr) if native else None,
                verifier_stderr=_num(by_metric[VERIFIER].stderr) if VERIFIER in by_metric else None,
                stderr_method=by_metric[native].stderr_method if native else None,
            )
        )
    return out


def select_newest(runs: list[RunManifest]) -> list[Cell]:
    """Per (model, benchmark) keep the cell of the newest *completed* run; ties break on run_id."""
    best: dict[tuple[str, str], tuple[tuple[float, str], Cell]] = {}
    for m in runs:
        if m.status not in ("completed", "partial"):  # a partial run's failed benchmarks have no value
            continue
        rank = (_created_key(m.created), m.run_id)
        for c in cells_of(m):
            key = (c.model, c.benchmark)
            if key not in best or rank > best[key][0]:
                best[key] = (rank, c)
    return [c for _, c in best.values()]


def _matches(c: Cell, filters: dict[str, str]) -> bool:
    return all(not filters.get(k) or getattr(c, k) == filters[k] for k in FILTER_KEYS)


def build_leaderboard(cells: list[Cell], filters: dict[str, str | None] | None = None) -> dict[str, Any]:
    """Model × benchmark matrix over the cells that pass the filters.

    Columns are the benchmarks with any passing cell *ignoring the model filter*, so a single selected model still
    shows its coverage gaps; rows are models with at least one passing cell. A missing cell is None.
    ``radar_default`` is the cell field the radar plots until the user picks one: ``verifier`` when any shown cell has
    a verifier score, else ``value`` (each benchmark's headline metric), so runs without the verifier still draw.
    """
    f = {k: v for k, v in (filters or {}).items() if k in FILTER_KEYS and v}
    no_model = {k: v for k, v in f.items() if k != "model"}
    col_cells = [c for c in cells if _matches(c, no_model)]
    row_cells = [c for c in col_cells if _matches(c, f)]
    benches: dict[str, Cell] = {}
    for c in sorted(col_cells, key=lambda c: (c.benchmark, -_created_key(c.created))):
        benches.setdefault(c.benchmark, c)
    bench_names = sorted(benches)
    grid: dict[str, dict[str, Cell]] = {}
    for c in row_cells:
        grid.setdefault(c.model, {})[c.benchmark] = c
    models: list[dict[str, Any]] = []
    for name, row in grid.items():
        ver = [c.verifier for c in row.values() if c.verifier is not None]
        models.append(
            {
                "name": name,
                "engines": sorted({c.engine for c in row.values()}),
                "cells": {b: (asdict(row[b]) if b in row else None) for b in bench_names},
                "mean_verifier": (sum(ver) / len(ver)) if ver else None,
                "coverage": 100.0 * len(row) / len(bench_names) if bench_names else 0.0,
                "num_cells": len(row),
            }
        )
    models.sort(key=lambda r: (r["mean_verifier"] is None, -(r["mean_verifier"] or 0.0), r["name"]))
    metric_names: dict[str, set[str]] = {}
    for c in col_cells:
        if c.metric:
            metric_names.setdefault(c.benchmark, set()).add(c.metric)
    return {
        "benchmarks": [
            {
                "name": b,
                "modality": benches[b].modality,
                "framework": benches[b].framework,
                "metric": "/".join(sorted(metric_names.get(b, set()))) or None,
            }
            for b in bench_names
        ],
        "models": models,
        "options": {k: sorted({getattr(c, k) for c in cells}) for k in FILTER_KEYS},
        "applied": f,
        "radar_default": "verifier" if any(c.verifier is not None for c in row_cells) else "value",
    }


def sample_view(r: Record) -> dict[str, Any]:
    """JSON-friendly sample: prompt text and media listed separately so the page can show both compactly."""
    prompt = "\n\n".join(f"[{m.role}] {m.text_value()}" for m in r.messages if m.text_value())
    media = [{"type": c.type, "value": c.value} for m in r.messages for c in m.content if c.type != "text"]
    return {
        "model": r.model,
        "benchmark": r.benchmark,
        "index": r.index,
        "sample_id": r.sample_id,
        "prompt": prompt,
        "media": media,
        "label": r.label,
        "options": r.options,
        "prediction": r.prediction,
        "prediction_postprocessed": r.prediction_postprocessed,
        "metrics": {k: _num(v) for k, v in r.metrics.items()},
        "error": r.error.model_dump() if r.error else None,
        "latency": _num(r.latency),
    }


class ArtifactIndex:
    """Thread-safe view of ``runs_dir``; every public call rescans (stat only) before answering."""

    def __init__(self, runs_dir: Path) -> None:
        self.runs_dir = Path(runs_dir)
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}
        self._cells: list[Cell] | None = None

    def refresh(self) -> None:
        """Stat every ``<run>/manifest.json``; parse new or changed ones, drop vanished ones."""
        with self._lock:
            seen: dict[str, tuple[int, int, int]] = {}
            try:
                dirs = [d for d in os.scandir(self.runs_dir) if d.is_dir()]
            except FileNotFoundError:
                dirs = []
            for d in dirs:
                sig = _sig(Path(d.path) / MANIFEST)
                if sig is not None:
                    seen[d.name] = sig
            changed = set(self._entries) != set(seen)
            for name, sig in seen.items():
                old = self._entries.get(name)
                if old is not None and old.sig == sig:
                    continue
                changed = True
                try:
                    self._entries[name] = _Entry(sig=sig, manifest=read_manifest(self.runs_dir / name))
                except (OSError, ValueError) as e:  # half-written or foreign file: show it, don't crash
                    self._entries[name] = _Entry(sig=sig, manifest=None, error=f"{type(e).__name__}: {e}")
            for name in set(self._entries) - set(seen):
                del self._entries[name]
            if changed:
                self._cells = None

    def manifests(self) -> list[RunManifest]:
        self.refresh()
        with self._lock:
            return [e.manifest for e in self._entries.values() if e.manifest is not None]

    def cells(self) -> list[Cell]:
        self.refresh()
        with self._lock:
            if self._cells is None:
                self._cells = select_newest([e.manifest for e in self._entries.values() if e.manifest is not None])
            return list(self._cells)

    def leaderboard(self, **filters: str | None) -> dict[str, Any]:
        return build_leaderboard(self.cells(), filters)

    def runs(self) -> list[dict[str, Any]]:
        """Run summaries, newest first; unreadable run dirs are listed with their error."""
        self.refresh()
        with self._lock:
            items = list(self._entries.items())
        out: list[dict[str, Any]] = []
        for name, e in items:
            m = e.manifest
            if m is None:
                out.append({"run_id": name, "status": "unreadable", "error": e.error, "created": ""})
                continue
            out.append(
                {
                    "run_id": m.run_id,
                    "dir": name,
                    "suite_name": m.suite_name,
                    "status": m.status,
                    "error": m.error,
                    "created": m.created,
                    "models": [{"name": mp.name, "engine": mp.engine} for mp in m.models],
                    "benchmarks": [
                        {"name": b.name, "modality": b.modality, "framework": b.framework} for b in m.benchmarks
                    ],
                    "has_records": (self.runs_dir / name / RECORDS).is_file(),
                }
            )
        out.sort(key=lambda r: (_created_key(r["created"]), r["run_id"]), reverse=True)
        return out

    def _dir_of(self, run_id: str) -> str | None:
        """Look a run up by id or directory name; never join an untrusted id onto the filesystem path."""
        self.refresh()
        with self._lock:
            for name, e in self._entries.items():
                if name == run_id or (e.manifest is not None and e.manifest.run_id == run_id):
                    return name
        return None

    def has_run(self, run_id: str) -> bool:
        return self._dir_of(run_id) is not None

    def records(self, run_id: str) -> list[Record]:
        """All records of a run (cached until records.parquet changes); KeyError for an unknown run."""
        name = self._dir_of(run_id)
        if name is None:
            raise KeyError(run_id)
        path = self.runs_dir / name / RECORDS
        sig = _sig(path)
        with self._lock:
            e = self._entries.get(name)
            if e is not None and e.records is not None and e.records_sig == sig:
                return e.records
        recs = read_records(self.runs_dir / name) if sig is not None else []
        with self._lock:
            e = self._entries.get(name)
            if e is not None:
                e.records, e.records_sig = recs, sig
        return recs

    def samples(
        self, run_id: str, benchmark: str | None = None, model: str | None = None, offset: int = 0, limit: int = 50
    ) -> dict[str, Any]:
        recs = [
            r
            for r in self.records(run_id)
            if (not benchmark or r.benchmark == benchmark) and (not model or r.model == model)
        ]
        recs.sort(key=lambda r: r.key)
        page = recs[offset : offset + limit]
        return {
            "run_id": run_id,
            "total": len(recs),
            "offset": offset,
            "limit": limit,
            "samples": [sample_view(r) for r in page],
        }

    def compare(
        self,
        run_a: str,
        run_b: str,
        benchmark: str,
        model_a: str | None = None,
        model_b: str | None = None,
        offset: int = 0,
        limit: int = 50,
    ) -> dict[str, Any]:
        """Samples of two runs aligned by (benchmark, index); one side is None where that run lacks the sample."""
        sides = []
        for run, model in ((run_a, model_a), (run_b, model_b)):
            recs = [r for r in self.records(run) if r.benchmark == benchmark]
            models = sorted({r.model for r in recs})
            chosen = model if model else (models[0] if models else None)
            sides.append((chosen, models, {r.index: r for r in recs if r.model == chosen}))
        (ma, models_a, a), (mb, models_b, b) = sides
        paired = self.paired(run_a, run_b, benchmark, list(a.values()), list(b.values()))
        indices = sorted(set(a) | set(b))
        pairs = []
        for i in indices[offset : offset + limit]:
            ra, rb = a.get(i), b.get(i)
            pairs.append(
                {
                    "benchmark": benchmark,
                    "index": i,
                    "a": sample_view(ra) if ra else None,
                    "b": sample_view(rb) if rb else None,
                }
            )
        return {
            "run_a": run_a,
            "run_b": run_b,
            "benchmark": benchmark,
            "model_a": ma,
            "model_b": mb,
            "models_a": models_a,
            "models_b": models_b,
            "total": len(indices),
            "offset": offset,
            "limit": limit,
            "pairs": pairs,
            "paired": paired,
        }

    def manifest(self, run_id: str) -> RunManifest | None:
        name = self._dir_of(run_id)
        with self._lock:
            e = self._entries.get(name) if name else None
            return e.manifest if e else None

    def paired(
        self, run_a: str, run_b: str, benchmark: str, recs_a: list[Record], recs_b: list[Record]
    ) -> dict[str, Any] | None:
        """The two sides' paired comparison on ``benchmark`` (``omnieval compare``'s), with each side's score row
        and its standard error; None when either side has no Records there."""
        from omnieval._paired import BenchInfo, paired_rows

        if not recs_a or not recs_b:
            return None
        ma, mb = self.manifest(run_a), self.manifest(run_b)
        info = {b.name: BenchInfo(metrics=b.metrics, cluster_by=b.cluster_by) for b in (ma.benchmarks if ma else [])}
        (row,) = paired_rows(recs_a, recs_b, info)

        def score(m: RunManifest | None, model: str) -> dict[str, Any] | None:
            rows = [s for s in (m.scores if m else []) if s.benchmark == benchmark and s.model == model]
            head = next((s for s in rows if s.metric == row.metric), rows[0] if rows else None)
            if head is None:
                return None
            return {"metric": head.metric, "value": _num(head.value), "stderr": _num(head.stderr),
                    "stderr_method": head.stderr_method, "num_samples": head.num_samples}  # fmt: skip

        return {
            **asdict(row),
            "significant": row.significant,
            "score_a": score(ma, recs_a[0].model),
            "score_b": score(mb, recs_b[0].model),
        }
