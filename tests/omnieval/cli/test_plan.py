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


def test_plan_holds_an_endpoint_in_the_pool_controller_whatever_its_replicas(tmp_path: Path) -> None:
    from omnieval.perf._alone import instant_server

    server, base = instant_server()
    try:
        suite = tmp_path / "s.yaml"
        suite.write_text(
            f"name: ext\nmodels:\n  - name: ext\n    engine: openai\n    replicas: 500\n"
            f"    source: {{kind: endpoint, base_url: '{base}'}}\n"
            "benchmarks:\n  - name: asdiv_tiny\n"
        )
        proc = run_cli("plan", str(suite), env={"COLUMNS": "240"})  # one table row per line
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("the pool controller (an external endpoint: no cluster resources)") == 500
