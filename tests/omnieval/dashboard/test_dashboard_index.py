"""ArtifactIndex / build_leaderboard: newest run wins, gaps, coverage, mean verifier, filters, rescans."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from omnieval._artifacts import read_manifest, write_manifest
from omnieval.dashboard import ArtifactIndex


def _rows(lb: dict) -> dict[str, dict]:
    return {m["name"]: m for m in lb["models"]}


def test_newest_completed_run_wins(runs_dir: Path) -> None:
    cell = _rows(ArtifactIndex(runs_dir).leaderboard())["alpha"]["cells"]["mmlu_mini"]
    # r3 is newer but failed; r2 beats the older r1
    assert (cell["run_id"], cell["value"], cell["verifier"], cell["metric"]) == ("r2", 60.0, 58.0, "accuracy")
    # a benchmark only the old run scored still comes from it
    assert _rows(ArtifactIndex(runs_dir).leaderboard())["alpha"]["cells"]["gsm8k_mini"]["run_id"] == "r1"


def test_gaps_and_coverage(runs_dir: Path) -> None:
    lb = ArtifactIndex(runs_dir).leaderboard()
    assert [b["name"] for b in lb["benchmarks"]] == ["asr_mini", "gsm8k_mini", "mmlu_mini", "mmmu_mini"]
    rows = _rows(lb)
    gaps = {(m, b) for m, r in rows.items() for b, c in r["cells"].items() if c is None}
    assert gaps == {("alpha", "mmmu_mini"), ("alpha", "asr_mini"), ("beta", "asr_mini"), ("gamma", "gsm8k_mini")}
    assert rows["alpha"]["coverage"] == 50.0
    assert rows["beta"]["coverage"] == rows["gamma"]["coverage"] == 75.0


def test_mean_verifier_and_ranking(runs_dir: Path) -> None:
    lb = ArtifactIndex(runs_dir).leaderboard()
    rows = _rows(lb)
    assert rows["alpha"]["mean_verifier"] == pytest.approx((58 + 31) / 2)
    assert rows["beta"]["mean_verifier"] == pytest.approx((72 + 42 + 50) / 3)
    assert rows["gamma"]["mean_verifier"] == pytest.approx((44 + 66 + 79) / 3)
    assert [m["name"] for m in lb["models"]] == ["gamma", "beta", "alpha"]
    bench = {b["name"]: b for b in lb["benchmarks"]}
    assert bench["mmmu_mini"] == {
        "name": "mmmu_mini",
        "modality": "image",
        "framework": "vlmeval",
        "metric": "accuracy",
    }


@pytest.mark.parametrize(
    ("filters", "benchmarks", "models"),
    [
        ({"modality": "image"}, ["mmmu_mini"], ["gamma", "beta"]),
        ({"modality": "audio"}, ["asr_mini"], ["gamma"]),
        ({"engine": "vllm"}, ["gsm8k_mini", "mmlu_mini", "mmmu_mini"], ["beta"]),
        ({"framework": "lmeval"}, ["gsm8k_mini"], ["beta", "alpha"]),
        ({"modality": "text", "engine": "llamacpp"}, ["gsm8k_mini", "mmlu_mini"], ["alpha"]),
        # the model filter keeps every column, so the selected model's gaps stay visible
        ({"model": "alpha"}, ["asr_mini", "gsm8k_mini", "mmlu_mini", "mmmu_mini"], ["alpha"]),
        ({"modality": "video"}, [], []),
    ],
)
def test_filters(runs_dir: Path, filters: dict, benchmarks: list, models: list) -> None:
    lb = ArtifactIndex(runs_dir).leaderboard(**filters)
    assert [b["name"] for b in lb["benchmarks"]] == benchmarks
    assert [m["name"] for m in lb["models"]] == models
    assert lb["applied"] == filters
    # the options offered never shrink with the filters, so a filter can always be changed back
    assert lb["options"] == {
        "modality": ["audio", "image", "text"],
        "engine": ["llamacpp", "transformers", "vllm"],
        "framework": ["builtin", "lmeval", "vlmeval"],
        "model": ["alpha", "beta", "gamma"],
    }


def test_model_filter_coverage_counts_all_columns(runs_dir: Path) -> None:
    alpha = ArtifactIndex(runs_dir).leaderboard(model="alpha")["models"][0]
    assert alpha["coverage"] == 50.0 and alpha["cells"]["mmmu_mini"] is None


def test_nan_and_missing_verifier(runs_dir: Path, run_factory) -> None:
    run_factory(runs_dir, "r6", "2025-04-01T00:00:00", {("alpha", "asr_mini"): (math.nan, None)}, records=False)
    rows = _rows(ArtifactIndex(runs_dir).leaderboard())
    cell = rows["alpha"]["cells"]["asr_mini"]
    assert cell["value"] is None and cell["verifier"] is None
    assert rows["alpha"]["mean_verifier"] == pytest.approx((58 + 31) / 2)  # a cell without verifier doesn't count
    assert rows["alpha"]["coverage"] == 75.0


def test_radar_defaults_to_a_score_that_exists(runs_dir: Path, tmp_path: Path, run_factory) -> None:
    assert ArtifactIndex(runs_dir).leaderboard()["radar_default"] == "verifier"
    bare = tmp_path / "no-verifier"
    bare.mkdir()
    run_factory(
        bare, "n1", "2025-01-01T00:00:00", {("alpha", "mmlu_mini"): (50.0, None), ("beta", "asr_mini"): (7.0, None)}
    )
    lb = ArtifactIndex(bare).leaderboard()
    assert lb["radar_default"] == "value"  # the headline metric: plotting the verifier would draw nothing
    assert [c["value"] for m in lb["models"] for c in m["cells"].values() if c] == [50.0, 7.0]
    # a filter that leaves only cells without a verifier score switches the default too
    run_factory(runs_dir, "r7", "2025-05-01T00:00:00", {("delta", "asr_mini"): (80.0, None)})
    assert ArtifactIndex(runs_dir).leaderboard(model="delta")["radar_default"] == "value"
    assert ArtifactIndex(runs_dir).leaderboard(model="gamma")["radar_default"] == "verifier"


def test_rescan_new_changed_and_removed_runs(runs_dir: Path, run_factory) -> None:
    index = ArtifactIndex(runs_dir)
    assert "delta" not in _rows(index.leaderboard())
    run_factory(runs_dir, "r7", "2025-05-01T00:00:00", {("alpha", "asr_mini"): (12.0, 13.0)})
    assert _rows(index.leaderboard())["alpha"]["cells"]["asr_mini"]["verifier"] == 13.0
    m = read_manifest(runs_dir / "r7")
    m.scores = [s.model_copy(update={"value": 90.0}) for s in m.scores]
    write_manifest(runs_dir / "r7", m)
    assert _rows(index.leaderboard())["alpha"]["cells"]["asr_mini"]["verifier"] == 90.0
    (runs_dir / "r7" / "manifest.json").unlink()
    assert _rows(index.leaderboard())["alpha"]["cells"]["asr_mini"] is None


def test_running_run_listed_but_not_scored(runs_dir: Path, run_factory) -> None:
    run_factory(runs_dir, "r8", "2025-06-01T00:00:00", {("gamma", "gsm8k_mini"): (1.0, 1.0)}, status="running")
    index = ArtifactIndex(runs_dir)
    assert _rows(index.leaderboard())["gamma"]["cells"]["gsm8k_mini"] is None
    runs = index.runs()
    assert [r["run_id"] for r in runs] == ["r8", "r3", "r5", "r4", "r2", "r1"]  # newest first
    assert runs[0]["status"] == "running"


def test_unreadable_and_foreign_dirs(runs_dir: Path) -> None:
    (runs_dir / "broken").mkdir()
    (runs_dir / "broken" / "manifest.json").write_text("{not json")
    (runs_dir / "notes").mkdir()  # no manifest: ignored
    (runs_dir / "README.txt").write_text("hi")
    index = ArtifactIndex(runs_dir)
    assert len(index.leaderboard()["models"]) == 3
    broken = [r for r in index.runs() if r["run_id"] == "broken"]
    assert broken and broken[0]["status"] == "unreadable" and broken[0]["error"]
    assert not any(r["run_id"] == "notes" for r in index.runs())


def test_missing_runs_dir_is_empty(tmp_path: Path) -> None:
    lb = ArtifactIndex(tmp_path / "nope").leaderboard()
    assert lb["models"] == [] and lb["benchmarks"] == []


def test_samples_paging(runs_dir: Path) -> None:
    index = ArtifactIndex(runs_dir)
    page = index.samples("r4", benchmark="mmmu_mini", offset=1, limit=2)
    assert page["total"] == 5 and [s["index"] for s in page["samples"]] == [1, 2]
    s = page["samples"][0]
    assert s["media"] == [{"type": "image", "value": "/data/img_1.png"}]
    assert "[user] Question 1 of mmmu_mini?" in s["prompt"] and "[system]" in s["prompt"]
    err = index.samples("r4", benchmark="mmmu_mini", offset=3, limit=1)["samples"][0]
    assert err["error"]["kind"] == "timeout" and err["prediction"] is None
    with pytest.raises(KeyError):
        index.samples("../r4")


def test_compare_aligns_by_index(runs_dir: Path) -> None:
    res = ArtifactIndex(runs_dir).compare("r2", "r4", "mmlu_mini")
    assert (res["model_a"], res["model_b"], res["total"]) == ("alpha", "beta", 5)
    assert [p["index"] for p in res["pairs"]] == [0, 1, 2, 3, 4]
    last = res["pairs"][-1]
    assert last["a"]["index"] == 4 and last["b"] is None  # r4 lacks sample 4
    p0 = res["pairs"][0]
    # alpha is right on odd indices, beta on even ones
    assert p0["a"]["metrics"]["accuracy"] == 0.0 and p0["b"]["metrics"]["accuracy"] == 1.0


def test_every_verifier_score_in_the_cell_never_as_native(tmp_path: Path) -> None:
    from omnieval._artifacts import RunManifest, ScoreRow
    from omnieval.dashboard._index import cells_of

    rows = [ScoreRow(model="m", benchmark="b", metric=k, value=v, num_samples=4)
            for k, v in (("verifier_prob", 61.5), ("verifier", 75.0), ("exact_match", 50.0))]  # fmt: skip
    (cell,) = cells_of(RunManifest(run_id="r", suite_name="s", created="t", config={}, scores=rows))
    assert (cell.metric, cell.value, cell.verifier) == ("exact_match", 50.0, 75.0)
    assert cell.verifiers == {"verifier_prob": 61.5, "verifier": 75.0}
