"""Test tiers: unit (default), ``ray`` (real local Ray), ``slow`` (real engines end to end), ``gpu`` (CUDA only)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def pytest_configure(config: pytest.Config) -> None:
    """Give the test session a response cache of its own.

    Tests that assert real inference (tokens/s > 0, replica names) must not be answered by the responses a developer's
    earlier ``make demo`` left in ``~/.cache/omnieval``; models and the llama-server build stay shared.
    Set before any test runs, so subprocess CLIs, Ray workers and ``ray job submit`` drivers inherit it.
    """
    d = Path(tempfile.mkdtemp(prefix="omnieval-test-responses-"))
    os.environ["OMNIEVAL_RESPONSE_CACHE"] = str(d / "responses.sqlite")
    config.add_cleanup(lambda: shutil.rmtree(d, ignore_errors=True))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    try:
        import torch

        has_gpu = bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - no torch means no GPU path here
        has_gpu = False
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords and not has_gpu:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def tmp_cache() -> Path:
    return Path(os.environ.get("OMNIEVAL_CACHE", Path.home() / ".cache" / "omnieval"))
