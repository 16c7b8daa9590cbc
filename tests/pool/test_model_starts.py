"""``ModelStarts``: each model's readiness on its own, a failed start raised to whoever waits for it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
import ray

from pool import ModelStarts

pytestmark = pytest.mark.ray


@ray.remote(num_cpus=0, max_concurrency=4)
class _Controller:
    """``ensure_model``'s contract (blocks until the model is up, raises when it cannot be), nothing else: each
    model is gated on an event the test opens, so the order of readiness is the test's, never a race."""

    def __init__(self) -> None:
        self.opened: dict[str, threading.Event] = {}
        self.calls: list[str] = []

    def _gate(self, name: str) -> threading.Event:
        return self.opened.setdefault(name, threading.Event())

    def ensure_model(self, cfg: SimpleNamespace, run_id: str, env: dict) -> list[str]:
        self.calls.append(cfg.name)
        self._gate(cfg.name).wait(30)
        if cfg.name.startswith("broken"):
            raise RuntimeError(f"{cfg.name}: engine failed to load")
        return [f"{cfg.name}-r1"]

    def open(self, name: str) -> None:
        self._gate(name).set()

    def called(self) -> list[str]:
        return list(self.calls)


@pytest.fixture(scope="module")
def ray_local() -> Iterator[None]:
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    try:
        yield
    finally:
        ray.shutdown()


def _starts(ctl: object, names: list[str], mode: str = "parallel") -> ModelStarts:
    return ModelStarts(ctl, [(SimpleNamespace(name=n), "run", {}) for n in names], mode).start()  # type: ignore[arg-type]


def _ready(starts: ModelStarts, model: str, within_s: float = 10.0) -> bool:
    try:
        starts.wait(model, stop=_deadline(within_s))
        return True
    except RuntimeError:
        return False


def _deadline(s: float) -> threading.Event:
    ev = threading.Event()
    threading.Timer(s, ev.set).start()
    return ev


def test_each_model_is_ready_on_its_own(ray_local: None) -> None:
    ctl = _Controller.remote()  # type: ignore[attr-defined]
    starts = _starts(ctl, ["fast", "slow"])
    ray.get(ctl.open.remote("fast"))
    assert _ready(starts, "fast")
    assert not _ready(starts, "slow", within_s=1.0)  # still loading: its wait is stopped, not answered
    assert "slow" not in starts.up_s
    ray.get(ctl.open.remote("slow"))
    starts.wait_all()
    assert starts.up_s["fast"] < starts.up_s["slow"]
    assert sorted(ray.get(ctl.called.remote())) == ["fast", "slow"]  # parallel: both asked at once


def test_sequential_starts_the_next_only_after_the_last_is_up(ray_local: None) -> None:
    ctl = _Controller.remote()  # type: ignore[attr-defined]
    starts = _starts(ctl, ["a", "b"], mode="sequential")
    assert not _ready(starts, "a", within_s=1.0)
    assert ray.get(ctl.called.remote()) == ["a"]  # the second is not asked while the first loads
    ray.get(ctl.open.remote("a"))
    assert _ready(starts, "a")
    ray.get(ctl.open.remote("b"))
    starts.wait_all()
    assert ray.get(ctl.called.remote()) == ["a", "b"]


def test_a_failed_start_is_raised_where_it_is_waited_for(ray_local: None) -> None:
    ctl = _Controller.remote()  # type: ignore[attr-defined]
    starts = _starts(ctl, ["ok", "broken"])
    ray.get(ctl.open.remote("ok"))
    ray.get(ctl.open.remote("broken"))
    assert _ready(starts, "ok")
    with pytest.raises(Exception, match="broken: engine failed to load"):
        starts.wait("broken")
    with pytest.raises(Exception, match="broken: engine failed to load"):
        starts.wait_all()
