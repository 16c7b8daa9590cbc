"""``omnieval dashboard``: leaderboard, radar chart and sample comparison over a directory of run artifacts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from omnieval.dashboard._app import create_app
from omnieval.dashboard._export import export_data, export_static
from omnieval.dashboard._index import ArtifactIndex, Cell, build_leaderboard, select_newest

__all__ = [
    "ArtifactIndex",
    "Cell",
    "build_leaderboard",
    "cli_main",
    "create_app",
    "export_data",
    "export_static",
    "select_newest",
]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="omnieval dashboard",
        description="Serve a leaderboard over run artifacts (new runs appear without restart), or export it.",
    )
    p.add_argument("artifacts_dir", metavar="ARTIFACTS_DIR", type=Path, help="directory holding <run_id>/ folders")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default: %(default)s)")
    p.add_argument("--port", type=int, default=8050, help="port (default: %(default)s)")
    p.add_argument("--export", metavar="DIR", type=Path, help="write a static site to DIR instead of serving")
    p.add_argument("--max-samples", type=int, default=100, help="samples per (run, model, benchmark) in an export")
    return p


def cli_main(argv: list[str]) -> int:
    """Entry point wired to ``omnieval dashboard``; returns the process exit code."""
    args = _parser().parse_args(argv)
    if not args.artifacts_dir.is_dir():
        print(f"omnieval dashboard: {args.artifacts_dir} is not a directory", file=sys.stderr)
        return 2
    if args.export is not None:
        page = export_static(args.artifacts_dir, args.export, max_samples=args.max_samples)
        print(f"wrote {page}")
        return 0
    import uvicorn

    uvicorn.run(create_app(args.artifacts_dir), host=args.host, port=args.port, log_level="info")
    return 0
