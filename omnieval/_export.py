"""``omnieval export RUN_DIR --format lm-eval|csv|jsonl``: a run's results for tools that do not read omnieval's
artifact.

``lm-eval``: lm-eval's own ``results_<date>.json`` and ``samples_<task>_<date>.jsonl`` per model (see
``omnieval._export_lmeval``), in a directory.
``csv``: one line per score row (model, benchmark, metric, value, stderr, samples, errors, engine, framework,
modality, error), the spreadsheet view of the run's table. ``jsonl``: every Record as one JSON line, in key order.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from omnieval._artifacts import ScoreRow, read_manifest, read_records

FORMATS = ("lm-eval", "csv", "jsonl")
CSV_FIELDS = list(ScoreRow.model_fields)


def export(run_dir: Path, fmt: str, out: Path) -> Path:
    """Write the run's ``fmt`` export to ``out`` (a file; a directory for ``lm-eval``); returns it."""
    if fmt == "lm-eval":
        from omnieval._export_lmeval import export_lmeval

        export_lmeval(run_dir, out)
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "csv":
        rows = read_manifest(run_dir).scores
        with open(out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
            w.writeheader()
            w.writerows(r.model_dump() for r in rows)
    elif fmt == "jsonl":
        with open(out, "w") as f:
            f.writelines(r.model_dump_json() + "\n" for r in read_records(run_dir))
    else:
        raise ValueError(f"unknown export format {fmt!r}; one of {FORMATS}")
    return out


def cli_main(argv: list[str]) -> int:
    from omnieval.core import OmnievalUserError

    p = argparse.ArgumentParser(prog="omnieval export", description=__doc__)
    p.add_argument("run", help="run artifact directory")
    p.add_argument("--format", choices=FORMATS, required=True)
    p.add_argument("--out", help="output file, a directory for lm-eval (default: <run>/export.<format>, "
                   "<run>/export-lm-eval/)")
    args = p.parse_args(argv)
    run = Path(args.run)
    if not (run / "manifest.json").exists():
        raise OmnievalUserError(f"{run} is not a run artifact (no manifest.json); give the directory `omnieval run` printed")
    default = run / ("export-lm-eval" if args.format == "lm-eval" else f"export.{args.format}")
    out = export(run, args.format, Path(args.out) if args.out else default)
    print(out, file=sys.stdout)
    return 0
