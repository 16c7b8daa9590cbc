"""The real-engine rule (testlib.engine): a missing llama-server or default model skips locally, fails under CI=true.

Checked end to end: pytest runs in a subprocess on a two-test file whose environment hides the engine (an empty
``OMNIEVAL_CACHE``, a ``PATH`` without llama-server, no ``OMNIEVAL_LLAMA_SERVER``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from testlib.engine import in_ci

ROOT = Path(__file__).resolve().parents[2]

NEEDS_ENGINE = """
from testlib.engine import require_default_model, require_llama_server


def test_needs_llama_server():
    require_llama_server()


def test_needs_default_model():
    require_default_model()
"""


@pytest.mark.parametrize(
    ("value", "expected"),
    [("true", True), ("TRUE", True), ("1", True), ("yes", True), ("", False), ("false", False), ("0", False)],
)
def test_in_ci_reads_the_ci_variable(value: str, expected: bool) -> None:
    assert in_ci({"CI": value}) is expected
    assert in_ci({}) is False


def _pytest_without_engine(tmp_path: Path, extra_env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # its own rootdir: not this project's ini or conftest
    (tmp_path / "test_needs_engine.py").write_text(NEEDS_ENGINE)
    (tmp_path / "empty-cache").mkdir()
    (tmp_path / "bin").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "OMNIEVAL_LLAMA_SERVER", "PYTEST_ADDOPTS")}
    env |= {"OMNIEVAL_CACHE": str(tmp_path / "empty-cache"), "PATH": str(tmp_path / "bin"),
            "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)]), **extra_env}  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rfs", "-p", "no:cacheprovider", "test_needs_engine.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_missing_engine_fails_under_ci(tmp_path: Path) -> None:
    proc = _pytest_without_engine(tmp_path, {"CI": "true"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "2 failed" in out and "skipped" not in out, out
    assert "llama-server is not available" in out and "`omnieval setup llamacpp`" in out, out
    assert "the default model is not in the cache" in out and "`omnieval setup model`" in out, out
    assert "make setup" in out and "CI=true" in out, out


def test_missing_engine_skips_outside_ci(tmp_path: Path) -> None:
    proc = _pytest_without_engine(tmp_path, {})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "2 skipped" in out and "failed" not in out, out
    assert "`omnieval setup llamacpp`" in out and "`omnieval setup model`" in out, out
