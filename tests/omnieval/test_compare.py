from __future__ import annotations

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
