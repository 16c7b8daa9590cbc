"""lm-eval through the pool: its bundled gsm8k task, offline on local files, scored by lm-eval itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testlib.runs import artifact_from, run_cli

from omnieval import read_manifest, read_records
from omnieval.core import GenerationOptions
from omnieval.metrics import make_metric
from serving._types import GenerationRequest, GenerationResult

ROOT = Path(__file__).resolve().parents[3]

pytest.importorskip("lm_eval", reason="needs the lmeval extra: pip install 'omnieval[lmeval]'")


def test_task_config_overrides_dataset_keeps_prompt_and_filters(tmp_path: Path) -> None:
    from lm_eval.tasks import TaskManager

    from omnieval.adapters._lmeval import task_config

    cfg = task_config("gsm8k", {"data_files": {"test": str(tmp_path / "t.jsonl")}})
    bundled = TaskManager().task_index["gsm8k"].cfg
    assert cfg["dataset_path"] == "json" and cfg["dataset_kwargs"] == {
        "data_files": {"test": str(tmp_path / "t.jsonl")}
    }
    assert cfg["doc_to_text"] == bundled["doc_to_text"] and cfg["filter_list"] == bundled["filter_list"]
    assert cfg["fewshot_split"] is None  # no train file shipped: no silent hub download for few-shot examples
    assert task_config("gsm8k", {}) == "gsm8k"


def test_unknown_task_is_a_user_error() -> None:
    from omnieval.adapters._lmeval import task_config
    from omnieval.core import OmnievalUserError

    with pytest.raises(OmnievalUserError, match="no task 'gsm8kk'"):
        task_config("gsm8kk", {"data_files": {"test": "x"}})


class CachingBridge:
    """Stands in for ``PoolBridge``: questions about balls or oranges are answered "from the response cache", as the
    bridge marks such a hit; the others as if inferred (3 tokens each)."""

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult | BaseException]:
        return [
            GenerationResult(request_id=r.request_id, text="#### 9", completion_tokens=3, replica_id="f/0",
                             from_cache=any(w in json.dumps(r.messages) for w in ("balls", "oranges")))
            for r in requests
        ]  # fmt: skip


def test_cached_answers_count_as_cache_hits_not_inference(monkeypatch: pytest.MonkeyPatch) -> None:
    """A framework task answered from the response cache said it served those requests (tok/s, req/s) now."""
    from omnieval.adapters._lmeval import LMEvalAdapter
    from pool import ChunkResult

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    data = ROOT / "omnieval/benchmarks/data/lmeval/gsm8k_format_asdiv.jsonl"
    res = LMEvalAdapter().run(task="gsm8k", options={"num_fewshot": 0, "data_files": {"test": str(data)}}, model="m",
                              bridge=CachingBridge(), limit=4, generation=GenerationOptions(max_tokens=8))  # fmt: skip
    assert [bool(r.meta.get("cache_hit")) for r in res.records] == [False, True, True, False]  # balls, oranges
    counts = ChunkResult.of(res.records)
    assert (len(counts), counts.cache_hits, counts.output_tokens) == (4, 2, 6)


@pytest.mark.slow
@pytest.mark.ray
def test_lmeval_gsm8k_and_builtin_in_one_suite(tmp_path: Path) -> None:
    proc = run_cli("run", "examples/lmeval_gsm8k.yaml", "--output-dir", str(tmp_path), "--no-progress",
                   env={"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"})  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
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
