"""HTTP API over TestClient, plus real uvicorn for "a run added after startup appears without restart"."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from omnieval.dashboard import cli_main, create_app


@pytest.fixture
def client(runs_dir: Path) -> TestClient:
    return TestClient(create_app(runs_dir))


def test_page_and_assets(client: TestClient) -> None:
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    for id_ in ("filter-modality", "filter-engine", "filter-framework", "filter-model", "leaderboard", "radar"):
        assert f'id="{id_}"' in r.text
    assert 'src="static/app.js"' in r.text and "http" not in r.text.split("<body>")[1]  # no CDN
    assert client.get("/static/app.js").status_code == 200
    assert client.get("/static/style.css").status_code == 200


def test_leaderboard_filters(client: TestClient) -> None:
    full = client.get("/api/leaderboard").json()
    assert [m["name"] for m in full["models"]] == ["gamma", "beta", "alpha"]
    img = client.get("/api/leaderboard", params={"modality": "image", "engine": ""}).json()
    assert [b["name"] for b in img["benchmarks"]] == ["mmmu_mini"] and img["applied"] == {"modality": "image"}
    one = client.get("/api/leaderboard", params={"model": "beta"}).json()
    assert [m["name"] for m in one["models"]] == ["beta"] and one["models"][0]["cells"]["asr_mini"] is None
    assert (
        client.get("/api/leaderboard", params={"framework": "lmeval"}).json()["benchmarks"][0]["name"] == "gsm8k_mini"
    )


def test_runs(client: TestClient) -> None:
    runs = client.get("/api/runs").json()
    assert [r["run_id"] for r in runs] == ["r3", "r5", "r4", "r2", "r1"]
    by_id = {r["run_id"]: r for r in runs}
    assert by_id["r3"]["status"] == "failed" and not by_id["r3"]["has_records"]
    assert by_id["r4"]["models"] == [{"name": "beta", "engine": "vllm"}]


def test_samples(client: TestClient) -> None:
    r = client.get("/api/runs/r4/samples", params={"benchmark": "mmlu_mini", "model": "beta", "limit": 2}).json()
    assert r["total"] == 4 and [s["index"] for s in r["samples"]] == [0, 1]
    assert r["samples"][0]["label"] == "A" and r["samples"][0]["prediction_postprocessed"] == "A"
    assert client.get("/api/runs/r4/samples", params={"offset": 2, "limit": 100}).json()["total"] == 14
    assert client.get("/api/runs/nope/samples").status_code == 404
    assert client.get("/api/runs/r4/samples", params={"limit": 0}).status_code == 422


def test_compare(client: TestClient) -> None:
    r = client.get("/api/compare", params={"run_a": "r2", "run_b": "r4", "benchmark": "mmlu_mini"}).json()
    assert [(p["index"], p["a"] is not None, p["b"] is not None) for p in r["pairs"]] == [
        (0, True, True),
        (1, True, True),
        (2, True, True),
        (3, True, True),
        (4, True, False),
    ]
    page = client.get(
        "/api/compare", params={"run_a": "r2", "run_b": "r4", "benchmark": "mmlu_mini", "offset": 3, "limit": 1}
    ).json()
    assert page["total"] == 5 and [p["index"] for p in page["pairs"]] == [3]
    assert client.get("/api/compare", params={"run_a": "r2", "run_b": "zz", "benchmark": "x"}).status_code == 404


def test_new_run_appears_without_restart_testclient(client: TestClient, runs_dir: Path, run_factory) -> None:
    assert client.get("/api/leaderboard", params={"model": "gamma"}).json()["models"][0]["cells"]["gsm8k_mini"] is None
    run_factory(runs_dir, "late", "2025-07-01T00:00:00", {("gamma", "gsm8k_mini"): (33.0, 34.0)})
    cell = client.get("/api/leaderboard", params={"model": "gamma"}).json()["models"][0]["cells"]["gsm8k_mini"]
    assert cell["run_id"] == "late" and cell["verifier"] == 34.0
    assert client.get("/api/runs").json()[0]["run_id"] == "late"


def test_new_run_appears_without_restart_uvicorn(tmp_path: Path, run_factory, live_server) -> None:
    runs = tmp_path / "empty-at-start"
    runs.mkdir()
    with live_server(create_app(runs)) as url, httpx.Client(base_url=url, timeout=10) as http:
        assert http.get("/api/leaderboard").json()["models"] == []
        run_factory(runs, "first", "2025-01-01T00:00:00", {("alpha", "mmlu_mini"): (10.0, 11.0)})
        lb = http.get("/api/leaderboard").json()
        assert [m["name"] for m in lb["models"]] == ["alpha"]
        run_factory(runs, "second", "2025-01-02T00:00:00", {("alpha", "mmlu_mini"): (20.0, 21.0)})
        assert http.get("/api/leaderboard").json()["models"][0]["cells"]["mmlu_mini"]["run_id"] == "second"


def test_cli_export_and_errors(runs_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "site"
    assert cli_main([str(runs_dir), "--export", str(out), "--max-samples", "2"]) == 0
    assert (out / "index.html").is_file() and (out / "data.json").is_file()
    assert str(out / "index.html") in capsys.readouterr().out
    assert cli_main([str(tmp_path / "missing")]) == 2
    with pytest.raises(SystemExit):
        cli_main(["--port", "x"])
