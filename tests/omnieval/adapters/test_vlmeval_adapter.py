"""VLMEvalKit (PyPI ms-vlmeval) through the pool: a custom TSV in $LMUData, VLMEvalKit's prompt and its own scoring.

VLMEvalKit needs CUDA torch 2.14.1 + torchvision (they run on CPU), so it lives in its own venv; these tests skip
elsewhere:

    PY=$(scripts/make_framework_venv.sh vlmeval)   # builds ~/.cache/omnieval/venv-vlmeval-<version> once (~7 GB)
    $PY -m pytest tests/omnieval/adapters/test_vlmeval_adapter.py

``scripts/ci_frameworks.sh`` does both.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import yaml
from testlib.fake_vlm import answer, colour_of, fake_vlm
from testlib.runs import ROOT, artifact_from, run_cli
from testlib.tiers import need

from omnieval import read_manifest, read_records
from omnieval.core import GenerationOptions, ImageContent
from serving._types import GenerationRequest, GenerationResult

TSV = ROOT / "omnieval/benchmarks/data/vlmeval/TinyShapesMCQ.tsv"


class FakeBridge:
    def __init__(self) -> None:
        self.requests: list[GenerationRequest] = []

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult | BaseException]:
        self.requests += requests
        return [
            GenerationResult(request_id=r.request_id, text=answer(r.messages), replica_id="fake/0") for r in requests
        ]


@pytest.fixture
def vlmeval_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    need("vlmeval")
    monkeypatch.setenv("OMNIEVAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LMUData", str(tmp_path / "LMUData"))  # the user's own LMUData is never touched
    (tmp_path / "LMUData").mkdir()
    return tmp_path


def test_vlmeval_adapter_sends_images_and_keeps_vlmeval_scores(vlmeval_env: Path) -> None:
    from omnieval.adapters._vlmeval import VLMEvalAdapter

    bridge = FakeBridge()
    res = VLMEvalAdapter().run(task="TinyShapesMCQ", options={"nproc": 4}, model="fake-vlm", bridge=bridge,
                               limit=None, generation=GenerationOptions(max_tokens=8))  # fmt: skip
    assert len(bridge.requests) == 8
    for req in bridge.requests:
        parts = req.messages[0]["content"]
        assert [p["type"] for p in parts] == ["image_url", "text"] and "Options:\nA. red" in parts[1]["text"]
        assert req.options.max_tokens == 8
    scores = {s.metric: s for s in res.scores}
    # VLMEvalKit's own report_acc: Overall plus one column per TSV category
    assert scores["acc/Overall"].value == 100.0 and {"acc/circle", "acc/square", "acc/triangle"} <= set(scores)
    # every verdict 1: the mean's standard error is 0; the category columns are not that mean and get none
    assert (scores["acc/Overall"].stderr, scores["acc/Overall"].stderr_method) == (0.0, "mean")
    assert scores["acc/circle"].stderr is None and scores["acc/circle"].scale == 100.0
    assert all(s.framework == "vlmeval" and s.modality == "image" for s in res.scores)
    assert res.versions["ms-vlmeval"] == "0.0.20" and res.versions["torch"]
    assert len(res.records) == 8 and res.records[0].options == ["red", "green", "blue", "yellow"]
    for r in res.records:
        img = r.messages[0].content[0]
        assert isinstance(img, ImageContent) and Path(img.value).exists()
        colour = colour_of("data:image/png;base64," + base64.b64encode(Path(img.value).read_bytes()).decode())
        assert r.options and r.label == "ABCD"[r.options.index(colour)] and r.prediction == r.label
        assert r.metrics == {"acc": 1.0} and len(r.model_dump_json()) < 2000


def test_data_files_option_and_limit(vlmeval_env: Path) -> None:
    from omnieval.adapters._vlmeval import VLMEvalAdapter

    (vlmeval_env / "mine.tsv").write_bytes(TSV.read_bytes())
    bridge = FakeBridge()
    res = VLMEvalAdapter().run(task="MyShapes", options={"data_files": {"test": str(vlmeval_env / "mine.tsv")}},
                               model="m", bridge=bridge, limit=3, generation=GenerationOptions())  # fmt: skip
    assert len(bridge.requests) == 3 and [r.benchmark for r in res.records] == ["vlmeval:MyShapes"] * 3
    assert not (vlmeval_env / "LMUData" / "MyShapes.tsv").exists()  # copied into the run's private LMUData only


def test_unknown_dataset_is_a_user_error(vlmeval_env: Path) -> None:
    from omnieval.adapters._vlmeval import VLMEvalAdapter
    from omnieval.core import OmnievalUserError

    with pytest.raises(OmnievalUserError, match="cannot build dataset 'NoSuchTSV'"):
        VLMEvalAdapter().run(
            task="NoSuchTSV", options={}, model="m", bridge=FakeBridge(), limit=None, generation=GenerationOptions()
        )


@pytest.mark.slow
@pytest.mark.ray
def test_vlmeval_through_the_pool_reaches_the_engine(vlmeval_env: Path) -> None:
    """The whole path in the vlmeval venv: suite → pool → openai engine replica → a real HTTP server that reads pixels."""
    with fake_vlm() as vlm:
        suite = {"name": "vlmeval-e2e",
                 "models": [{"name": "vlm", "source": {"kind": "endpoint", "base_url": vlm.base_url}, "engine": "openai"}],
                 "benchmarks": [{"name": "TinyShapesMCQ", "framework": "vlmeval", "options": {"nproc": 4}}],
                 "pool": {"clients": 1}}  # fmt: skip
        cfg = vlmeval_env / "suite.yaml"
        cfg.write_text(yaml.safe_dump(suite))
        proc = run_cli("run", str(cfg), "--output-dir", str(vlmeval_env / "runs"), "--no-progress")
        assert proc.returncode == 0, proc.stderr[-4000:]
        sent = vlm.image_parts()
    assert len(sent) == 8 and all(p["image_url"]["url"].startswith("data:image/png;base64,") for p in sent)
    run = artifact_from(proc.stdout)
    row = next(s for s in read_manifest(run).scores if s.metric == "acc/Overall")
    assert row.value == 100.0 and row.engine == "openai" and row.framework == "vlmeval"
    recs = read_records(run)
    assert len(recs) == 8 and all(isinstance(r.messages[0].content[0], ImageContent) for r in recs)
    assert json.loads(next(run.glob("framework-vlmeval_TinyShapesMCQ-*.json")).read_text())["versions"]["ms-vlmeval"]
