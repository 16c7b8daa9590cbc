"""``omnieval pool list|release``: the replicas a cluster's pool holds, and for which runs.

A run started with ``--keep-pool`` leaves its replicas up for later suites, without a heartbeat lease: nothing
releases them but this command (or the controller's shutdown). Runs that hold a lease are shown with the age of
their last heartbeat; they release themselves, or are released after their grace period.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

from omnieval.core import OmnievalUserError


def _connect(address: str | None) -> Any:
    import ray

    from pool import get_controller

    addr = address or os.environ.get("RAY_ADDRESS") or "auto"
    try:
        ray.init(address=addr, namespace="omnieval", log_to_driver=False, logging_level=logging.ERROR)
    except ConnectionError as e:
        raise OmnievalUserError(
            f"no Ray cluster at {addr!r} ({e}); a pool outlives its run only on a running cluster: pass --address "
            "(or set RAY_ADDRESS) to the head started with `ray start --head`"
        ) from e
    try:
        return get_controller(create=False)
    except ValueError as e:
        raise OmnievalUserError(f"the cluster at {addr!r} has no omnieval pool (no run has started one)") from e


def cmd_pool(args: argparse.Namespace) -> int:
    import ray
    from rich.console import Console
    from rich.table import Table

    ctl = _connect(args.address)
    users: dict[str, list[str]] = ray.get(ctl.users.remote())
    leases: dict[str, tuple[float, float]] = ray.get(ctl.leases.remote())
    if args.pool_cmd == "release":
        runs = sorted({r for us in users.values() for r in us}) if args.all else args.runs
        if not runs:
            raise OmnievalUserError("name the runs to release (see `omnieval pool list`), or pass --all")
        unknown = [r for r in runs if not any(r in us for us in users.values())]
        if unknown:
            raise OmnievalUserError(f"no pool user {', '.join(unknown)}; `omnieval pool list` shows the runs")
        for r in runs:
            removed = ray.get(ctl.release.remote(r))
            print(f"released {r}: {len(removed)} replica(s) removed{' (' + ', '.join(removed) + ')' if removed else ''}")
        return 0
    reps = ray.get(ctl.replicas.remote())
    t = Table(title=f"pool: {len(reps)} replica(s)")
    for col in ("model", "replica", "engine", "state", "node", "in flight", "held by"):
        t.add_column(col)

    def holder(run: str) -> str:
        if run in leases:
            age, grace = leases[run]
            return f"{run} (heartbeat {age:.0f}s ago, grace {grace:.0f}s)"
        return f"{run} (kept: --keep-pool)"

    for r in sorted(reps, key=lambda r: (r.model, r.replica_id)):
        t.add_row(r.model, r.replica_id, r.engine, r.state, (r.node_id or "?")[:8], str(r.in_flight),
                  "; ".join(holder(u) for u in users.get(r.model, [])) or "nobody (released)")  # fmt: skip
    Console(width=None if sys.stdout.isatty() else 240).print(t)  # piped (a job log, a script): never truncated
    return 0
