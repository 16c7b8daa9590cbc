"""``omnieval setup``: one-off set-up steps (build llama-server, fetch the default GGUF), done ahead of a run."""

from __future__ import annotations

import argparse


def cmd_setup(args: argparse.Namespace) -> int:
    """Print the path of what was built or fetched."""
    from serving import build_llama_server, resolve_model

    if args.what == "llamacpp":
        print(build_llama_server())
    else:
        from omnieval._defaults import DEFAULT_MODEL_SOURCE

        print(resolve_model(DEFAULT_MODEL_SOURCE))
    return 0
