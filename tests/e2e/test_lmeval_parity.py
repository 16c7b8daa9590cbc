"""lm-eval through omnieval scores exactly what lm-eval's own API clients score against the same llama-server.

One real llama-server (SmolLM2) serves both: ``lm_eval.simple_evaluate`` with its ``local-chat-completions`` /
``local-completions`` model, and an ``omnieval run`` whose model is that server as an external endpoint. Same task,
same settings, so every prediction and every score row must be equal.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from testlib.engine import require_default_model
from testlib.llama import llama_server
from testlib.runs import ROOT, artifact_from, run_cli
from testlib.tiers import need

from omnieval import read_manifest, read_records

need("lm_eval")
pytestmark = [pytest.mark.slow, pytest.mark.ray]

DATA = "omnieval/benchmarks/data/lmeval/gsm8k_format_asdiv.jsonl"
TASKS = ROOT / "examples/lmeval_tasks"
OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One slot, no prompt cache: llama.cpp's kernels differ with batch shape (another request in the batch, a cached
    prefix), which can flip a greedy token; comparing two clients needs the server to answer a prompt one way."""
    with llama_server(require_default_model(), tmp_path_factory.mktemp("llama"), parallel=1, ctx=4096,
                      extra=("--no-cache-prompt",)) as (url, _):  # fmt: skip
        yield url


def _suite(tmp_path: Path, base_url: str, benchmarks: list[dict[str, Any]]) -> Path:
    suite = {
        "name": "lmeval-parity",
        "models": [{"name": "smollm2", "source": {"kind": "endpoint", "base_url": base_url}, "engine": "openai",
                    "engine_kwargs": {"slots": 4, "scoring": "llamacpp"}}],
        "benchmarks": benchmarks,
        "frameworks": {"lmeval": {"env_vars": OFFLINE}},
        "cache": {"enabled": False},
        "pool": {"clients": 1, "max_inflight_per_replica": 4},
    }  # fmt: skip
    path = tmp_path / "suite.yaml"
    path.write_text(json.dumps(suite))  # JSON is YAML
    return path


def _lm_eval(model: str, base_url: str, tasks: list[Any], tm: Any, **kw: Any) -> dict[str, Any]:
    """lm-eval's own run: its own API client, its own defaults for everything not given."""
    import lm_eval

    args = {"model": "smollm2", "base_url": base_url, "num_concurrent": 4, "max_retries": 1, "tokenizer_backend": None}
    res = lm_eval.simple_evaluate(model=model, model_args=args, tasks=tasks, task_manager=tm, log_samples=True, **kw)
    assert res is not None
    return res


def test_fewshot_chat_gsm8k_scores_what_lm_evals_chat_client_scores(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gsm8k, 3-shot, chat template, few-shot as multi-turn: the settings a team reports with."""
    from lm_eval.tasks import TaskManager

    for k, v in OFFLINE.items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(ROOT)
    files = {"train": str(ROOT / DATA), "test": str(ROOT / DATA)}
    opts = {"num_fewshot": 3, "apply_chat_template": True, "gen_kwargs": "max_gen_toks=64", "data_files": files}
    proc = run_cli("run", str(_suite(tmp_path, server, [{"name": "gsm8k", "framework": "lmeval", "limit": 8,
                                                          "options": opts}])),
                   "--output-dir", str(tmp_path / "runs"), "--no-progress", env=OFFLINE)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    run = artifact_from(proc.stdout)

    tm = TaskManager()
    cfg = dict(tm.task_index["gsm8k"].cfg)
    cfg.update(task="gsm8k_local", tag=[], dataset_path="json", dataset_name=None, dataset_kwargs={"data_files": files})
    own = _lm_eval("local-chat-completions", f"{server}/chat/completions", [cfg], tm, num_fewshot=3,
                   apply_chat_template=True, fewshot_as_multiturn=True, gen_kwargs="max_gen_toks=64", limit=8)  # fmt: skip

    theirs = {
        int(s["doc_id"]): s["resps"][0][0] for s in own["samples"]["gsm8k_local"] if s["filter"] == "strict-match"
    }
    ours = {r.index: r.output.text.prediction[0] for r in read_records(run) if r.output and r.output.text}
    assert len(ours) == 8 and ours == theirs  # same prompts, few-shot draws and settings: same answers
    rows = {s.metric: s for s in read_manifest(run).scores if s.benchmark == "lmeval:gsm8k"}
    block = own["results"]["gsm8k_local"]
    for filt in ("strict-match", "flexible-extract"):
        assert rows[f"exact_match/{filt}"].value == pytest.approx(100 * block[f"exact_match,{filt}"], abs=1e-4)
        assert rows[f"exact_match/{filt}"].stderr == pytest.approx(100 * block[f"exact_match_stderr,{filt}"], abs=1e-4)

    # `omnieval export --format lm-eval`: lm-eval's own file layout, read back with lm-eval's own helpers, holds the
    # block lm-eval itself computed and its per-sample answers
    from lm_eval.utils import get_file_task_name, get_results_filenames, get_sample_results_filenames

    proc = run_cli("export", str(run), "--format", "lm-eval", "--out", str(tmp_path / "lm"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    files = [str(p) for p in (tmp_path / "lm").rglob("*") if p.is_file()]
    (results_file,) = get_results_filenames(files)
    exported = json.loads(Path(results_file).read_text())
    assert exported["results"]["gsm8k_local"] == json.loads(json.dumps(block))
    assert exported["n-samples"]["gsm8k_local"] == own["n-samples"]["gsm8k_local"]
    (samples_file,) = [f for f in get_sample_results_filenames(files) if get_file_task_name(Path(f).name) == "gsm8k_local"]
    lines = [json.loads(x) for x in Path(samples_file).read_text().splitlines()]
    assert {int(s["doc_id"]): s["resps"][0][0] for s in lines if s["filter"] == "strict-match"} == theirs


def test_own_task_group_rows_match_lm_eval_and_a_failing_task_loses_nothing_else(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A team's own task folder holding a group (raw prompts, lm-eval's default), beside an lm-eval task that cannot
    load its dataset offline and a built-in benchmark: the failure is that benchmark's error row, the rest is kept,
    and the group's rows equal lm-eval's ``local-completions`` run of the same folder."""
    from lm_eval.tasks import TaskManager

    for k, v in OFFLINE.items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(ROOT)
    benchmarks = [
        {"name": "asdiv_gsm8k", "framework": "lmeval", "limit": 8,
         "options": {"include_path": str(TASKS), "num_fewshot": 1}},
        {"name": "mmlu", "framework": "lmeval", "limit": 2},  # lm-eval's bundled group: its hub data is unreachable
        {"name": "mmlu_tiny", "limit": 3},
    ]  # fmt: skip
    proc = run_cli("run", str(_suite(tmp_path, server, benchmarks)), "--output-dir", str(tmp_path / "runs"),
                   "--no-progress", env=OFFLINE)  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-4000:]  # partial: one benchmark failed
    run = artifact_from(proc.stdout)
    m = read_manifest(run)
    assert m.status == "partial"
    err = [s for s in m.scores if s.error]
    assert [s.benchmark for s in err] == ["lmeval:mmlu"] and "fix:" in (err[0].error or "")
    assert "error: lmeval:mmlu on smollm2 failed in its lmeval actor" in proc.stderr
    assert "Traceback" not in proc.stderr
    builtin = [s for s in m.scores if s.benchmark == "mmlu_tiny"]
    assert builtin and builtin[0].num_samples == 3 and builtin[0].value is not None  # the good benchmark is kept
    assert len([r for r in read_records(run) if r.benchmark == "mmlu_tiny"]) == 3

    own = _lm_eval("local-completions", f"{server}/completions", ["asdiv_gsm8k"], TaskManager(include_path=str(TASKS)),
                   num_fewshot=1, limit=8)  # fmt: skip
    rows = {s.benchmark: s for s in m.scores if s.benchmark.startswith("lmeval:asdiv_gsm8k")}
    assert set(rows) == {"lmeval:asdiv_gsm8k", "lmeval:asdiv_gsm8k/asdiv_gsm8k_plain",
                         "lmeval:asdiv_gsm8k/asdiv_gsm8k_steps"}  # fmt: skip
    for name, block in own["results"].items():
        row = rows["lmeval:asdiv_gsm8k" if name == "asdiv_gsm8k" else f"lmeval:asdiv_gsm8k/{name}"]
        assert row.value == pytest.approx(100 * block["exact_match,flexible-extract"], abs=1e-4), name
        assert row.stderr == pytest.approx(100 * block["exact_match_stderr,flexible-extract"], abs=1e-4), name
    assert rows["lmeval:asdiv_gsm8k"].num_samples == 16
