"""GradientLimiter: grows while latency is flat and the limit is used, shrinks on latency growth and on failures."""

from __future__ import annotations

import pytest

from schedulers import GradientLimiter, LimitWindow


def window(n: int, latency: float, peak: int, failed: int = 0) -> LimitWindow:
    return LimitWindow(ok=n, failed=failed, latency_sum=n * latency, peak_in_flight=peak)


def saturating_engine(in_flight: int, knee: int, base: float = 0.01) -> float:
    """Per-token latency of an engine that batches up to ``knee`` at no cost, then queues linearly."""
    return base * max(1.0, in_flight / knee)


def test_starts_low_and_probes_up_to_the_ceiling_on_a_flat_engine() -> None:
    lim = GradientLimiter(initial=4, max_limit=256)
    limits = [lim.limit]
    for _ in range(40):
        lim.observe(window(64, 0.01, peak=lim.limit))
        limits.append(lim.limit)
    assert limits[0] == 4 and limits[-1] == 256
    assert limits == sorted(limits)  # never backs off without a reason
    assert limits.index(256) <= 25  # geometric probing, not +1 per window


def test_settles_near_the_engines_knee_not_at_the_ceiling() -> None:
    lim = GradientLimiter(initial=4, max_limit=256, tolerance=2.0)
    seen = []
    for _ in range(200):
        n = lim.limit
        lim.observe(window(64, saturating_engine(n, knee=32), peak=n))
        seen.append(lim.limit)
    tail = seen[-50:]
    assert 32 <= min(tail) and max(tail) <= 2 * 32 * 1.3, tail  # at or past the knee, within the latency tolerance


def test_app_limited_windows_do_not_grow_the_limit() -> None:
    lim = GradientLimiter(initial=16, max_limit=256)
    for _ in range(20):
        lim.observe(window(64, 0.01, peak=3))  # clients never used more than 3 of 16
    assert lim.limit == 16


def test_failure_halves_and_latency_spike_shrinks() -> None:
    lim = GradientLimiter(initial=64, max_limit=256)
    lim.observe(window(0, 0.0, peak=64, failed=1))
    assert lim.limit == 32
    lim.observe(window(64, 0.01, peak=32))  # baseline
    before = lim.limit
    lim.observe(window(64, 0.08, peak=before))  # 8x latency: gradient floor halves at most
    assert lim.limit == before // 2


def test_waits_for_enough_samples_before_deciding() -> None:
    lim = GradientLimiter(initial=4, max_limit=256, min_samples=8)
    lim.observe(window(3, 0.01, peak=4))
    assert lim.updates == 0 and lim.limit == 4
    lim.observe(window(5, 0.01, peak=4))  # reports from several clients add up to one decision
    assert lim.updates == 1 and lim.limit > 4


def test_bad_parameters_rejected() -> None:
    with pytest.raises(ValueError):
        GradientLimiter(initial=0)
    with pytest.raises(ValueError):
        GradientLimiter(initial=4, max_limit=2)
    with pytest.raises(ValueError):
        GradientLimiter(tolerance=0.5)


def test_start_at_least_raises_a_limit_created_before_the_slots_were_known() -> None:
    """A replica's first client can sync before its first stats: the limit then started at the configured 4; when
    the engine says it batches 32, the limit starts there (the measured federated bench ran vLLM at a peak of 5)."""
    from schedulers._gradient import GradientLimiter

    lim = GradientLimiter(initial=4, max_limit=256)
    lim.start_at_least(32)
    assert (lim.initial, lim.limit, lim.peak_limit) == (32, 32, 32)
    lim.start_at_least(8)  # never lowers
    assert lim.limit == 32
    capped = GradientLimiter(initial=4, max_limit=16)
    capped.start_at_least(32)
    assert capped.limit == 16
