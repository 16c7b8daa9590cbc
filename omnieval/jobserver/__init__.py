"""``omnieval serve``: a persistent job server for remote evaluation requests (paper §3.3).

Clients POST a suite to ``/add_job``; the server stores it in SQLite and runs it as a Ray job
(``omnieval run <suite> --output-dir <jobs-dir>/<id>/runs``). Start it with a token in the environment::

    export OMNIEVAL_SERVER_TOKEN=$(python -c 'import secrets; print(secrets.token_urlsafe(32))')
    RAY_AUTH_MODE=token omnieval serve --ray-address http://127.0.0.1:8265
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from omnieval.jobserver._executors import (
    DEFAULT_ENTRYPOINT,
    JobNotFoundError,
    JobRunner,
    RayJobRunner,
    RunnerStatus,
    SubprocessJobRunner,
)
from omnieval.jobserver._store import Job, JobState, JobStore

__all__ = [
    "DEFAULT_ENTRYPOINT",
    "Job",
    "JobNotFoundError",
    "JobRunner",
    "JobState",
    "JobStore",
    "RayJobRunner",
    "RunnerStatus",
    "SubprocessJobRunner",
    "build_parser",
    "cli_main",
    "create_app",
]

MIN_TOKEN_LEN = 16


def create_app(*args, **kwargs):  # type: ignore[no-untyped-def]
    """``omnieval.jobserver._app.create_app``, imported lazily so ``import omnieval.jobserver`` stays cheap."""
    from omnieval.jobserver._app import create_app as _create_app

    return _create_app(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="omnieval serve", description="Run the omnieval remote job server.")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default: loopback only)")
    p.add_argument("--port", type=int, default=8070)
    p.add_argument("--db", default="omnieval-server/jobs.sqlite", help="SQLite job database (created if missing)")
    p.add_argument("--token-env", default="OMNIEVAL_SERVER_TOKEN", help="environment variable holding the API token")
    p.add_argument("--ray-address", default="http://127.0.0.1:8265", help="Ray dashboard (job API) address")
    p.add_argument("--max-concurrent", type=int, default=1, help="jobs running at once; the rest wait as pending")
    p.add_argument("--jobs-dir", default=None, help="per-job suite and run outputs (default: <db dir>/jobs)")
    p.add_argument(
        "--runner",
        choices=("ray", "subprocess"),
        default="ray",
        help="'subprocess' runs jobs as local processes, for machines without a Ray cluster",
    )
    p.add_argument(
        "--entrypoint-template",
        default=DEFAULT_ENTRYPOINT,
        help="job command; {suite}, {out}, {job_id}, {python} are replaced (shell-quoted)",
    )
    p.add_argument("--poll-interval", type=float, default=2.0, help="seconds between status polls of active jobs")
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    return p


def cli_main(argv: list[str]) -> int:
    """Entry of ``omnieval serve``; returns the exit code (2 on a configuration error)."""
    args = build_parser().parse_args(argv)
    token = os.environ.get(args.token_env, "").strip()
    if len(token) < MIN_TOKEN_LEN:
        what = "is not set" if not token else f"is shorter than {MIN_TOKEN_LEN} characters"
        print(
            f"omnieval serve: refusing to start: ${args.token_env} {what}. The server runs jobs on your cluster, so "
            f"it needs an API token: export {args.token_env}=$(python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))') and have clients send 'Authorization: Bearer <token>'.",
            file=sys.stderr,
        )
        return 2
    if args.max_concurrent < 1:
        print(f"omnieval serve: --max-concurrent must be >= 1, got {args.max_concurrent}", file=sys.stderr)
        return 2
    db = Path(args.db)
    jobs_dir = Path(args.jobs_dir) if args.jobs_dir else db.parent / "jobs"
    jobs_dir.mkdir(parents=True, exist_ok=True)
    runner: JobRunner
    if args.runner == "subprocess":
        runner = SubprocessJobRunner(jobs_dir, args.entrypoint_template)
    else:
        runner = RayJobRunner(args.ray_address, jobs_dir, args.entrypoint_template)

    import uvicorn

    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    store = JobStore(db)
    try:
        app = create_app(
            store, runner, token=token, max_concurrent=args.max_concurrent, poll_interval_s=args.poll_interval
        )
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    finally:
        store.close()
    return 0
