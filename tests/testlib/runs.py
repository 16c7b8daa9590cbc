"""Run the real ``omnieval`` CLI in a subprocess and find its artifact."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def omnieval_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "omnieval", *args]


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        omnieval_cmd(*args), cwd=ROOT, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )


def artifact_from(stdout: str) -> Path:
    for line in stdout.splitlines():
        if line.startswith("artifact: "):
            return Path(line.removeprefix("artifact: ").strip())
    raise AssertionError(f"no 'artifact:' line in output:\n{stdout[-3000:]}")
