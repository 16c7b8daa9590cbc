"""Where omnieval keeps what it builds and fetches: one cache root per machine (``OMNIEVAL_CACHE`` overrides)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    d = Path(os.environ.get("OMNIEVAL_CACHE", Path.home() / ".cache" / "omnieval"))
    d.mkdir(parents=True, exist_ok=True)
    return d
