"""Test tiers: unit (default), ``ray`` (real local Ray), ``slow`` (real engines end to end), ``gpu`` (CUDA only)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


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
