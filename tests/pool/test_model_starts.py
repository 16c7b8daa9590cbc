"""``ModelStarts``: each model's readiness on its own, a failed start raised to whoever waits for it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
import ray

from pool import ModelStarts

pytestmark = pytest.mark.ray


@ray.remote(num_cpus=0, max_concurrency=8)
class _Controller:
    """``ensure_model``'s and ``wait_healthy``'s contract, nothing else: ``ensure_model`` blocks until the model's
    replicas are up and raises when one cannot be; ``wait_healthy`` answers at the first healthy replica or when the
    ensure call ended. Each replica is gated on an event the test opens, so the order is the test's, never a race."""

    def __init__(self) -> None:
        self.opened: dict[str, threading.Event] = {}
        self.calls: list[str] = []
        self.healthy: dict[str, int] = {}
        self.ended: set[str] = set()
        self.changed = threading.Condition()

    def _gate(self, name: str) -> threading.Event:
        return self.opened.setdefault(name, threading.Event())

    def ensure_model(self, cfg: SimpleNamespace, run_id: str, env: dict, parallel: bool = True,
                     start_id: str | None = None) -> list[str]:  # fmt: skip
        with self.changed:
            self.calls.append(cfg.name)
            self.changed.notify_all()
        try:
            for i in range(getattr(cfg, "replicas", 1)):
                replica = f"{cfg.name}-r{i + 1}"
                self._gate(replica).wait(30)
                if replica.startswith("broken") or replica.endswith("-r2") and cfg.name.startswith(("half", "unread")):
                    raise RuntimeError(f"{replica}: engine failed to load")
                with self.changed:
                    self.healthy[cfg.name] = self.healthy.get(cfg.name, 0) + 1
                    self.changed.notify_all()
            return [f"{cfg.name}-r{i + 1}" for i in range(self.healthy[cfg.name])]
        finally:
            with self.changed:
                self.ended.add(str(start_id))
                self.changed.notify_all()

    def wait_healthy(self, model: str, start_id: str, n: int = 1, timeout_s: float = 900.0) -> int:
        if model.startswith("unread") and timeout_s > 0:  # its answer arrives after the ensure call's error
            time.sleep(2.0)
        with self.changed:
            self.changed.wait_for(lambda: self.healthy.get(model, 0) >= n or start_id in self.ended, timeout_s)
            return self.healthy.get(model, 0)

    def open(self, name: str) -> None:
        self._gate(name).set()

    def called(self, at_least: int = 0) -> list[str]:
        """The models asked so far, once ``at_least`` were: a call from the starts' thread may still be in flight."""
        with self.changed:
            self.changed.wait_for(lambda: len(self.calls) >= at_least, 30)
            return list(self.calls)


@pytest.fixture(scope="module")
def ray_local() -> Iterator[None]:
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    try:
        yield
    finally:
        ray.shutdown()


def _starts(ctl: object, names: list[str], mode: str = "parallel", replicas: int = 1) -> ModelStarts:
    models = [SimpleNamespace(name=n, replicas=replicas, deploy_timeout_s=None) for n in names]
    return ModelStarts(ctl, [(m, "run", {}) for m in models], mode).start()  # type: ignore[arg-type]


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
    assert sorted(ray.get(ctl.called.remote(at_least=2))) == ["fast", "slow"]  # parallel: both asked before either is up
    ray.get(ctl.open.remote("fast-r1"))
    assert _ready(starts, "fast")
    assert not _ready(starts, "slow", within_s=1.0)  # still loading: its wait is stopped, not answered
    assert "slow" not in starts.up_s
    ray.get(ctl.open.remote("slow-r1"))
    starts.wait_all()
    assert starts.up_s["fast"] < starts.up_s["slow"]


def test_sequential_starts_the_next_only_after_the_last_is_up(ray_local: None) -> None:
    ctl = _Controller.remote()  # type: ignore[attr-defined]
    starts = _starts(ctl, ["a", "b"], mode="sequential")
    assert ray.get(ctl.called.remote(at_least=1)) == ["a"]
    assert not _ready(starts, "a", within_s=1.0)
    assert ray.get(ctl.called.remote()) == ["a"]  # the second is not asked while the first loads
    ray.get(ctl.open.remote("a-r1"))
    assert _ready(starts, "a")
    ray.get(ctl.open.remote("b-r1"))
    starts.wait_all()
    assert ray.get(ctl.called.remote()) == ["a", "b"]


def test_a_failed_start_is_raised_where_it_is_waited_for(ray_local: None) -> None:
    ctl = _Controller.remote()  # type: ignore[attr-defined]
    starts = _starts(ctl, ["ok", "broken"])
    ray.get(ctl.open.remote("ok-r1"))
    ray.get(ctl.open.remote("broken-r1"))
    assert _ready(starts, "ok")
    with pytest.raises(Exception, match="broken-r1: engine failed to load"):
        starts.wait("broken")
    with pytest.raises(Exception, match="broken-r1: engine failed to load"):
        starts.wait_all()


def test_a_model_is_ready_at_its_first_healthy_replica(ray_local: None) -> None:
    """Two replicas: the model's Records may flow once the first is up, while the second still loads."""
    ctl = _Controller.remote()  # type: ignore[attr-defined]
    starts = _starts(ctl, ["pair"], replicas=2)
    assert not _ready(starts, "pair", within_s=1.0)
    ray.get(ctl.open.remote("pair-r1"))
    assert _ready(starts, "pair")
    assert "pair" not in starts.all_up_s  # the second replica is still loading
    ray.get(ctl.open.remote("pair-r2"))
    starts.wait_all()
    assert starts.up_s["pair"] < starts.all_up_s["pair"]


def test_a_replica_failing_after_another_serves_is_logged_not_fatal(ray_local: None) -> None:
    """The run goes on with the replica that came up (as after a failed scale-out); the failure is kept."""
    ctl = _Controller.remote()  # type: ignore[attr-defined]
    starts = _starts(ctl, ["half"], replicas=2)
    ray.get(ctl.open.remote("half-r1"))
    assert _ready(starts, "half")
    ray.get(ctl.open.remote("half-r2"))
    starts.wait_all()  # no raise: one replica serves
    assert "half" not in starts.errors
    assert "half-r2: engine failed to load" in str(starts.late_errors["half"])


def test_a_model_with_no_replica_up_fails_even_with_several_asked(ray_local: None) -> None:
    ctl = _Controller.remote()  # type: ignore[attr-defined]
    starts = _starts(ctl, ["broken"], replicas=2)
    ray.get(ctl.open.remote("broken-r1"))
    with pytest.raises(Exception, match="broken-r1: engine failed to load"):
        starts.wait("broken")


def test_an_ensure_error_read_before_the_first_healthy_answer_is_still_not_fatal(ray_local: None) -> None:
    """The two answers race: when the ensure call's error is read first, the controller is asked again."""
    ctl = _Controller.remote()  # type: ignore[attr-defined]
    starts = _starts(ctl, ["unread"], replicas=2)
    ray.get(ctl.open.remote("unread-r1"))
    ray.get(ctl.open.remote("unread-r2"))
    starts.wait_all()
    assert "unread" not in starts.errors and "unread-r2" in str(starts.late_errors["unread"])
