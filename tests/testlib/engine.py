"""The real engine tests need: the llama-server build and the default SmolLM2 GGUF that ``make setup`` installs.

Locally a missing one skips the test (a developer may not have built it yet). Under CI (``CI`` set to ``true``, as
GitHub Actions and most CI systems do) it fails instead: a CI run must not go green with its real-engine tier silently
skipped. Only this engine and model are required; GPU tests and the heavy optional stacks (vLLM, torch, lmms-eval),
which run in their own venvs, keep skipping where they are absent.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import NoReturn

import pytest

SETUP_HINT = "run `make setup`"


def in_ci(environ: Mapping[str, str] | None = None) -> bool:
    """``CI`` is set to a true value (``true``, ``1``, ``yes``; any case)."""
    value = (os.environ if environ is None else environ).get("CI", "")
    return value.strip().lower() in ("true", "1", "yes")


def engine_missing(what: str, fix: str) -> NoReturn:
    """Skip the test (locally) or fail it (under ``CI=true``), naming what is missing and the command that installs
    it."""
    message = f"{what}; install it with `{fix}` (or {SETUP_HINT})"
    if in_ci():
        pytest.fail(f"CI=true and {message}: real-engine tests must run in CI, not skip", pytrace=False)
    pytest.skip(message)


def default_model_path() -> Path:
    """Where ``omnieval setup model`` puts the default GGUF (``OMNIEVAL_CACHE`` overrides the cache root)."""
    from omnieval._defaults import DEFAULT_MODEL_SOURCE as src

    cache = Path(os.environ.get("OMNIEVAL_CACHE", Path.home() / ".cache" / "omnieval"))
    return cache / "models" / f"{src.package}-{src.version}" / Path(src.member).name


def require_llama_server() -> Path:
    """The llama-server binary replicas would launch (``OMNIEVAL_LLAMA_SERVER``, the omnieval cache, ``PATH``)."""
    from serving import find_llama_server

    try:
        return find_llama_server()
    except Exception as e:  # noqa: BLE001 - any reason the binary is unusable is "missing" here
        reason = str(e)
    engine_missing(f"llama-server is not available ({reason})", "omnieval setup llamacpp")


def require_default_model() -> Path:
    """The default SmolLM2-135M GGUF in the omnieval cache."""
    path = default_model_path()
    if not path.is_file():
        engine_missing(f"the default model is not in the cache: {path}", "omnieval setup model")
    return path


def require_engine() -> tuple[Path, Path]:
    """Both: the llama-server binary and the default model."""
    return require_llama_server(), require_default_model()
