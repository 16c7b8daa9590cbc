"""The multiple-choice and perplexity tasks of the log-likelihood parity tests, built twice and independently:

- for lm-eval's own run, as task YAMLs a user would write (``include:`` of the bundled YAML, the dataset swapped for
  the shipped local rows), loaded with ``--include_path``;
- for omnieval, as suite entries with ``options.data_files`` (the product's path).

Both read the same real rows (``omnieval/benchmarks/data/lmeval``), so their per-choice log-likelihoods must agree.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from testlib.runs import ROOT

DATA = ROOT / "omnieval/benchmarks/data/lmeval"
SUBJECTS = ("astronomy", "high_school_geography", "world_religions", "nutrition")
OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}


def _bundled(rel: str) -> Path:
    import lm_eval

    return Path(lm_eval.__file__).parent / "tasks" / rel


def _mmlu_files(s: str) -> dict[str, str]:
    return {"test": str(DATA / f"mmlu/{s}_test.jsonl"), "dev": str(DATA / f"mmlu/{s}_dev.jsonl")}


def write_baseline_tasks(folder: Path) -> dict[str, str]:
    """lm-eval task YAMLs for the baseline run; returns omnieval benchmark name -> baseline task name, for the leaf
    tasks and the group (``lmeval:mmlu/mmlu_astronomy`` -> ``mmlu_astronomy_base``)."""
    folder.mkdir(parents=True, exist_ok=True)
    names: dict[str, str] = {}

    def task(name: str, include: Path, files: dict[str, str], **extra: Any) -> None:
        cfg = {"include": str(include), "task": name, "tag": [], "dataset_path": "json", "dataset_name": None,
               "dataset_kwargs": {"data_files": files}, **extra}  # fmt: skip
        (folder / f"{name}.yaml").write_text(json.dumps(cfg))  # JSON is YAML

    for s in SUBJECTS:
        task(f"mmlu_{s}_base", _bundled(f"mmlu/default/mmlu_{s}.yaml"), _mmlu_files(s))
        names[f"lmeval:mmlu/mmlu_{s}"] = f"mmlu_{s}_base"
    group = {"group": "mmlu_base", "task": [f"mmlu_{s}_base" for s in SUBJECTS],
             "aggregate_metric_list": [{"metric": "acc", "weight_by_size": True}], "metadata": {"version": 2}}  # fmt: skip
    (folder / "mmlu_base.yaml").write_text(json.dumps(group))
    names["lmeval:mmlu"] = "mmlu_base"
    task("hellaswag_base", _bundled("hellaswag/hellaswag.yaml"), {"validation": str(DATA / "hellaswag_sample.jsonl")},
         training_split=None)  # fmt: skip
    names["lmeval:hellaswag"] = "hellaswag_base"
    task("openbookqa_base", _bundled("openbookqa/openbookqa.yaml"), {"test": str(DATA / "openbookqa_sample.jsonl")},
         training_split=None, validation_split=None)  # fmt: skip
    names["lmeval:openbookqa"] = "openbookqa_base"
    task("wikitext_base", _bundled("wikitext/wikitext.yaml"), {"test": str(DATA / "wikitext_format_hellaswag.jsonl")},
         training_split=None, validation_split=None)  # fmt: skip
    names["lmeval:wikitext"] = "wikitext_base"
    return names


def suite_benchmarks(which: list[str], limit: int) -> list[dict[str, Any]]:
    """omnieval suite entries of the same tasks, bundled names with ``options.data_files``."""
    out: dict[str, dict[str, Any]] = {
        "mmlu": {"data_files": {f"mmlu_{s}": _mmlu_files(s) for s in SUBJECTS}},
        "hellaswag": {"data_files": {"validation": str(DATA / "hellaswag_sample.jsonl")}},
        "openbookqa": {"data_files": {"test": str(DATA / "openbookqa_sample.jsonl")}},
        "wikitext": {"data_files": {"test": str(DATA / "wikitext_format_hellaswag.jsonl")}},
    }
    return [{"name": w, "framework": "lmeval", "limit": limit, "options": out[w]} for w in which]


def baseline_choices(output_dir: Path) -> dict[str, dict[int, list[float]]]:
    """lm-eval's logged samples: task -> doc_id -> each request's log-likelihood (choices, or the document)."""
    out: dict[str, dict[int, list[float]]] = {}
    for f in output_dir.rglob("samples_*.jsonl"):
        task = f.name.removeprefix("samples_").rsplit("_", 1)[0]
        for line in f.read_text().splitlines():
            s = json.loads(line)
            out.setdefault(task, {})[int(s["doc_id"])] = [float(r[0][0] if isinstance(r[0], list) else r[0])
                                                          for r in s["resps"]]  # fmt: skip
    return out


def baseline_results(output_dir: Path) -> dict[str, dict[str, Any]]:
    (f,) = list(output_dir.rglob("results_*.json"))
    return dict(json.loads(f.read_text())["results"])


def lm_eval_cmd(python: str, model: str, model_args: str, tasks_dir: Path, tasks: list[str], limit: int,
                out: Path) -> list[str]:  # fmt: skip
    return [python, "-m", "lm_eval", "--model", model, "--model_args", model_args, "--include_path", str(tasks_dir),
            "--tasks", ",".join(tasks), "--limit", str(limit), "--log_samples", "--output_path", str(out)]  # fmt: skip
