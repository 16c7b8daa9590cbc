import pytest

from schedulers import AIMDLimiter


def test_additive_increase_per_window() -> None:
    lim = AIMDLimiter(initial=4, max_limit=64)
    for _ in range(4):  # one full window of 4 successes
        lim.on_success(0.1)
    assert lim.limit == 5
    for _ in range(3):
        lim.on_success(0.1)
    assert lim.limit == 5  # 3/5 of the next window: still 5
    for _ in range(2):
        lim.on_success(0.1)
    assert lim.limit == 6


def test_multiplicative_decrease_on_failure_and_floor() -> None:
    lim = AIMDLimiter(initial=16, min_limit=2)
    lim.on_failure()
    assert lim.limit == 8
    for _ in range(10):
        lim.on_failure()
    assert lim.limit == 2


def test_latency_above_target_decreases() -> None:
    lim = AIMDLimiter(initial=10, target_latency_s=1.0)
    lim.on_success(0.5)
    assert lim.limit == 10
    lim.on_success(2.0)
    assert lim.limit == 5
    no_target = AIMDLimiter(initial=10)
    no_target.on_success(1000.0)
    assert no_target.limit == 10


def test_respects_max() -> None:
    lim = AIMDLimiter(initial=2, max_limit=5, increase_step=10.0)
    for _ in range(100):
        lim.on_success(0.0)
    assert lim.limit == 5


def test_validation() -> None:
    for kwargs in (
        {"initial": 0},
        {"initial": 100},
        {"decrease_factor": 1.0},
        {"increase_step": 0},
        {"target_latency_s": 0},
    ):
        with pytest.raises(ValueError):
            AIMDLimiter(**kwargs)  # type: ignore[arg-type]
