"""Serving tests: real engines on the offline SmolLM2 GGUF; timings are printed in the terminal summary."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

_TIMINGS: dict[str, str] = {}


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _TIMINGS:
        terminalreporter.section("serving timings")
        for k, v in _TIMINGS.items():
            terminalreporter.write_line(f"{k}: {v}")


@pytest.fixture(scope="session")
def timing() -> Callable[[str, str], None]:
    """Record a measured number for the summary (engine start, tok/s, ...)."""

    def record(key: str, value: str) -> None:
        _TIMINGS[key] = value

    return record


@pytest.fixture(scope="session")
def smollm_gguf() -> Path:
    """The default GGUF; missing, it skips the test, or fails it under ``CI=true`` (testlib.engine)."""
    from testlib.engine import require_default_model

    return require_default_model()


@pytest.fixture(scope="session")
def plumbing_models() -> dict[str, Path]:
    """The plumbing multimodal models (built once by scripts/make_plumbing_models.py; needs torch+transformers)."""
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[2] / "scripts" / "make_plumbing_models.py"
    kinds = ("image", "audio", "audio-hf", "image-gguf")
    out = subprocess.run([sys.executable, str(script), *kinds], capture_output=True, text=True, timeout=1200,
                         check=True)  # fmt: skip
    return dict(zip(kinds, (Path(p) for p in out.stdout.split()), strict=True))


@pytest.fixture
def tmp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every server log (and pre-start socket) of the test under its own temp root, not the host's shared one; the
    servers' log root."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    yield tmp_path / "omnieval-servers"
