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
