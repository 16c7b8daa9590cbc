"""lmms-eval through the pool: images travel as OpenAI image_url parts, Records keep them as files, scores are lmms-eval's.

lmms-eval (torch, transformers, filelock<4) lives in its own venv, so most tests here run there and skip elsewhere:

    PY=$(scripts/make_framework_venv.sh lmms)      # builds ~/.cache/omnieval/venv-lmms-<version> once (~7 GB)
    HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 $PY -m pytest tests/omnieval/adapters/test_lmms_adapter.py

The two-environment tests (``-k "own_interpreter or two_environments"``) run from the MAIN venv instead — lm-eval in
the driver's interpreter, lmms-eval in the framework venv (``OMNIEVAL_LMMS_PYTHON`` overrides where it is) — and skip
inside the framework venv or when it is not built. ``scripts/ci_frameworks.sh`` runs all of it.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from testlib.fake_vlm import answer, colour_of, fake_vlm
from testlib.runs import ROOT, artifact_from, run_cli
from testlib.tiers import need, unavailable

from omnieval import read_manifest, read_records
from omnieval.core import GenerationOptions, ImageContent
from serving._types import GenerationRequest, GenerationResult

OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
LMMS_PY = Path(os.environ.get("OMNIEVAL_LMMS_PYTHON", "~/.cache/omnieval/venv-lmms-0.7.3/bin/python")).expanduser()
LMMS_READY = (LMMS_PY.parents[1] / ".complete").exists()  # make_framework_venv.sh stamps a finished install


def _need_driver_venv_and_lmms_venv() -> None:
    """The two-environment tests only prove something from the main venv, with the lmms venv built."""
    if importlib.util.find_spec("lmms_eval") is not None:
        pytest.skip("run from the main venv: here lmms-eval shares the driver's interpreter")
    if not LMMS_READY:
        unavailable("lmms", f"no lmms venv at {LMMS_PY}")
    # Ray and omnieval come into that venv from this checkout through a .pth the venv script writes; a venv built for
    # another checkout's path imports no Ray, and its actor would never start (the test would hang, not fail).
    import sysconfig

    pth = next(LMMS_PY.parents[1].glob("lib/python*/site-packages/zz_omnieval_main.pth"), None)
    here = sysconfig.get_paths()["purelib"]
    if pth is None or here not in pth.read_text().splitlines():
        unavailable("lmms", f"the lmms venv at {LMMS_PY.parents[1]} points at another checkout's packages, not {here}")


class FakeBridge:
    """Stands in for ``PoolBridge``: answers like a VLM and keeps what it was sent (no Ray, no engine)."""

    def __init__(self) -> None:
        self.requests: list[GenerationRequest] = []

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult | BaseException]:
        self.requests += requests
        return [GenerationResult(request_id=r.request_id, text=answer(r.messages), replica_id="fake/0",
                                 completion_tokens=1) for r in requests]  # fmt: skip


def test_record_messages_store_images_as_cached_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs everywhere: the data URI sent to the engine becomes a small content-addressed file in the Record."""
    from omnieval.adapters._media import record_messages
    from serving._messages import to_openai

    monkeypatch.setenv("OMNIEVAL_CACHE", str(tmp_path))
    png = (ROOT / "omnieval/benchmarks/data/lmms/tiny_shapes/images/shape_0.png").read_bytes()
    uri = "data:image/png;base64," + base64.b64encode(png).decode()
    msgs = record_messages([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": uri}},
                                                         {"type": "text", "text": "colour?"}]}])  # fmt: skip
    img = msgs[0].content[0]
    assert isinstance(img, ImageContent) and Path(img.value).parent == tmp_path / "media"
    assert Path(img.value).read_bytes() == png and img.value.endswith(".png")
    # and the Record replays to the same request the engine got
    assert to_openai(msgs)[0]["content"][0]["image_url"]["url"] == uri


def test_tiny_shapes_resolves_offline_and_data_files_override(tmp_path: Path) -> None:
    need("lmms_eval")
    from omnieval.adapters._lmms import task_manager
    from omnieval.core import OmnievalUserError

    tm, name = task_manager("tiny_shapes", {}, tmp_path)
    assert name == "tiny_shapes" and "tiny_shapes" in tm.all_tasks
    data = ROOT / "omnieval/benchmarks/data/lmms/tiny_shapes/test.jsonl"
    tm, name = task_manager("tiny_shapes", {"data_files": {"test": str(data)}}, tmp_path)
    assert name == "tiny_shapes_local" and name in tm.all_tasks
    assert yaml.safe_load((tmp_path / "tiny_shapes_local.yaml").read_text())["dataset_kwargs"]["data_files"][
        "test"
    ] == str(data)
    with pytest.raises(OmnievalUserError, match="no task 'tiny_shapez'"):
        task_manager("tiny_shapez", {"include_path": str(tmp_path)}, tmp_path)


def test_the_check_reads_a_cached_task_index_that_follows_the_task_files(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The pre-deploy check builds lmms-eval's task index once (importing ``lmms_eval.tasks`` takes seconds); a
    second check does not import it at all, and a task YAML added to an include_path is found (a new index)."""
    need("lmms_eval")
    from omnieval.adapters._lmms import LMMSEvalAdapter
    from omnieval.core import OmnievalUserError

    monkeypatch.setenv("OMNIEVAL_CACHE", str(tmp_path / "cache"))
    own = tmp_path / "tasks"
    own.mkdir()
    check = LMMSEvalAdapter().check
    check("tiny_shapes", {"include_path": str(own)}, "benchmarks[0]")  # builds the index of the local folders
    with pytest.raises(OmnievalUserError, match="no task 'my_shapes'.*Did you mean: tiny_shapes"):
        check("my_shapes", {"include_path": str(own)}, "benchmarks[0]")  # and, not found there, the bundled one
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "lmms_eval.tasks", None)  # any import of it now fails
        check("tiny_shapes", {"include_path": str(own)}, "benchmarks[0]")  # from the cached indexes
        with pytest.raises(OmnievalUserError, match="no task 'my_shapes'.*Did you mean: tiny_shapes"):
            check("my_shapes", {"include_path": str(own)}, "benchmarks[0]")
        (own / "my_shapes.yaml").write_text((ROOT / "omnieval/benchmarks/data/lmms/tiny_shapes/tiny_shapes.yaml")
                                            .read_text().replace("task: tiny_shapes", "task: my_shapes"))  # fmt: skip
        with pytest.raises(ImportError):  # the folder changed: its index is rebuilt, which needs lmms_eval
            check("my_shapes", {"include_path": str(own)}, "benchmarks[0]")
    check("my_shapes", {"include_path": str(own)}, "benchmarks[0]")
    with pytest.raises(OmnievalUserError, match=r"benchmarks\[0\].options.include_path: .*nowhere is not a folder"):
        check("tiny_shapes", {"include_path": str(tmp_path / "nowhere")}, "benchmarks[0]")


def test_lmms_adapter_sends_images_and_keeps_lmms_scores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need("lmms_eval")
    from omnieval.adapters._lmms import LMMSEvalAdapter

    monkeypatch.setenv("OMNIEVAL_CACHE", str(tmp_path))
    for k, v in OFFLINE.items():
        monkeypatch.setenv(k, v)
    bridge = FakeBridge()
    res = LMMSEvalAdapter().run(task="tiny_shapes", options={}, model="fake-vlm", bridge=bridge, limit=None,
                                generation=GenerationOptions(max_tokens=16))  # fmt: skip
    # the pool was asked with typed parts: the image as a base64 image_url, then the question
    assert len(bridge.requests) == 8
    for req in bridge.requests:
        kinds = [p["type"] for p in req.messages[0]["content"]]
        assert kinds == ["image_url", "text"] and req.messages[0]["content"][0]["image_url"]["url"].startswith(
            "data:image/png;base64,"
        )
        assert req.options.max_tokens == 16  # the task's max_new_tokens
    # lmms-eval scored the answers itself; all are right only because every image arrived intact
    assert [(s.metric, s.value, s.framework, s.modality) for s in res.scores] == [
        ("exact_match/none", 100.0, "lmms", "image")
    ]
    assert res.versions["lmms-eval"] and res.versions["torch"]
    labels = [r.label for r in res.records]
    assert len(res.records) == 8 and labels[:3] == ["red", "green", "blue"]
    for r in res.records:
        img = r.messages[0].content[0]
        assert isinstance(img, ImageContent) and Path(img.value).exists() and r.modalities() == {"image", "text"}
        uri = "data:image/png;base64," + base64.b64encode(Path(img.value).read_bytes()).decode()
        assert colour_of(uri) == r.label and r.prediction == r.label and r.metrics == {"exact_match/none": 1.0}
        assert r.output and r.output.replica == "fake/0" and len(r.model_dump_json()) < 2000  # paths, not base64


def test_lmms_framework_actor_runs_in_its_own_interpreter() -> None:
    """From the main venv: a FrameworkClient given the lmms venv's python really runs there (its torch, no lm-eval
    pins leaking in), while the default one runs in the driver's interpreter."""
    _need_driver_venv_and_lmms_venv()
    code = (
        "import json, sys, ray\n"
        "from omnieval.adapters._actor import FrameworkClient\n"
        "from omnieval.core import PoolConfig\n"
        "ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)\n"
        "main = FrameworkClient.remote(None, PoolConfig())\n"
        f"lmms = FrameworkClient.options(runtime_env={{'py_executable': {str(LMMS_PY)!r}}}).remote(None, PoolConfig())\n"
        "print(json.dumps({'driver': sys.executable, 'main': ray.get(main.environment.remote()),"
        " 'lmms': ray.get(lmms.environment.remote())}))\n"
        "ray.shutdown()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    env: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert env["lmms"]["python"] == str(LMMS_PY) and "lmms-eval" in env["lmms"] and "torch" in env["lmms"]
    assert env["main"]["python"] == env["driver"] != env["lmms"]["python"]


@pytest.mark.slow
@pytest.mark.ray
def test_lmeval_and_lmms_in_one_suite_two_environments(tmp_path: Path) -> None:
    """examples/frameworks.yaml: lm-eval gsm8k on SmolLM2 in the driver's venv, lmms-eval tiny_shapes in its own venv
    on an OpenAI-compatible VLM endpoint; both land in one manifest, and the engine saw the images."""
    need("lm_eval")
    _need_driver_venv_and_lmms_venv()
    with fake_vlm() as vlm:
        suite = yaml.safe_load((ROOT / "examples/frameworks.yaml").read_text())
        vlm_model = next(m for m in suite["models"] if m["name"] == "vlm")
        vlm_model["source"]["base_url"] = vlm.base_url
        suite["frameworks"]["lmms"]["python"] = str(LMMS_PY)
        cfg = tmp_path / "suite.yaml"
        cfg.write_text(yaml.safe_dump(suite))
        proc = run_cli(
            "run", str(cfg), "--output-dir", str(tmp_path), "--no-progress", env=OFFLINE
        )  # relative data: cwd=ROOT
        assert proc.returncode == 0, proc.stderr[-4000:]
        sent = vlm.image_parts()
    run = artifact_from(proc.stdout)
    m = read_manifest(run)
    by_bench = {(s.benchmark, s.metric): s for s in m.scores}
    assert {"exact_match/strict-match", "exact_match/flexible-extract"} <= {
        mt for b, mt in by_bench if b == "lmeval:gsm8k"
    }
    lmms = by_bench[("lmms:tiny_shapes", "exact_match/none")]
    assert lmms.framework == "lmms" and lmms.engine == "openai" and lmms.value == 100.0 and lmms.modality == "image"
    # the engine received every image as an image_url part (8 samples), and the Records hold them as files
    assert len(sent) == 8 and all(p["image_url"]["url"].startswith("data:image/png;base64,") for p in sent)
    recs = [r for r in read_records(run) if r.benchmark == "lmms:tiny_shapes"]
    for r in recs:
        img = r.messages[0].content[0]
        assert isinstance(img, ImageContent) and r.prediction == r.label
        assert colour_of("data:image/png;base64," + base64.b64encode(Path(img.value).read_bytes()).decode()) == r.label
    assert any(r.benchmark == "lmeval:gsm8k" for r in read_records(run))
    # each framework ran in its own interpreter: lmms-eval (not importable in the driver's venv) reports its venv's
    # torch; lm-eval reports none (test_lmms_framework_actor_runs_in_its_own_interpreter checks the interpreters)
    lmms_res = json.loads(next(run.glob("framework-lmms_tiny_shapes-*.json")).read_text())
    lmeval_res = json.loads(next(run.glob("framework-lmeval_gsm8k-*.json")).read_text())
    assert "torch" in lmms_res["versions"] and "torch" not in lmeval_res["versions"]


@pytest.mark.slow
@pytest.mark.ray
def test_bench_lmms_runs_both_tools_on_the_same_image_rows(capsys: pytest.CaptureFixture[str]) -> None:
    """``omnieval bench lmms``: lmms-eval alone and an ``omnieval run`` of the same task file both answer every row
    (the run scored all of them, lmms-eval in its venv's process), and the summary is the ratio of the medians."""
    _need_driver_venv_and_lmms_venv()
    from omnieval.perf._lmms import bench_lmms, report

    res = bench_lmms(rows=24, repeats=2, python=str(LMMS_PY))
    assert [r["order"] for r in res["runs"]] == [["lmms_eval", "omnieval"], ["omnieval", "lmms_eval"]]
    assert all(r["omnieval_manifest"]["samples"] == 24 for r in res["runs"])
    s = res["summary"]
    walls = sorted(r["lmms_eval_s"] for r in res["runs"]), sorted(r["omnieval_s"] for r in res["runs"])
    assert s["lmms_eval_s"] == pytest.approx(sum(walls[0]) / 2) and s["omnieval_s"] == pytest.approx(sum(walls[1]) / 2)
    assert s["ratio_of_medians"] == s["omnieval_s"] / s["lmms_eval_s"]
    assert s["ratio_range"] == [min(r["ratio"] for r in res["runs"]), max(r["ratio"] for r in res["runs"])]
    assert "omnieval / lmms_eval = " in "\n".join(report(res))


@pytest.mark.ray
def test_a_framework_interpreter_that_cannot_import_omnieval_fails_its_task_with_the_fix(tmp_path: Path) -> None:
    """A framework venv whose link to the driver's checkout is broken (its .pth names a moved or deleted checkout)
    cannot run the task's process: its task fails with what the interpreter said and how to rebuild the venv, and
    the run ends (no wait on a process that never answers)."""
    broken = tmp_path / "venv-lmms" / "bin" / "python"
    broken.parent.mkdir(parents=True)
    # as such a venv behaves: omnieval's task check runs (a cached index, nothing imported) and passes; the task's
    # process fails at its first import of omnieval
    broken.write_text("#!/bin/sh\nif [ \"$1\" = -m ]; then cat >/dev/null; echo '[]'; exit 0; fi\n"
                      "echo \"ModuleNotFoundError: No module named 'omnieval'\" >&2\nexit 1\n")
    broken.chmod(0o755)
    with fake_vlm() as vlm:
        suite = {"name": "broken-venv", "benchmarks": [{"name": "tiny_shapes", "framework": "lmms", "models": ["vlm"]}],
                 "models": [{"name": "vlm", "source": {"kind": "endpoint", "base_url": vlm.base_url}, "engine": "openai"}],
                 "frameworks": {"lmms": {"python": str(broken)}}, "pool": {"clients": 1}}  # fmt: skip
        cfg = tmp_path / "suite.yaml"
        cfg.write_text(yaml.safe_dump(suite))
        # a hang guard, not a performance goal
        proc = run_cli("run", str(cfg), "--output-dir", str(tmp_path), "--no-progress", env=OFFLINE, timeout=240)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert f"frameworks.lmms.python {broken} cannot run omnieval's framework process (exited with status 1" in out
    assert "No module named 'omnieval'" in out and "bash scripts/make_framework_venv.sh lmms" in out


def test_lmms_log_likelihood_tasks_are_told_apart_from_their_yaml(tmp_path: Path) -> None:
    """lmms-eval's ``*_ppl`` tasks (``output_type: multiple_choice``, often through an ``include:`` template and with
    ``!function`` hooks) are recognised without importing anything, so the check refuses them before deploy."""
    from omnieval.adapters._lmms import yaml_output_type

    (tmp_path / "_template.yaml").write_text("output_type: multiple_choice\ndoc_to_visual: !function utils.visual\n")
    (tmp_path / "seed_ppl.yaml").write_text("include: _template.yaml\ntask: seed_ppl\n")
    (tmp_path / "seed_gen.yaml").write_text("include: _template.yaml\ntask: seed_gen\noutput_type: generate_until\n")
    (tmp_path / "plain.yaml").write_text("task: plain\ndoc_to_text: !function utils.text\n")
    assert yaml_output_type(tmp_path / "seed_ppl.yaml") == "multiple_choice"
    assert yaml_output_type(tmp_path / "seed_gen.yaml") == "generate_until"
    assert yaml_output_type(tmp_path / "plain.yaml") == "generate_until"  # lmms-eval's default


def test_a_bundled_lmms_ppl_task_is_refused_before_deploy() -> None:
    """lmms-eval's own ``seedbench_ppl`` needs log-likelihoods of image + text prompts, which its chat model interface
    (the one the pool answers) does not have: the check says so and names the generative task."""
    need("lmms_eval")
    from omnieval.adapters._lmms import LMMSEvalAdapter
    from omnieval.core import OmnievalUserError

    with pytest.raises(
        OmnievalUserError,
        match=r"lmms:seedbench_ppl needs log-likelihoods .*output_type multiple_choice.*\(seedbench where",
    ):
        LMMSEvalAdapter().check("seedbench_ppl", {}, "benchmarks[0]")
    LMMSEvalAdapter().check("seedbench", {}, "benchmarks[0]")  # its generative form passes
