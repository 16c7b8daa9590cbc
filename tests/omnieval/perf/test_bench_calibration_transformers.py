"""``bench calibrate --engine transformers`` on the plumbing audio model, in process: the rates and the audio item
cost the federated bench's roofline charges a transformers replica with (runs in the vLLM venv's tier)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.transformers]

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def audio_model() -> Path:
    pytest.importorskip("transformers")
    out = subprocess.run([sys.executable, str(ROOT / "scripts/make_plumbing_models.py"), "audio-hf"],
                         capture_output=True, text=True, timeout=1200, check=True)  # fmt: skip
    return Path(out.stdout.split()[0])


def test_calibration_fits_decode_prefill_and_an_audio_item(audio_model: Path) -> None:
    from omnieval.perf._calibrate_transformers import measure_transformers
    from omnieval.perf._roofline import bound_s

    res = measure_transformers(audio_model, threads=1, batches=[1, 4], out_tokens=12, prefill_words=(40, 200),
                               log=lambda m: None)  # fmt: skip
    p = res["profile"]
    assert res["engine"] == "transformers" and res["threads"] == 1 and p["slots"] == 4
    assert [d["batch"] for d in res["decode_points"]] == [1, 4]
    assert all(d["step_s"] > 0 for d in res["decode_points"])
    short, long_ = sorted(res["prefill_points"], key=lambda x: x["tokens"])
    assert long_["tokens"] > short["tokens"] and long_["prefill_s"] > short["prefill_s"]  # prefill grows with length
    assert p["prefill_per_token_s"] > 0
    assert set(res["media_item_s"]) == {"audio"} and res["media_item_s"]["audio"] > 0  # the audio encoder's cost
    prof = {**p, "media_item_s": res["media_item_s"]}
    u = {"prompt_tokens": 100, "output_tokens": 40, "media_items": 3}
    assert bound_s(u, prof) == pytest.approx(bound_s({**u, "media_items": 0}, prof) + 3 * res["media_item_s"]["audio"])
