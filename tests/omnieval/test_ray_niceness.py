"""``ray.niceness: auto``: a private local Ray yields to the engines only when none of them runs inside it."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from omnieval._defaults import DEFAULT_MODEL_SOURCE
from omnieval._prestart import RAY_NICENESS_AUTO, ray_niceness
from omnieval.core import SuiteConfig


def _suite(niceness: Any = "auto") -> SuiteConfig:
    src = DEFAULT_MODEL_SOURCE.model_dump(mode="json")
    return SuiteConfig.model_validate({
        "name": "s", "benchmarks": [{"name": "mmlu_tiny"}], "ray": {"niceness": niceness},
        "models": [{"name": "a", "source": src}, {"name": "b", "source": src},
                   {"name": "api", "engine": "openai",
                    "source": {"kind": "endpoint", "base_url": "http://127.0.0.1:1/v1"}}]})  # fmt: skip


@pytest.fixture
def offered(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The models whose pre-started servers the driver offers (``pool.is_inline``), as a set to fill."""
    import pool

    names: set[str] = set()
    monkeypatch.setattr(pool, "is_inline", lambda m: m.source.kind == "endpoint" or m.name in names)
    return names


def test_auto_yields_only_when_every_needed_engine_was_pre_started(offered: set[str]) -> None:
    s, started = _suite(), object()
    assert ray_niceness(s, {"a", "b"}, None) == 0  # nothing pre-started: the engines run in Ray's workers
    offered.add("a")
    assert ray_niceness(s, {"a", "b"}, started) == 0  # b's replica computes inside a Ray worker
    assert ray_niceness(s, {"a", "api"}, started) == RAY_NICENESS_AUTO == 10  # an endpoint is someone else's
    offered.add("b")
    assert ray_niceness(s, {"a", "b", "api"}, started) == 10
    assert ray_niceness(s, {"api"}, started) == 0  # no engine on this node to yield to


def test_a_set_niceness_is_kept_and_checked(offered: set[str]) -> None:
    assert ray_niceness(_suite(0), {"a"}, object()) == 0
    offered.add("a")
    assert ray_niceness(_suite(0), {"a"}, object()) == 0 and ray_niceness(_suite(5), {"a"}, None) == 5
    for bad in (20, -1, "low"):
        with pytest.raises(ValidationError, match="niceness"):
            _suite(bad)
