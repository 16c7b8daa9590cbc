from __future__ import annotations

from pathlib import Path

import pytest
from testlib.runs import artifact_from, run_cli


@pytest.fixture(scope="session")
def quickstart_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's quickstart, run once for the session through the real CLI (local Ray, Serve, llama.cpp)."""
    out = tmp_path_factory.mktemp("runs")
    proc = run_cli("run", "examples/quickstart.yaml", "--output-dir", str(out), "--no-progress")
    assert proc.returncode == 0, proc.stderr[-4000:]
    return artifact_from(proc.stdout)
