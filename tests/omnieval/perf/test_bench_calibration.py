"""The calibration fit recovers the timing model it is fed (noise-free and noisy synthetic points)."""

from __future__ import annotations

import random

import pytest

from omnieval.perf._calibrate import DecodePoint, PrefillPoint, fit_profile
from serving._simulated import DEFAULT_PROFILE

TRUE = DEFAULT_PROFILE.with_(step_base_s=0.012, step_per_seq_s=0.004, step_per_kv_token_s=2e-6,
                             prefill_base_s=0.006, prefill_per_token_s=0.0005)  # fmt: skip


def _points(noise: float, seed: int = 0) -> tuple[list[DecodePoint], list[PrefillPoint]]:
    rng = random.Random(seed)
    dec = [DecodePoint(b, kv, TRUE.step_s(b, kv) * (1 + rng.gauss(0, noise)))
           for b in (1, 2, 4, 8) for kv in (b * 60.0, b * 350.0)]  # fmt: skip
    pre = [PrefillPoint(n, TRUE.prefill_s(n) * (1 + rng.gauss(0, noise))) for n in (60, 250, 700, 1400)]
    return dec, pre


def test_fit_recovers_exact_parameters() -> None:
    fit = fit_profile(*_points(0.0))
    assert fit.step_base_s == pytest.approx(TRUE.step_base_s, rel=1e-6)
    assert fit.step_per_seq_s == pytest.approx(TRUE.step_per_seq_s, rel=1e-6)
    assert fit.step_per_kv_token_s == pytest.approx(TRUE.step_per_kv_token_s, rel=1e-6)
    assert fit.prefill_base_s == pytest.approx(TRUE.prefill_base_s, rel=1e-6)
    assert fit.prefill_per_token_s == pytest.approx(TRUE.prefill_per_token_s, rel=1e-6)


def test_fit_with_noise_predicts_step_times() -> None:
    fit = fit_profile(*_points(0.03, seed=1))
    for b in (1, 4, 8):
        assert fit.step_s(b, b * 200) == pytest.approx(TRUE.step_s(b, b * 200), rel=0.1)
    assert fit.prefill_s(1000) == pytest.approx(TRUE.prefill_s(1000), rel=0.1)


def test_negative_coefficients_are_dropped() -> None:
    # batch-independent, kv-independent points plus a decreasing-with-kv wiggle: no cost may come out negative
    dec = [DecodePoint(b, kv, 0.05 - 1e-7 * kv) for b in (1, 2, 4) for kv in (100.0, 900.0)]
    fit = fit_profile(dec, [PrefillPoint(100, 0.05), PrefillPoint(400, 0.2)])
    assert fit.step_per_kv_token_s >= 0 and fit.step_per_seq_s >= 0 and fit.step_base_s >= 0
    assert fit.prefill_per_token_s == pytest.approx(0.0005, rel=1e-6)
