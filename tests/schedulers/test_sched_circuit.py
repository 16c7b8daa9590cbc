import pytest

from schedulers import CircuitBreaker


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def advance(self, dt: float) -> None:
        self.now += dt


def _breaker(clock: FakeClock, **kw: float) -> CircuitBreaker:
    return CircuitBreaker(failure_threshold=3, initial_backoff_s=1.0, max_backoff_s=4.0, clock=clock, **kw)  # type: ignore[arg-type]


def test_opens_after_consecutive_failures_only() -> None:
    clock = FakeClock()
    cb = _breaker(clock)
    assert cb.state("r") == "closed" and cb.allow("r")
    cb.record_failure("r")
    cb.record_failure("r")
    cb.record_success("r")  # resets the consecutive count
    cb.record_failure("r")
    cb.record_failure("r")
    assert cb.state("r") == "closed"
    cb.record_failure("r")
    assert cb.state("r") == "open" and not cb.allow("r")
    assert cb.state("other") == "closed"  # per replica


def test_half_open_allows_single_probe_then_closes() -> None:
    clock = FakeClock()
    cb = _breaker(clock)
    for _ in range(3):
        cb.record_failure("r")
    clock.advance(0.99)
    assert cb.state("r") == "open" and not cb.allow("r")
    clock.advance(0.01)
    assert cb.state("r") == "half_open"
    assert cb.allow("r")
    assert not cb.allow("r")  # only one probe in flight
    cb.record_success("r")
    assert cb.state("r") == "closed" and cb.allow("r") and cb.allow("r")


def test_backoff_doubles_on_reopen_caps_and_resets_after_close() -> None:
    clock = FakeClock()
    cb = _breaker(clock)
    for _ in range(3):
        cb.record_failure("r")
    waits = []
    for _ in range(4):
        t0 = clock.now
        while not cb.allow("r"):
            clock.advance(0.25)
        waits.append(clock.now - t0)
        cb.record_failure("r")  # probe fails: re-open
        assert cb.state("r") == "open"
    assert waits == [1.0, 2.0, 4.0, 4.0]
    clock.advance(4.0)
    assert cb.allow("r")
    cb.record_success("r")
    for _ in range(3):
        cb.record_failure("r")
    clock.advance(1.0)
    assert cb.state("r") == "half_open"  # back to the initial backoff


def test_success_threshold_needs_several_probes() -> None:
    clock = FakeClock()
    cb = _breaker(clock, success_threshold=2)
    for _ in range(3):
        cb.record_failure("r")
    clock.advance(1.0)
    assert cb.allow("r")
    cb.record_success("r")
    assert cb.state("r") == "half_open"
    assert cb.allow("r") and not cb.allow("r")
    cb.record_success("r")
    assert cb.state("r") == "closed"


def test_results_while_open_are_ignored_and_lost_probe_expires() -> None:
    clock = FakeClock()
    cb = _breaker(clock)
    for _ in range(3):
        cb.record_failure("r")
    cb.record_success("r")
    cb.record_failure("r")
    assert cb.state("r") == "open"
    clock.advance(1.0)
    assert cb.allow("r")  # probe granted, result never reported
    clock.advance(0.5)
    assert not cb.allow("r")
    clock.advance(0.5)
    assert cb.allow("r")  # a replacement probe after one more backoff


def test_jitter_stretches_backoff_and_remove_forgets() -> None:
    clock = FakeClock()
    cb = _breaker(clock, jitter=0.5, seed=0)
    for _ in range(3):
        cb.record_failure("r")
    clock.advance(1.0)
    assert cb.state("r") == "open"  # jittered wait is in [1.0, 1.5)
    clock.advance(0.5)
    assert cb.state("r") == "half_open"
    cb.remove("r")
    assert cb.state("r") == "closed"


def test_validation() -> None:
    with pytest.raises(ValueError):
        CircuitBreaker(failure_threshold=0)
    with pytest.raises(ValueError):
        CircuitBreaker(initial_backoff_s=10.0, max_backoff_s=1.0)
