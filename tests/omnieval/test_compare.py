from __future__ import annotations

import pytest

from omnieval._artifacts import RunManifest, ScoreRow
from omnieval.compare import comparison


def run(prompt: str, engine: str, native: float, verifier: float) -> RunManifest:
    b = "gqa" if prompt == "native" else "gqa@uniform"
    return RunManifest(
        run_id=f"{engine}-{prompt}", suite_name="s", created="t", config={},
        scores=[ScoreRow(model="m", benchmark=b, metric="exact_match", value=native, num_samples=10, engine=engine),
                ScoreRow(model="m", benchmark=b, metric="chrf", value=1.0, num_samples=10, engine=engine),
                ScoreRow(model="m", benchmark=b, metric="verifier", value=verifier, num_samples=10, engine=engine)],
    )  # fmt: skip


def test_table3_layout_and_delta() -> None:
    cols, rows = comparison([run("native", "vllm", 61.6, 63.3), run("uniform", "vllm", 28.1, 63.9),
                             run("native", "llamacpp", 70.4, 63.1)])  # fmt: skip
    assert cols == ["builtin·vllm Sp.", "builtin·vllm Un.", "builtin·llamacpp Sp."]
    by = {r["score"]: r for r in rows}
    assert by["Native"]["cells"] == {"builtin·vllm Sp.": 61.6, "builtin·vllm Un.": 28.1, "builtin·llamacpp Sp.": 70.4}
    assert by["Native"]["delta"] == 70.4 - 28.1  # headline metric only: chrf is not mixed in
    assert abs(by["Verifier"]["delta"] - 0.8) < 1e-9


def test_every_verifier_row_is_shown_beside_the_native_metric(tmp_path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from omnieval._artifacts import write_manifest
    from omnieval.compare import cli_main

    m = run("native", "llamacpp", 70.4, 63.1)
    m.scores.append(ScoreRow(model="m", benchmark="gqa", metric="verifier_prob", value=58.25, num_samples=10,
                             engine="llamacpp"))  # fmt: skip
    cols, rows = comparison([m])
    kinds = {r["score"]: r["cells"] for r in rows}
    assert kinds == {"Native": {cols[0]: 70.4}, "Verifier": {cols[0]: 63.1}, "Verifier prob": {cols[0]: 58.25}}
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_manifest(run_dir, m)
    monkeypatch.setenv("COLUMNS", "200")
    assert cli_main([str(run_dir), "--json", str(tmp_path / "t.json")]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "gqa" in ln]
    assert [ln.split("│")[3].strip() for ln in lines] == ["Native", "Verifier", "Verifier prob"]
    assert "70.4" in lines[0] and "63.1" in lines[1] and "58.2" in lines[2]


def _records(model: str, bench: str, values: list[float | None], metric: str = "exact_match") -> list:  # type: ignore[type-arg]
    from omnieval.core import Record, RecordError

    out = []
    for i, v in enumerate(values):
        r = Record(benchmark=bench, index=i, model=model, messages=[])
        if v is None:  # a failed sample: no metric, counted as 0 like in the score
            r.error = RecordError(kind="request_failed", message="x")
        else:
            r.metrics = {metric: v}
        out.append(r)
    return out


def test_paired_difference_interval_and_p_value_match_scipy() -> None:
    import math

    from scipy import stats

    from omnieval._paired import paired_rows

    a = [1, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0, 1, 1, 0, 0, 0]
    b = [1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, None]  # the last one failed in B: 0
    rows = paired_rows(_records("m1", "mmlu", a) + _records("m1", "odd", [1, 0]),
                       _records("m2", "mmlu", b) + _records("m2", "odd", [1, 0, 1]))  # fmt: skip
    by = {r.benchmark: r for r in rows}
    xa, xb = [100.0 * x for x in a], [100.0 * (x or 0) for x in b]
    d = [y - x for x, y in zip(xa, xb, strict=True)]
    res = stats.ttest_rel(xb, xa)
    ci = res.confidence_interval(0.95)
    m = by["mmlu"]
    assert (m.n, m.metric, m.note) == (16, "exact_match", "m1 → m2")
    assert m.diff == sum(d) / 16 and m.mean_b - m.mean_a == m.diff
    assert m.p_value == res.pvalue and m.significant == (res.pvalue < 0.05)
    assert math.isclose(m.ci_low, ci.low) and math.isclose(m.ci_high, ci.high)
    assert by["odd"].n == 0 and "cannot be paired: different samples (2 vs 3)" in by["odd"].note


def test_clustered_paired_test_is_statsmodels_cluster_robust_t_on_the_differences() -> None:
    """Samples sharing a unit: the differences' mean regressed on a constant with cluster-robust errors and t on
    G - 1 degrees of freedom (statsmodels ``use_t``) gives the same interval and p-value as ours."""
    import numpy as np
    import statsmodels.api as sm

    from omnieval._paired import BenchInfo, paired_rows

    a = [1, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0, 1, 1, 0, 0, 0, 1, 1]
    b = [1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 0, 1, 1]
    units = [i // 3 for i in range(18)]
    ra, rb = _records("m1", "conv", a), _records("m2", "conv", b)
    for r in (*ra, *rb):
        r.meta["session"] = f"s{units[r.index]}"
    (row,) = paired_rows(ra, rb, {"conv": BenchInfo(metrics=[{"name": "exact_match"}], cluster_by="session")})
    d = 100.0 * (np.array(b, float) - np.array(a, float))
    fit = sm.OLS(d, np.ones(len(d))).fit(cov_type="cluster", cov_kwds={"groups": np.array(units)}, use_t=True)
    low, high = fit.conf_int(0.05)[0]
    assert row.method == "paired t, clustered on session (6 units)"
    assert row.diff == pytest.approx(float(fit.params[0]))
    assert (row.ci_low, row.ci_high) == (pytest.approx(low), pytest.approx(high))
    assert row.p_value == pytest.approx(float(fit.pvalues[0]))
    unclustered = paired_rows(ra, rb)[0]
    assert unclustered.method == "paired t" and unclustered.p_value != pytest.approx(row.p_value)


def test_corpus_metric_is_compared_by_paired_bootstrap() -> None:
    """BLEU has no per-sample values to pair: both runs are resampled on the same indices. B translating every
    sentence exactly beats A's partial ones (p = 0, interval above 0); a run against itself differs by exactly 0."""
    from omnieval._paired import BenchInfo, paired_rows
    from omnieval.core import Output, TextOutput

    refs = [f"the {w} sat on the mat near the {v} door" for w, v in zip("abcdefghijkl", "mnopqrstuvwx", strict=True)]

    def recs(model: str, preds: list[str]) -> list:  # type: ignore[type-arg]
        out = _records(model, "st", [0.0] * len(preds), metric="unused")
        for r, p, ref in zip(out, preds, refs, strict=True):
            r.metrics, r.label = {}, ref
            r.output = Output(text=TextOutput(prediction=[p], prediction_postprocessed=[p]))
        return out

    info = {"st": BenchInfo(metrics=[{"name": "bleu", "settings": {}}])}
    partial = [" ".join(r.split()[:5]) for r in refs]
    (row,) = paired_rows(recs("a", partial), recs("b", refs), info)
    assert row.method == "paired bootstrap" and row.metric == "bleu" and row.n == 12
    assert row.mean_b == pytest.approx(100.0) and row.diff == pytest.approx(row.mean_b - row.mean_a)
    assert row.ci_low is not None and 0 < row.ci_low <= row.diff <= row.ci_high and row.p_value == 0.0
    (same,) = paired_rows(recs("a", partial), recs("a", partial), info)
    assert (same.diff, same.ci_low, same.ci_high, same.p_value) == (0.0, 0.0, 0.0, 1.0)


def test_compare_of_two_runs_prints_the_paired_table(tmp_path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import json

    from omnieval._artifacts import RecordsWriter, write_manifest
    from omnieval.compare import cli_main

    dirs = []
    for name, vals in (("a", [0, 0, 1, 0, 1, 0]), ("b", [1, 1, 1, 1, 1, 1])):
        d = tmp_path / name
        d.mkdir()
        write_manifest(d, run("native", "llamacpp", 50.0, 50.0))
        w = RecordsWriter(d)
        for r in _records("m", "gqa", vals):
            w.add(r)
        w.close()
        dirs.append(str(d))
    monkeypatch.setenv("COLUMNS", "250")
    assert cli_main([*dirs, "--json", str(tmp_path / "t.json")]) == 0
    out = capsys.readouterr().out
    assert "paired on the same samples" in out
    (p,) = json.loads((tmp_path / "t.json").read_text())["paired"]
    assert p["benchmark"] == "gqa" and p["n"] == 6 and abs(p["diff"] - 400 / 6) < 1e-9 and p["significant"] is True


def test_export_csv_rows_and_jsonl_records_round_trip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import csv

    from omnieval._artifacts import RecordsWriter, write_manifest
    from omnieval.cli import main
    from omnieval.core import Record

    m = run("native", "llamacpp", 61.25, 50.0)
    m.scores[0].stderr = 4.5
    write_manifest(tmp_path, m)
    w = RecordsWriter(tmp_path)
    recs = _records("m", "gqa", [1, 0, None])
    for r in recs:
        w.add(r)
    w.close()
    assert main(["export", str(tmp_path), "--format", "csv", "--out", str(tmp_path / "s.csv")]) == 0
    rows = list(csv.DictReader(open(tmp_path / "s.csv")))
    assert [(r["benchmark"], r["metric"], float(r["value"])) for r in rows] == [
        (s.benchmark, s.metric, s.value) for s in m.scores
    ]
    assert rows[0]["stderr"] == "4.5" and rows[1]["stderr"] == "" and rows[0]["num_samples"] == "10"
    assert main(["export", str(tmp_path), "--format", "jsonl"]) == 0
    back = [Record.model_validate_json(x) for x in (tmp_path / "export.jsonl").read_text().splitlines()]
    assert back == recs
    assert main(["export", str(tmp_path / "nope"), "--format", "csv"]) == 2  # not an artifact: one-line error, exit 2


def test_export_lm_eval_layout_reads_back_with_lm_evals_own_code(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``--format lm-eval``: lm-eval's file names (found by its own ``get_results_filenames`` /
    ``get_sample_results_filenames`` / ``get_file_task_name``), its results layout (rendered by its ``make_table``),
    metrics back on their own scale (accuracy 0-1, BLEU 0-100), and an lm-eval task's block exactly as lm-eval gave it."""
    import json
    import os

    from lm_eval.utils import (
        get_file_task_name,
        get_latest_filename,
        get_results_filenames,
        get_sample_results_filenames,
        make_table,
    )

    from omnieval._artifacts import RecordsWriter, framework_result_path, write_manifest
    from omnieval.cli import main

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    m = RunManifest(run_id="r1", suite_name="s", created="2026-12-04T10:11:12", config={}, scores=[
        ScoreRow(model="org/m", benchmark="gqa", metric="exact_match", value=62.5, stderr=4.1, scale=100.0,
                 stderr_method="mean", num_samples=3),
        ScoreRow(model="org/m", benchmark="gqa", metric="bleu", value=31.2, stderr=2.5, scale=1.0, num_samples=3),
        ScoreRow(model="org/m", benchmark="lmeval:hs", metric="acc/none", value=25.0, stderr=16.3, scale=100.0,
                 num_samples=2, framework="lmeval", stderr_method="framework"),
    ])  # fmt: skip
    write_manifest(run_dir, m)
    raw = {"results": {"hs_local": {"alias": "hs_local", "acc,none": 0.25, "acc_stderr,none": 0.163}},
           "configs": {"hs_local": {"task": "hs_local", "output_type": "multiple_choice"}},
           "versions": {"hs_local": 1.0}, "n-shot": {"hs_local": 0}, "higher_is_better": {"hs_local": {"acc": True}},
           "n-samples": {"hs_local": {"original": 50, "effective": 2}}, "group_subtasks": {}}  # fmt: skip
    framework_result_path(run_dir, "lmeval:hs", "org/m").parent.mkdir(parents=True, exist_ok=True)
    framework_result_path(run_dir, "lmeval:hs", "org/m").write_text(json.dumps({"raw": raw}))
    w = RecordsWriter(run_dir)
    for r in [*_records("org/m", "gqa", [1, 0, None]), *_records("org/m", "lmeval:hs", [1, 0], metric="acc/none")]:
        w.add(r)
    w.close()

    out = tmp_path / "lm"
    assert main(["export", str(run_dir), "--format", "lm-eval", "--out", str(out)]) == 0
    files = [os.path.join(d, f) for d, _, fs in os.walk(out) for f in fs]
    (results_file,) = get_results_filenames(files)
    assert get_latest_filename(get_results_filenames(files)) == results_file
    assert os.path.basename(os.path.dirname(results_file)) == "org__m"  # lm-eval's sanitized model folder
    res = json.loads(open(results_file).read())
    assert res["results"]["gqa"]["exact_match,none"] == 0.625 and res["results"]["gqa"]["exact_match_stderr,none"] == 0.041
    assert res["results"]["gqa"]["bleu,none"] == 31.2 and res["results"]["gqa"]["bleu_stderr,none"] == 2.5
    assert res["results"]["hs_local"] == raw["results"]["hs_local"] and res["n-samples"]["gqa"]["effective"] == 3
    table = make_table(res)
    lines = {ln.split("|")[5].strip(): ln for ln in table.splitlines()[2:]}
    assert "0.625|±  | 0.041" in lines["exact_match"] and "31.200|±  | 2.500" in lines["bleu"] and "0.250" in lines["acc"]
    tasks = {get_file_task_name(os.path.basename(f)): f for f in get_sample_results_filenames(files)}
    assert set(tasks) == {"gqa", "hs_local"} and set(res["task_hashes"]) == set(tasks)
    gqa = [json.loads(x) for x in open(tasks["gqa"])]
    assert [(s["doc_id"], s.get("exact_match"), "error" in s) for s in gqa] == [(0, 1, False), (1, 0, False),
                                                                               (2, None, True)]  # fmt: skip
    hs = [json.loads(x) for x in open(tasks["hs_local"])]
    assert [(s["doc_id"], s["filter"], s["acc"]) for s in hs] == [(0, "none", 1), (1, "none", 0)]
