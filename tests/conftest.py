"""Test tiers: unit (default), ``ray`` (real local Ray), ``slow`` (real engines end to end), ``gpu`` (CUDA only)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from _pytest.reports import CollectReport, TestReport

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


def _fail_required_skip(report: TestReport | CollectReport) -> None:
    """Under CI, a skip that blames a dependency this run requires (``OMNIEVAL_REQUIRE``) is a failure: a broken
    vLLM venv must not exit 0 because its tests skipped (``tests/testlib/tiers.py``)."""
    from testlib.tiers import INSTALL, blamed, required

    if not report.skipped or not (need := required()):
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    dep = blamed(reason)
    if dep in need:
        report.outcome = "failed"
        fix = "" if "install:" in reason else f"; install: {INSTALL.get(dep, dep)}"
        report.longrepr = f"this CI run requires {dep!r} (OMNIEVAL_REQUIRE) but its test skipped: {reason}{fix}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    _fail_required_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):  # type: ignore[no-untyped-def]
    outcome = yield
    _fail_required_skip(outcome.get_result())


def pytest_runtest_logreport(report: TestReport) -> None:
    """Each test phase's time into ``OMNIEVAL_DURATIONS`` (set by scripts/ci_test.sh), so the end of ``make test``
    can list the slowest tests of every tier together, whichever venv ran them (scripts/ci_report.py)."""
    path = os.environ.get("OMNIEVAL_DURATIONS")
    if not path:
        return
    import json

    line = {"step": os.environ.get("OMNIEVAL_CI_STEP", "?"), "test": report.nodeid, "when": report.when,
            "seconds": round(report.duration, 3), "outcome": report.outcome}  # fmt: skip
    with open(path, "a") as f:
        f.write(json.dumps(line) + "\n")
