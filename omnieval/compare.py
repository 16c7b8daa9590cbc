"""``omnieval compare RUN_DIR...``: native vs verifier score across engines/frameworks and prompt conditions.

The paper's Table 3 layout: one row per (benchmark, model, score kind), one column per (framework·engine, prompt),
and a Δ column (max − min across columns) that shows how much the configuration moves each score. With exactly two
runs, a paired table follows: per benchmark, B − A on the same samples with its 95 % interval and p-value
(``omnieval._paired``), so a real difference can be told from noise.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from omnieval._artifacts import RunManifest, read_manifest

PROMPT_ABBR = {"native": "Sp.", "uniform": "Un."}


def score_kind(metric: str) -> str:
    """``Native`` for a benchmark's own metrics; each verifier score row (``verifier``, ``verifier_prob``, any
    ``verifier*``) is its own kind, listed beside the native one: ``Verifier``, ``Verifier prob``."""
    if not metric.startswith("verifier"):
        return "Native"
    rest = metric[len("verifier") :].strip("_")
    return "Verifier" + (f" {rest.replace('_', ' ')}" if rest else "")


def comparison(manifests: list[RunManifest]) -> tuple[list[str], list[dict[str, Any]]]:
    """Columns and rows; a row's cells map column → value (missing where a run did not cover it)."""
    cells: dict[tuple[str, str, str], dict[str, float | None]] = defaultdict(dict)
    errors: dict[tuple[str, str, str], dict[str, float | None]] = defaultdict(dict)
    columns: list[str] = []
    for m in manifests:
        for s in m.scores:
            kind = score_kind(s.metric)
            bench, _, variant = s.benchmark.partition("@")
            col = f"{s.framework}·{s.engine} {PROMPT_ABBR[variant or 'native']}"
            if col not in columns:
                columns.append(col)
            if kind == "Native" and col in cells[(bench, s.model, kind)]:
                continue  # headline (first) native metric only
            cells[(bench, s.model, kind)][col] = s.value
            errors[(bench, s.model, kind)][col] = s.stderr
    rows = []
    for (bench, model, kind), vals in sorted(cells.items()):
        present = [v for v in vals.values() if v is not None]
        rows.append({"benchmark": bench, "model": model, "score": kind, "cells": vals,
                     "stderr": errors[(bench, model, kind)],
                     "delta": (max(present) - min(present)) if len(present) > 1 else None})  # fmt: skip
    return columns, rows


def cli_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="omnieval compare", description=__doc__)
    p.add_argument("runs", nargs="+", help="run artifact directories")
    p.add_argument("--json", dest="json_out", help="also write the table as JSON here")
    args = p.parse_args(argv)
    manifests = [read_manifest(Path(r)) for r in args.runs]
    columns, rows = comparison(manifests)
    t = Table(title="native vs verifier across engines and prompts (Sp. = benchmark-specific, Un. = uniform)")
    for c in ["benchmark", "model", "score", *columns, "Δ"]:
        t.add_column(c)
    for r in rows:
        vals = r["cells"]
        assert isinstance(vals, dict)
        errs = r["stderr"]
        assert isinstance(errs, dict)
        fmt = [("—" if vals.get(c) is None else f"{vals[c]:.1f}" + ("" if errs.get(c) is None else f" ± {errs[c]:.1f}"))
               for c in columns]  # fmt: skip
        delta = r["delta"]
        t.add_row(str(r["benchmark"]), str(r["model"]), str(r["score"]), *fmt, "—" if delta is None else f"{delta:.1f}")
    Console().print(t)
    paired: list[dict[str, Any]] = []
    if len(args.runs) == 2:
        paired = paired_table(Path(args.runs[0]), Path(args.runs[1]))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"columns": columns, "rows": rows, "paired": paired}, indent=2))
    return 0


def paired_table(run_a: Path, run_b: Path) -> list[dict[str, Any]]:
    """Print (and return) the paired comparison of two runs' Records."""
    from dataclasses import asdict

    from omnieval._artifacts import read_records
    from omnieval._paired import BenchInfo, paired_rows

    info = {b.name: BenchInfo(metrics=b.metrics, cluster_by=b.cluster_by) for b in read_manifest(run_a).benchmarks}
    rows = paired_rows(read_records(run_a), read_records(run_b), info)
    t = Table(title=f"paired on the same samples: B ({run_b.name}) − A ({run_a.name}); * p < 0.05")
    for c in ["benchmark", "metric", "n", "A", "B", "B − A", "95% CI", "p", "test", "note"]:
        t.add_column(c)

    def f(v: float | None) -> str:
        return "—" if v is None else f"{v:.1f}"

    for r in rows:
        ci = "—" if r.ci_low is None else f"[{r.ci_low:.1f}, {r.ci_high:.1f}]"
        p = "—" if r.p_value is None else f"{r.p_value:.3g}{' *' if r.significant else ''}"
        t.add_row(r.benchmark, r.metric or "—", str(r.n), f(r.mean_a), f(r.mean_b), f(r.diff), ci, p, r.method, r.note)
    Console().print(t)
    return [{**asdict(r), "significant": r.significant} for r in rows]
