"""Pool tests share the Ray/engine helpers of tests/cluster (cluster_testlib)."""

from __future__ import annotations

import sys
from pathlib import Path

_CLUSTER_TESTS = str(Path(__file__).resolve().parents[1] / "cluster")
if _CLUSTER_TESTS not in sys.path:
    sys.path.insert(0, _CLUSTER_TESTS)
