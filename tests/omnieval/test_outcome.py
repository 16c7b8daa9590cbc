"""The documented rule for a run's outcome: what makes a benchmark failed, and so the run partial or failed (exit 1,
a FAILED Ray job)."""

from __future__ import annotations

from omnieval._artifacts import RunManifest, ScoreRow
from omnieval._runner import outcome


def _manifest(errors: dict[str, int], n: int = 10) -> RunManifest:
    return RunManifest(run_id="r", suite_name="s", created="t", config={}, scores=[
        ScoreRow(model="m", benchmark=b, metric=metric, value=50.0, num_samples=n, num_errors=e)
        for b, e in errors.items() for metric in ("exact_match", "chrf")
    ])  # fmt: skip


def test_default_rule_fails_only_benchmarks_whose_every_sample_failed() -> None:
    m = _manifest({"a": 3, "b": 0})
    assert outcome(m) == "completed" and all(s.error is None for s in m.scores)
    m = _manifest({"a": 10, "b": 9})
    assert outcome(m) == "partial" and m.error is None
    assert [s.error is not None for s in m.scores] == [True, True, False, False]
    m = _manifest({"a": 10, "b": 10})
    assert outcome(m) == "failed" and m.error == "every benchmark failed"


def test_fail_on_error_rate_fails_a_benchmark_above_it() -> None:
    m = _manifest({"a": 3, "b": 1})
    assert outcome(m, error_rate=0.2) == "partial"
    (err,) = {s.error for s in m.scores if s.benchmark == "a"}
    assert err is not None and "3 of its 10 samples failed, above fail_on.error_rate 0.2" in err
    assert all(s.error is None for s in m.scores if s.benchmark == "b")  # 10 % is not above 20 %
    assert outcome(_manifest({"a": 1, "b": 0}), error_rate=0.0) == "partial"  # 0.0: any failed sample
    assert outcome(_manifest({"a": 0, "b": 0}), error_rate=0.0) == "completed"
