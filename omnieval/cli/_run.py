"""``omnieval run``: load a suite, run it, print the score table, the throughput line and the artifact path."""

from __future__ import annotations

import argparse
import sys

from rich.console import Console
from rich.table import Table

from omnieval._artifacts import RunManifest
from omnieval._suite import load_suite
from omnieval.core import ConfigError


def score_table(manifest: RunManifest) -> Table:
    t = Table(title=f"{manifest.suite_name} · {manifest.run_id}")
    for col in ("model", "benchmark", "metric", "value", "samples", "errors"):
        t.add_column(col, justify="right" if col in ("value", "samples", "errors") else "left")
    for s in manifest.scores:
        if s.error:
            value = "FAILED"
        elif s.value is None:
            value = "n/a"
        else:
            value = f"{s.value:.2f}" + (f" ± {s.stderr:.2f}" if s.stderr is not None else "")
        t.add_row(s.model, s.benchmark, s.metric, value, str(s.num_samples), str(s.num_errors))
    return t


def throughput_line(manifest: RunManifest) -> str:
    """The end-of-run throughput line. Rates are over the requests this run inferred; a run that inferred none
    (every answer from the response cache, or a resume with nothing left) says so instead of printing 0 tok/s."""
    tp = manifest.throughput
    head = f"inference {manifest.timings.get('inference_s', 0):.1f}s"
    inferred, hits = int(tp.get("inferred", 0)), int(tp.get("cache_hits", 0))
    cached = f"{hits} answered from the response cache" if hits else ""
    if not inferred:
        return f"{head} · no request inferred" + (f" ({cached})" if cached else "")
    rates = f"{tp.get('output_tokens_per_s', 0):.1f} output tok/s · {tp.get('requests_per_s', 0):.2f} req/s"
    return f"{head} · {rates}" + (f" · {cached}" if cached else "")


def cmd_run(args: argparse.Namespace) -> int:
    from omnieval._lifecycle import RunCancelled, cancel_on_signals

    try:
        with cancel_on_signals():
            return _run(args)
    except RunCancelled as e:
        print(f"omnieval: run {e}; the checkpoint keeps every answered sample — finish it with "
              "`omnieval run --resume <artifact dir>`", file=sys.stderr)
        return e.exit_code


def _run(args: argparse.Namespace) -> int:
    from omnieval._runner import run_suite

    if args.resume:
        result = run_suite(None, resume_dir=args.resume, show_progress=not args.no_progress, keep_pool=args.keep_pool)  # type: ignore[arg-type]
    else:
        if not args.suite:
            raise ConfigError("omnieval run: give a suite YAML, or --resume ARTIFACT_DIR")
        suite = load_suite(args.suite)
        result = run_suite(
            suite, config_path=args.suite, output_dir=args.output_dir, show_progress=not args.no_progress,
            keep_pool=args.keep_pool,
        )  # fmt: skip
    console = Console()
    console.print(score_table(result.manifest))
    console.print(throughput_line(result.manifest))
    print(f"artifact: {result.run_dir}", file=sys.stdout)
    errors = {(s.model, s.benchmark): s.num_errors for s in result.manifest.scores}
    if any(errors.values()):
        print(f"warning: {sum(errors.values())} samples ended with an error (kept in records.parquet)", file=sys.stderr)
    failed = list(dict.fromkeys(s.error for s in result.manifest.scores if s.error))
    for line in failed:
        print(f"error: {line}", file=sys.stderr)
    if failed:  # the other benchmarks' results are in the artifact; `--resume` retries a failed framework task
        print(f"omnieval: {len(failed)} benchmark(s) failed; the run is {result.manifest.status} (exit 1); "
              f"artifact {result.run_dir}", file=sys.stderr)
        return 1
    return 0
