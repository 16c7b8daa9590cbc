"""``omnieval rerun``: re-run an artifact's exact config and report every difference (scores, predictions, data)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from omnieval._artifacts import RunManifest, read_manifest, read_records
from omnieval.core import SuiteConfig


def diff_runs(a_dir: Path, b_dir: Path) -> list[str]:
    """Human-readable differences between two artifacts; empty means identical scores and predictions."""
    return diff_scores(a_dir, b_dir) + diff_predictions(a_dir, b_dir)


def diff_scores(a_dir: Path, b_dir: Path) -> list[str]:
    """What changes the result: data, weights, scores."""
    a, b = read_manifest(a_dir), read_manifest(b_dir)
    out = _diff_provenance(a, b)
    sa = {(s.model, s.benchmark, s.metric): s.value for s in a.scores}
    sb = {(s.model, s.benchmark, s.metric): s.value for s in b.scores}
    for k in sorted(set(sa) | set(sb)):
        if sa.get(k) != sb.get(k):
            out.append(f"score {'/'.join(k)}: {sa.get(k)} -> {sb.get(k)}")
    return out


def diff_predictions(a_dir: Path, b_dir: Path) -> list[str]:
    out = []
    ra = {r.key: r for r in read_records(a_dir)}
    rb = {r.key: r for r in read_records(b_dir)}
    changed = [
        k for k in sorted(set(ra) | set(rb)) if (ra.get(k) and ra[k].prediction) != (rb.get(k) and rb[k].prediction)
    ]
    if changed:
        ex = ", ".join("/".join(map(str, k)) for k in changed[:5])
        out.append(f"{len(changed)} of {len(ra)} predictions differ (e.g. {ex})")
    return out


def _diff_provenance(a: RunManifest, b: RunManifest) -> list[str]:
    out = []
    da = {x.name: x.data_sha256 for x in a.benchmarks}
    db = {x.name: x.data_sha256 for x in b.benchmarks}
    out += [f"benchmark data {n} changed: {da[n]} -> {db.get(n)}" for n in da if da[n] != db.get(n)]
    ma = {x.name: x.sha256 for x in a.models}
    mb = {x.name: x.sha256 for x in b.models}
    out += [f"model weights {n} changed: {ma[n]} -> {mb.get(n)}" for n in ma if ma[n] != mb.get(n)]
    return out


def cmd_rerun(args: argparse.Namespace) -> int:
    from omnieval._runner import run_suite

    src = Path(args.artifact)
    old = read_manifest(src)
    suite = SuiteConfig.model_validate(old.config)
    suite.cache.enabled = False  # reproduce by inference, not by replaying the cache
    result = run_suite(
        suite, config_path=old.config_path, output_dir=args.output_dir or str(src.parent), show_progress=False
    )
    print(f"rerun artifact: {result.run_dir}")
    preds = diff_predictions(src, result.run_dir)
    for d in preds:  # reported, but the reproduced result is the scores
        print(f"note: {d}")
    scores = diff_scores(src, result.run_dir)
    if not scores:
        which = "and all predictions " if not preds else ""
        print(f"identical: {len(result.manifest.scores)} scores {which}match {src}")
        return 0
    print("differences:", file=sys.stderr)
    for d in scores:
        print(f"  {d}", file=sys.stderr)
    return 1
