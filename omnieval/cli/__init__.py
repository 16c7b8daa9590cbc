"""``omnieval`` command line: run, plan, pool, rerun, schema, list, setup, dashboard, serve, bench, compare.

This module only wires the parser; each command lives in ``omnieval/cli/_<command>.py`` (or, for commands that parse
their own arguments, in its package's ``cli_main``).

Exit codes: 0 ok; 1 run failed or partial (or a rerun differs); 2 bad input (config, path, missing extra); 130 / 143
cancelled by SIGINT / SIGTERM (resumable).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from omnieval.core import ConfigError, OmnievalError, OmnievalUserError, import_target, user_message

__all__ = ["entry", "main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="omnieval", description=__doc__)
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="cmd", required=True)

    r = sub.add_parser("run", help="run a suite YAML")
    r.add_argument("suite", nargs="?", help="suite YAML (omit with --resume)")
    r.add_argument("--output-dir", help="parent directory of the run artifact (default: the suite's output.dir)")
    r.add_argument("--resume", metavar="ARTIFACT_DIR", help="finish an interrupted run from its checkpoint")
    r.add_argument("--no-progress", action="store_true", help="no live progress bars")
    r.add_argument("--keep-pool", action="store_true", help="leave replicas running for later suites")

    pl = sub.add_parser("plan", help="what a run would do (samples, replicas per node, engines), nothing deployed")
    pl.add_argument("suite", help="suite YAML")

    po = sub.add_parser("pool", help="list a cluster's pool replicas and who holds them, or release them")
    po.add_argument("--address", help="Ray cluster address (default: RAY_ADDRESS, else the local head)")
    pos = po.add_subparsers(dest="pool_cmd", required=True)
    pos.add_parser("list", help="replicas, their state and node, and the runs holding them")
    prel = pos.add_parser("release", help="release runs' hold on the pool; models nobody holds are removed")
    prel.add_argument("runs", nargs="*", help="run ids (from `omnieval pool list`)")
    prel.add_argument("--all", action="store_true", help="every run, kept or leased")

    rr = sub.add_parser("rerun", help="re-run an artifact's exact config and report any difference")
    rr.add_argument("artifact")
    rr.add_argument("--output-dir", help="where the new run goes (default: next to the artifact)")

    sub.add_parser("schema", help="print the suite JSON Schema")
    sub.add_parser("list", help="list registered benchmarks, engines, metrics, routing policies")

    s = sub.add_parser("setup", help="one-off set-up steps")
    s.add_argument(
        "what", choices=["llamacpp", "model"], help="llamacpp: build llama-server; model: fetch the default GGUF"
    )

    sub.add_parser("dashboard", help="serve or export the results dashboard", add_help=False)
    sub.add_parser("serve", help="run the remote job server", add_help=False)
    sub.add_parser("bench", help="throughput benchmarks", add_help=False)
    sub.add_parser("compare", help="native-vs-verifier table across runs; paired test of two runs", add_help=False)
    sub.add_parser("export", help="a run's score rows as CSV, or its Records as JSON lines", add_help=False)
    return p


_COMMANDS = {
    "run": "omnieval.cli._run:cmd_run",
    "rerun": "omnieval.cli._rerun:cmd_rerun",
    "plan": "omnieval.cli._plan:cmd_plan",
    "pool": "omnieval.cli._pool:cmd_pool",
    "schema": "omnieval.cli._schema:cmd_schema",
    "list": "omnieval.cli._list:cmd_list",
    "setup": "omnieval.cli._setup:cmd_setup",
}
"""Commands parsed here: one module each, imported only when run so ``omnieval --help`` stays fast."""

_PASSTHROUGH = {
    "dashboard": "omnieval.dashboard:cli_main",
    "serve": "omnieval.jobserver:cli_main",
    "bench": "omnieval.perf:cli_main",
    "compare": "omnieval.compare:cli_main",
    "export": "omnieval._export:cli_main",
}
"""Commands that parse their own arguments: the rest of argv goes to the package's ``cli_main``."""


def main(argv: Sequence[str] | None = None) -> int:
    """The ``omnieval`` entry point; returns the exit code instead of raising, so scripts can branch on it."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in _PASSTHROUGH:
        try:
            return int(import_target(_PASSTHROUGH[argv[0]])(argv[1:]))
        except (ConfigError, OmnievalUserError) as e:
            print(f"omnieval: error: {user_message(e)}", file=sys.stderr)
            return 2
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        return int(import_target(_COMMANDS[args.cmd])(args))
    except (ConfigError, OmnievalUserError) as e:
        print(f"omnieval: error: {user_message(e)}", file=sys.stderr)
        return 2
    except OmnievalError as e:
        print(f"omnieval: error: {user_message(e)}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("omnieval: interrupted; resume with `omnieval run --resume <artifact dir>`", file=sys.stderr)
        return 130


def entry() -> None:
    """The console script (and ``python -m omnieval``): ``main``, then a quick exit.

    Everything a command writes is closed and flushed by then; what is left is Ray's shutdown of a local instance
    (done here, as its atexit hook would) and the interpreter's teardown of every imported module (about a second
    after an lm-eval run, for nothing). ``main`` itself returns normally, for callers in-process.
    """
    code = main()
    import os

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
