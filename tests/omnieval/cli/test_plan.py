"""``omnieval plan``: the run's plan with nothing deployed, and the run's own pre-deploy errors as exit 2."""

from __future__ import annotations

import time
from pathlib import Path

from testlib.runs import ROOT, run_cli


def test_plan_of_the_quickstart_counts_samples_and_places_the_replica(tmp_path: Path) -> None:
    proc = run_cli("plan", "examples/quickstart.yaml")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "mmlu_tiny" in out and "asdiv_tiny" in out and "40 built-in samples" in out
    assert "llamacpp" in out and "num_cpus=1" in out and "nothing was deployed" in out


def test_plan_with_a_misspelt_lm_eval_task_exits_2_in_seconds(tmp_path: Path) -> None:
    suite = tmp_path / "s.yaml"
    suite.write_text((ROOT / "examples/lmeval_own_tasks.yaml").read_text()
                      .replace("name: asdiv_gsm8k\n", "name: asdiv_gsm8kk\n")
                      .replace("include_path: lmeval_tasks", f"include_path: {ROOT / 'examples/lmeval_tasks'}"))  # fmt: skip
    t0 = time.monotonic()
    proc = run_cli("plan", str(suite))
    assert proc.returncode == 2, proc.stdout[-2000:]
    assert "benchmarks[0].name: lm-eval has no task, group or tag 'asdiv_gsm8kk'. Did you mean: asdiv_gsm8k" in proc.stderr
    assert time.monotonic() - t0 < 30


def test_plan_of_replicas_that_never_fit_exits_2(tmp_path: Path) -> None:
    suite = tmp_path / "s.yaml"
    suite.write_text((ROOT / "examples/quickstart.yaml").read_text().replace("replicas: 1", "replicas: 500"))
    proc = run_cli("plan", str(suite))
    assert proc.returncode == 2 and "replicas: 500" in proc.stderr, proc.stderr[-2000:]
