"""vLLM calibration without vLLM: synthetic streamed timings → decode points → the fitted profile; the scale study's
label names the engine a profile was calibrated from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnieval.perf._calibrate import PrefillPoint
from omnieval.perf._calibrate_vllm import decode_point, fit_vllm, kv_cache_tokens, resolve_model_dir
from omnieval.perf._engine_probe import RequestTiming
from omnieval.perf._scale import LABEL, calibrated_engine, label, load_profile
from serving import DEFAULT_PROFILE

TRUE = DEFAULT_PROFILE.with_(step_base_s=0.030, step_per_seq_s=0.0025, step_per_kv_token_s=1e-6,
                             prefill_base_s=0.020, prefill_per_token_s=0.0008)  # fmt: skip
OUT = 64


def _batch(p: int, n_prompt: int) -> list[RequestTiming]:
    """P concurrent requests as vLLM would time them under TRUE: prefill, then OUT lock-step decode steps."""
    step = TRUE.step_s(p, p * (n_prompt + OUT / 2))
    first = TRUE.prefill_s(p * n_prompt) + step
    return [RequestTiming(n_prompt, OUT, first + 0.001 * i, first + 0.001 * i + (OUT - 1) * step) for i in range(p)]


def _points() -> tuple[list, list[PrefillPoint]]:
    dec = [decode_point(_batch(p, n), OUT) for p in (1, 2, 4, 8, 16) for n in (25, 335)]
    pre = [PrefillPoint(n, TRUE.prefill_s(n)) for n in (60, 180, 470, 930) for _ in range(2)]
    return dec, pre


def test_decode_point_from_concurrent_streamed_requests() -> None:
    pt = decode_point(_batch(4, 100), OUT)
    assert pt is not None and pt.batch == 4
    assert pt.kv_tokens == 4 * (100 + OUT / 2)
    assert pt.step_s == pytest.approx(TRUE.step_s(4, pt.kv_tokens))
    assert decode_point([RequestTiming(10, 1, 0.2, 0.2)], OUT) is None  # no second token: no step time


def test_fit_recovers_the_profile_and_takes_vllm_slots_and_kv_cache() -> None:
    dec, pre = _points()
    fit = fit_vllm([d for d in dec if d is not None], pre, slots=16, kv_cache_tokens=93_184, chars_per_token=5.5,
                   source="bench calibrate: vllm 0.32.0 (CPU)")  # fmt: skip
    assert fit.step_base_s == pytest.approx(TRUE.step_base_s, rel=1e-6)
    assert fit.step_per_seq_s == pytest.approx(TRUE.step_per_seq_s, rel=1e-6)
    assert fit.step_per_kv_token_s == pytest.approx(TRUE.step_per_kv_token_s, rel=1e-6)
    assert fit.prefill_base_s == pytest.approx(TRUE.prefill_base_s, rel=1e-6)
    assert fit.prefill_per_token_s == pytest.approx(TRUE.prefill_per_token_s, rel=1e-6)
    assert (fit.slots, fit.ctx_per_slot, fit.chars_per_token) == (16, 93_184 // 16, 5.5)
    assert calibrated_engine(fit) == "vLLM"


def test_unknown_kv_cache_keeps_the_default_context() -> None:
    dec, pre = _points()
    fit = fit_vllm([d for d in dec if d is not None], pre, slots=16, kv_cache_tokens=None, chars_per_token=None,
                   source="vllm")  # fmt: skip
    assert fit.ctx_per_slot == DEFAULT_PROFILE.ctx_per_slot and fit.chars_per_token == DEFAULT_PROFILE.chars_per_token


def test_kv_cache_size_is_read_from_the_server_log() -> None:
    line = "INFO 12-03 18:44:01 [kv_cache_utils.py:1087] GPU KV cache size: 93,184 tokens | INFO ..."
    assert kv_cache_tokens(line) == 93_184
    assert kv_cache_tokens("no such line") is None


def test_model_dir_follows_the_converted_cache_layout(tmp_path: Path) -> None:
    ckpt = tmp_path / "smollm2-hf" / "b179c9523d0e6a0f"
    ckpt.mkdir(parents=True)
    (ckpt / "config.json").write_text("{}")
    assert resolve_model_dir(tmp_path / "smollm2-hf") == ckpt
    assert resolve_model_dir(ckpt) == ckpt
    with pytest.raises(FileNotFoundError):
        resolve_model_dir(tmp_path / "missing")


def test_scale_label_stays_simulated_and_names_the_calibrated_engine(tmp_path: Path) -> None:
    assert "SIMULATED" in LABEL and "llama-server" in LABEL and calibrated_engine(DEFAULT_PROFILE) == "llama-server"
    cal = tmp_path / "calibration-vllm.json"
    prof = DEFAULT_PROFILE.with_(source="bench calibrate 2026-12-03: vllm 0.32.0 (CPU, enforce_eager)", slots=16)
    cal.write_text(json.dumps({"engine": "vllm", "simulated_engine_calibration": True, "profile": prof.to_dict()}))
    loaded = load_profile(str(cal))
    assert loaded.slots == 16
    assert label(loaded).startswith("SIMULATED") and "vLLM" in label(loaded) and "llama-server" not in label(loaded)
    assert calibrated_engine(DEFAULT_PROFILE.with_(source="hand-written")) == "an unnamed engine"
