"""``omnieval`` command line: run, rerun, schema, list, setup, dashboard, serve, bench.

Exit codes: 0 ok; 1 run failed (or a rerun differs); 2 bad input (config, path, missing extra); 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence

from omnieval.core import ConfigError, OmnievalError, OmnievalUserError, user_message

__all__ = ["main"]


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
    sub.add_parser("compare", help="native-vs-verifier table across runs", add_help=False)
    return p


_PASSTHROUGH = {
    "dashboard": "omnieval.dashboard:cli_main",
    "serve": "omnieval.server:cli_main",
    "bench": "omnieval.bench:cli_main",
    "compare": "omnieval.compare:cli_main",
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in _PASSTHROUGH:
        from omnieval.core import import_target

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
        return _dispatch(args)
    except (ConfigError, OmnievalUserError) as e:
        print(f"omnieval: error: {user_message(e)}", file=sys.stderr)
        return 2
    except OmnievalError as e:
        print(f"omnieval: error: {user_message(e)}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("omnieval: interrupted; resume with `omnieval run --resume <artifact dir>`", file=sys.stderr)
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    if args.cmd == "schema":
        from omnieval._suite import suite_json_schema

        print(json.dumps(suite_json_schema(), indent=2))
        return 0
    if args.cmd == "list":
        from omnieval._cli_list import print_registries

        print_registries()
        return 0
    if args.cmd == "setup":
        from serving import build_llama_server, resolve_model

        if args.what == "llamacpp":
            print(build_llama_server())
        else:
            from omnieval._defaults import DEFAULT_MODEL_SOURCE

            print(resolve_model(DEFAULT_MODEL_SOURCE))
        return 0
    if args.cmd == "run":
        from omnieval._cli_run import cmd_run

        return cmd_run(args)
    if args.cmd == "rerun":
        from omnieval._rerun import cmd_rerun

        return cmd_rerun(args)
    raise AssertionError(args.cmd)
