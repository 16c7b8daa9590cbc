"""EgoMem and OmniAssistBench through the real pool: waves for multi-turn history, a pool model as judge."""

from __future__ import annotations

from pathlib import Path

import pytest
from testlib.runs import artifact_from, run_cli

from omnieval import read_manifest, read_records

pytestmark = [pytest.mark.slow, pytest.mark.ray]


def test_seed_benchmarks_run_and_every_turn_is_scored_or_errored(tmp_path: Path) -> None:
    proc = run_cli("run", "examples/seed_benchmarks.yaml", "--output-dir", str(tmp_path), "--no-progress", timeout=1700)
    # the example holds the judge's replies to each verdict's grammar (judge_constrained): even SmolLM2-135M's
    # verdicts parse, so every benchmark is scored by real judge verdicts (unconstrained, nearly all are prose)
    assert proc.returncode == 0, proc.stderr[-4000:]
    run = artifact_from(proc.stdout)
    records = read_records(run)
    benches = {"egomem_original", "egomem_with_noise", "omniassist"}
    assert {r.benchmark for r in records} == benches
    for b in benches:
        judged = [r for r in records if r.benchmark == b and r.error is None]
        assert judged and all(r.meta["judge"]["raw"] for r in judged), f"{b}: no record has a real judge verdict"
    for r in records:
        assert r.prediction is not None, r.error
        # the labelled text-only condition: no media, and no user turn reaches the model empty
        assert all(c.type == "text" for m in r.messages for c in m.content)
        assert all(m.text_value().strip() for m in r.messages if m.role == "user"), r.key
        assert r.benchmark != "omniassist" or r.meta["condition"] == "text_only"
        if r.error is not None:
            assert r.error.kind == "judge" and not r.metrics  # never a score from an unparsable verdict
        elif r.benchmark == "omniassist":
            assert 0 <= r.metrics["score"] <= 100
        else:
            assert 0 <= r.metrics["answer_score"] <= 10
    oa = sorted((r for r in records if r.benchmark == "omniassist"), key=lambda r: r.index)
    later = [r for r in oa if r.meta.get("turn", 0) > 0]
    assert later, "the sample has multi-turn interactions"
    for r in later:  # common mode: earlier assistant turns carry the model's own answers, not placeholders
        assert r.meta["history_pending"] is False
        assistant = [m.text_value() for m in r.messages if m.role == "assistant"]
        assert assistant and all(a == next(x.prediction for x in oa if x.index == i)
                                 for a, i in zip(assistant, r.meta["history_indices"], strict=True))  # fmt: skip
    m = read_manifest(run)
    values = {(s.benchmark, s.metric): s.value for s in m.scores}
    assert isinstance(values[("omniassist", "overall")], float)
    assert isinstance(values[("egomem_original", "answer_score")], float)
