"""lm-eval through the pool, checked against lm-eval itself: its defaults, its task index, its group results.

The real-server parity tests (lm-eval's own clients vs the pool on one llama-server) are in
``tests/e2e/test_lmeval_parity.py``.
"""

from __future__ import annotations

import inspect
import json
import time
from pathlib import Path

import pytest
from testlib.runs import ROOT, artifact_from, run_cli
from testlib.tiers import need

from omnieval import read_manifest, read_records
from omnieval.core import GenerationOptions, OmnievalUserError
from omnieval.metrics import make_metric
from serving._types import GenerationRequest, GenerationResult

need("lm_eval")

DATA = ROOT / "omnieval/benchmarks/data/lmeval/gsm8k_format_asdiv.jsonl"
TASKS = ROOT / "examples/lmeval_tasks"


def test_defaults_are_lm_evals_own() -> None:
    """Every setting the adapter passes equals lm-eval's own CLI default when the suite sets nothing."""
    from lm_eval import simple_evaluate
    from lm_eval.config.evaluate_config import EvaluatorConfig

    from omnieval.adapters._lmeval_tasks import evaluate_kwargs

    kw = evaluate_kwargs({}, limit=None)
    cli = EvaluatorConfig()
    sig = inspect.signature(simple_evaluate).parameters
    assert kw["apply_chat_template"] == cli.apply_chat_template is False
    assert kw["fewshot_as_multiturn"] is False  # the CLI turns it on only with a chat template
    assert kw["num_fewshot"] == cli.num_fewshot is None
    assert kw["bootstrap_iters"] == sig["bootstrap_iters"].default == 100000
    assert [kw["random_seed"], kw["numpy_random_seed"], kw["torch_random_seed"], kw["fewshot_random_seed"]] == list(
        cli.seed
    )
    assert kw["system_instruction"] is None and kw["gen_kwargs"] is None
    chat = evaluate_kwargs({"apply_chat_template": True}, limit=3)
    assert chat["fewshot_as_multiturn"] is True and chat["limit"] == 3  # lm-eval's rule: on with the chat template
    assert evaluate_kwargs({"seed": 7}, None)["fewshot_random_seed"] == 7


def test_options_are_checked_with_did_you_mean() -> None:
    from omnieval.adapters._lmeval_tasks import evaluate_kwargs, parse_options

    with pytest.raises(
        OmnievalUserError, match="options.num_fewshots: not an lm-eval option. Did you mean 'num_fewshot'"
    ):
        parse_options({"num_fewshots": 3})
    with pytest.raises(OmnievalUserError, match="needs apply_chat_template"):
        evaluate_kwargs({"fewshot_as_multiturn": True}, None)


def test_unknown_task_names_the_closest(tmp_path: Path) -> None:
    from omnieval.adapters._lmeval_tasks import resolve_task

    with pytest.raises(OmnievalUserError, match=r"no task, group or tag 'gsm8kk'\. Did you mean: gsm8k"):
        resolve_task("gsm8kk", {})
    with pytest.raises(OmnievalUserError, match="data_files.test: .* does not exist"):
        resolve_task("gsm8k", {"data_files": {"test": str(tmp_path / "missing.jsonl")}})
    with pytest.raises(OmnievalUserError, match=r"'mmlu' is a group; give subtask -> \{split -> path\}"):
        resolve_task("mmlu", {"data_files": {"test": str(DATA)}})
    with pytest.raises(OmnievalUserError, match=r"'gsm8k' is a task; give split -> path"):
        resolve_task("gsm8k", {"data_files": {"gsm8k": {"test": str(DATA)}}})
    with pytest.raises(OmnievalUserError, match="not a mix"):
        resolve_task("mmlu", {"data_files": {"test": str(DATA), "mmlu_anatomy": {"test": str(DATA)}}})
    with pytest.raises(OmnievalUserError, match=r"data_files.mmlu_anatomy.dev: .* does not exist"):
        resolve_task("mmlu", {"data_files": {"mmlu_anatomy": {"test": str(DATA), "dev": str(tmp_path / "no.jsonl")}}})
    with pytest.raises(OmnievalUserError, match="include_path: .* is not a folder"):
        resolve_task("x", {"include_path": str(tmp_path / "nope")})


def test_bundled_task_on_local_files_keeps_prompt_and_filters_and_indexes_its_folder_only() -> None:
    from lm_eval.tasks import TaskManager

    from omnieval.adapters._lmeval_tasks import resolve_task, task_manager, task_spec

    resolved = resolve_task("gsm8k", {"data_files": {"test": str(DATA)}})
    assert resolved.folders is not None and Path(resolved.folders[0]).name == "gsm8k"
    tm = task_manager(resolved)
    assert "gsm8k" in tm.all_tasks and len(tm.all_tasks) < 100  # not lm-eval's whole tree of ~15,000 names
    cfg = task_spec(resolved, tm, {"data_files": {"test": str(DATA)}})
    bundled = TaskManager(include_path=resolved.folders, include_defaults=False).task_index["gsm8k"].cfg
    assert isinstance(cfg, dict) and cfg["dataset_path"] == "json"
    assert cfg["dataset_kwargs"] == {"data_files": {"test": str(DATA)}} and cfg["task"] == "gsm8k_local"
    assert cfg["doc_to_text"] == bundled["doc_to_text"] and cfg["filter_list"] == bundled["filter_list"]
    assert cfg["fewshot_split"] is None  # no train file shipped: no silent hub download for few-shot examples


def test_requests_are_sent_as_lm_evals_own_clients_send_them() -> None:
    from omnieval.adapters._lmeval import ChatPrompt, request_for

    gen = GenerationOptions(max_tokens=256, seed=0)
    kw = {"until": ["Q:", "a", "b", "c", "d"], "do_sample": False, "temperature": 0.0}
    raw = request_for(0, "Question: 1+1?\nAnswer:", kw, gen)  # local-completions: the prompt as text
    assert raw.prompt == "Question: 1+1?\nAnswer:" and raw.messages == []
    assert raw.options.stop == ["Q:", "a", "b", "c", "d"] and raw.options.max_tokens == 256
    msgs = [{"role": "user", "content": "1+1?"}]
    chat = request_for(1, ChatPrompt(json.dumps(msgs)), {**kw, "max_gen_toks": 32}, gen)  # local-chat-completions
    assert chat.prompt is None and chat.messages == msgs
    assert chat.options.stop == ["Q:", "a", "b", "c"] and chat.options.max_tokens == 32  # lm-eval sends stop[:4]


class CachingBridge:
    """Stands in for ``PoolBridge``: questions about balls or oranges are answered "from the response cache", as the
    bridge marks such a hit; the others as if inferred (3 tokens each)."""

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult | BaseException]:
        return [
            GenerationResult(request_id=r.request_id, text="#### 9", completion_tokens=3, replica_id="f/0",
                             from_cache=any(w in (r.prompt or "") for w in ("balls", "oranges")))
            for r in requests
        ]  # fmt: skip


def test_cached_answers_count_as_cache_hits_not_inference(monkeypatch: pytest.MonkeyPatch) -> None:
    """A framework task answered from the response cache said it served those requests (tok/s, req/s) now."""
    from omnieval.adapters._lmeval import LMEvalAdapter
    from pool import ChunkResult

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    res = LMEvalAdapter().run(task="gsm8k", options={"num_fewshot": 0, "data_files": {"test": str(DATA)}}, model="m",
                              bridge=CachingBridge(), limit=4, generation=GenerationOptions(max_tokens=8))  # fmt: skip
    assert [bool(r.meta.get("cache_hit")) for r in res.records] == [False, True, True, False]  # balls, oranges
    assert all(r.meta.get("raw_prompt") for r in res.records)  # no chat template: lm-eval's default
    counts = ChunkResult.of(res.records)
    assert (len(counts), counts.cache_hits, counts.output_tokens) == (4, 2, 6)


class AnswerBridge:
    """Answers every question from the data file correctly when its number is even, wrongly otherwise: a planted,
    per-sample pattern that the group's rows must aggregate exactly as lm-eval does."""

    def __init__(self) -> None:
        self.answers = {}
        for line in DATA.read_text().splitlines():
            row = json.loads(line)
            self.answers[row["question"]] = row["answer"].split("####")[-1].strip()

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult | BaseException]:
        out: list[GenerationResult | BaseException] = []
        for r in requests:
            q = (r.prompt or "").rsplit("Question: ", 1)[-1].split("\n")[0]
            a = self.answers[q]
            text = f" {a}" if int(float(a)) % 2 == 0 else " 12345"
            out.append(GenerationResult(request_id=r.request_id, text=text, completion_tokens=2, replica_id="f/0"))
        return out


def test_own_task_data_files_are_checked_before_deploy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The group's tasks read a file relative to the working directory, as lm-eval resolves it: from elsewhere that
    is a pre-deploy error naming the task, its YAML and the file."""
    from omnieval.adapters._lmeval_tasks import resolve_task

    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        OmnievalUserError,
        match=r"task 'asdiv_gsm8k_plain' \(.*asdiv_gsm8k_plain.yaml\) reads "
        r"omnieval/benchmarks/data/lmeval/gsm8k_format_asdiv.jsonl, which does not exist",
    ):
        resolve_task("asdiv_gsm8k", {"include_path": str(TASKS)})
    monkeypatch.chdir(ROOT)
    assert resolve_task("asdiv_gsm8k", {"include_path": str(TASKS)}).kind == "group"


def test_group_rows_are_lm_evals_own_results_for_every_subtask_and_the_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """An own task folder (include_path) holding a group of two tasks: every entry lm-eval reports becomes a score
    row with lm-eval's value and standard error, the group size-weighted as lm-eval weights it."""
    from omnieval.adapters._lmeval import LMEvalAdapter

    monkeypatch.chdir(ROOT)  # the tasks' data_files are relative to the repository root

    res = LMEvalAdapter().run(task="asdiv_gsm8k", options={"include_path": str(TASKS), "num_fewshot": 1}, model="m",
                              bridge=AnswerBridge(), limit=12, generation=GenerationOptions())  # fmt: skip
    own = res.raw["results"]
    assert set(own) == {"asdiv_gsm8k", "asdiv_gsm8k_plain", "asdiv_gsm8k_steps"}
    rows = {s.benchmark: s for s in res.scores}
    assert set(rows) == {"lmeval:asdiv_gsm8k", "lmeval:asdiv_gsm8k/asdiv_gsm8k_plain",
                         "lmeval:asdiv_gsm8k/asdiv_gsm8k_steps"}  # fmt: skip
    for name, block in own.items():
        row = rows["lmeval:asdiv_gsm8k" if name == "asdiv_gsm8k" else f"lmeval:asdiv_gsm8k/{name}"]
        assert row.metric == "exact_match/flexible-extract"
        assert row.value == pytest.approx(100 * block["exact_match,flexible-extract"], abs=1e-4)
        assert row.stderr == pytest.approx(100 * block["exact_match_stderr,flexible-extract"], abs=1e-4)
    assert (
        rows["lmeval:asdiv_gsm8k"].num_samples == 24 and rows["lmeval:asdiv_gsm8k/asdiv_gsm8k_plain"].num_samples == 12
    )
    # the planted pattern: the subtask's value is its Records' mean, and the group the size-weighted mean
    plain = [r for r in res.records if r.benchmark == "lmeval:asdiv_gsm8k/asdiv_gsm8k_plain"]
    assert len(plain) == 12 and 0 < rows["lmeval:asdiv_gsm8k/asdiv_gsm8k_plain"].value < 100
    assert rows["lmeval:asdiv_gsm8k/asdiv_gsm8k_plain"].value == pytest.approx(
        100 * sum(r.metrics["exact_match/flexible-extract"] for r in plain) / 12
    )


def test_misspelt_task_exits_2_before_any_deploy(tmp_path: Path) -> None:
    suite = tmp_path / "s.yaml"
    suite.write_text(
        "name: t\nmodels:\n  - name: m\n    source: {kind: endpoint, base_url: 'http://127.0.0.1:9/v1'}\n"
        "    engine: openai\nbenchmarks:\n  - {name: gsm8kk, framework: lmeval}\n"
        "  - {name: asdiv_gsm8k_plainn, framework: lmeval, options: {include_path: " + str(TASKS) + "}}\n"
    )
    t0 = time.monotonic()
    proc = run_cli("run", str(suite), "--output-dir", str(tmp_path / "runs"), "--no-progress")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "benchmarks[0].name: lm-eval has no task, group or tag 'gsm8kk'. Did you mean: gsm8k" in proc.stderr
    assert "benchmarks[1].name" in proc.stderr and "Did you mean: asdiv_gsm8k_plain" in proc.stderr
    assert not (tmp_path / "runs").exists()  # nothing started, not even the run directory
    assert time.monotonic() - t0 < 60


@pytest.mark.slow
@pytest.mark.ray
def test_lmeval_gsm8k_and_builtin_in_one_suite(tmp_path: Path) -> None:
    proc = run_cli("run", "examples/lmeval_gsm8k.yaml", "--output-dir", str(tmp_path),
                   env={"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"})  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    # no terminal: progress comes as lines, the framework task's too, once lm-eval has built its requests
    assert "progress: smollm2-135m · lmeval:gsm8k 10/10 (100%)" in proc.stderr, proc.stderr[-2000:]
    assert "progress: smollm2-135m · asdiv_tiny 10/10 (100%)" in proc.stderr
    run = artifact_from(proc.stdout)
    m = read_manifest(run)
    lm = {s.metric: s for s in m.scores if s.benchmark == "lmeval:gsm8k"}
    assert {"exact_match/strict-match", "exact_match/flexible-extract"} <= set(lm)
    assert all(s.framework == "lmeval" and s.engine == "llamacpp" and s.num_samples == 10 for s in lm.values())
    records = [r for r in read_records(run) if r.benchmark == "lmeval:gsm8k"]
    assert len(records) == 10 and all(r.output and r.output.replica for r in records)
    assert any(r.benchmark == "asdiv_tiny" for r in read_records(run))
    # throughput counts the framework task's requests too (it printed 0.00 req/s for framework-only suites)
    assert m.throughput["inferred"] + m.throughput["cache_hits"] == len(read_records(run))
    assert m.throughput["inferred"] == 0 or m.throughput["requests_per_s"] > 0
    # the Record holds lm-eval's own per-sample verdicts; their mean is lm-eval's aggregate
    for metric, row in lm.items():
        assert row.value == pytest.approx(100 * sum(r.metrics[metric] for r in records) / len(records))
    # and the shared exact_match, configured like gsm8k's, agrees with lm-eval sample by sample
    em = make_metric("exact_match", ignore_case=True, ignore_punctuation=False,
                     regexes_to_ignore=[",", "\\$", "(?s).*#### ", "\\.$"])  # fmt: skip
    for r in records:
        filtered = r.meta["filtered"]["strict-match"]
        assert em.score(filtered, r.label, r) == r.metrics["exact_match/strict-match"], (filtered, r.label)


def test_templates_compiled_once_render_what_lm_eval_renders() -> None:
    """The compiled-once ``apply_template`` gives lm-eval's own text for every document and field."""
    import lm_eval.utils as u
    from jinja2 import Environment

    from omnieval.adapters._lmeval import compile_templates_once

    compile_templates_once()
    assert getattr(u.apply_template, "omnieval_compiled_once", False)
    fresh = Environment(loader=u.BaseLoader, undefined=u.StrictUndefined, keep_trailing_newline=True)
    fresh.filters["regex_replace"] = u.regex_replace
    docs = [json.loads(x) for x in DATA.read_text().splitlines()]
    for template in ("Question: {{question}}\nAnswer:", "{{answer}}", "{{answer.split('####')[-1].strip()}}"):
        for doc in docs:
            assert u.apply_template(template, doc) == fresh.from_string(template).render(**doc)
    compile_templates_once()  # idempotent


def test_a_task_file_and_include_path_are_relative_to_the_suite_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """``name: lmeval_tasks/x.yaml`` and ``options.include_path`` resolve against the suite file's folder (stored
    absolute, so the artifact re-runs from anywhere); the task file runs as lm-eval runs a YAML path."""
    from omnieval._suite import load_suite
    from omnieval.adapters._lmeval import LMEvalAdapter

    suite = load_suite(ROOT / "examples/lmeval_own_tasks.yaml")
    assert suite.benchmarks[0].options["include_path"] == str(TASKS)
    cfg = suite.benchmarks[0].model_validate(
        {"name": "lmeval_tasks/asdiv_gsm8k_plain.yaml", "framework": "lmeval"},
        context={"base_dir": str(ROOT / "examples")},
    )
    assert cfg.name == str(TASKS / "asdiv_gsm8k_plain.yaml") and cfg.key == "lmeval:asdiv_gsm8k_plain"
    monkeypatch.chdir(ROOT)
    res = LMEvalAdapter().run(task=cfg.name, options={"num_fewshot": 0}, model="m", bridge=AnswerBridge(), limit=6,
                              generation=GenerationOptions())  # fmt: skip
    assert {s.benchmark for s in res.scores} == {"lmeval:asdiv_gsm8k_plain"} and len(res.records) == 6
    assert res.scores[0].value == pytest.approx(
        100 * res.raw["results"]["asdiv_gsm8k_plain"]["exact_match,flexible-extract"]
    )


def test_a_bundled_group_on_local_files_keeps_the_named_subtasks_and_its_aggregation() -> None:
    """``data_files`` per subtask: lm-eval builds the group over exactly those subtasks, each on its local rows, and
    aggregates them as the bundled group does (mmlu: size-weighted acc); an unknown subtask gets a did-you-mean."""
    from omnieval.adapters._lmeval_tasks import resolve_task, task_manager, task_spec

    lmeval = ROOT / "omnieval/benchmarks/data/lmeval/mmlu"
    files = {f"mmlu_{s}": {"test": str(lmeval / f"{s}_test.jsonl"), "dev": str(lmeval / f"{s}_dev.jsonl")}
             for s in ("astronomy", "nutrition")}  # fmt: skip
    opts = {"data_files": files}
    resolved = resolve_task("mmlu", opts)
    tm = task_manager(resolved, opts)
    name = task_spec(resolved, tm, opts)
    assert name == "mmlu_local"
    loaded = tm.load([name])
    assert sorted(loaded["tasks"]) == ["mmlu_astronomy", "mmlu_nutrition"]
    group = loaded["groups"]["mmlu_local"]
    assert [a.metric for a in group.aggregate_metric_list] == ["acc"]
    assert group.aggregate_metric_list[0].weight_by_size
    task = loaded["tasks"]["mmlu_astronomy"]
    assert len(task.test_docs()) == 30 and len(task.fewshot_docs()) == 5  # the local rows, not the hub's
    bad = {"data_files": {"mmlu_astronomyy": files["mmlu_astronomy"]}}
    with pytest.raises(OmnievalUserError, match="not a task of the group 'mmlu'. Did you mean: mmlu_astronomy"):
        task_manager(resolve_task("mmlu", bad), bad)
