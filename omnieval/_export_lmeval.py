"""A run as lm-eval writes its own: ``<out>/<model>/results_<date>.json`` and ``samples_<task>_<date>.jsonl``.

Why: teams already read lm-eval's output (its ``make_table``, leaderboards, their own scripts), so a run's scores
should arrive in that layout whichever framework produced them.

- lm-eval (and lmms-eval, its fork) tasks: the framework's own results block, kept whole in the run
  (``framework-*.json``), is written as it came: values, standard errors, groups, configs, versions, n-samples.
- Every other benchmark (built-in, suite-defined, judged, VLMEvalKit): one task per benchmark, each score row as
  ``"<metric>,none"`` on the metric's own scale (the row's value over its ``scale``: accuracy 0–1, BLEU 0–100) and
  its standard error as ``"<metric>_stderr,none"`` ("N/A" where there is none), as lm-eval reports.
- Samples: one line per Record (per filter for framework Records), with lm-eval's fields and hashes.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from omnieval._artifacts import RunManifest, ScoreRow, framework_result_path, read_manifest, read_records
from omnieval.core import Record

HARNESS = ("lmeval", "lmms")
"""Frameworks whose results block is lm-eval's own layout."""
_BLOCKS = ("results", "groups", "group_subtasks", "configs", "versions", "n-shot", "higher_is_better", "n-samples")


def _hash(s: str) -> str:
    return hashlib.sha256(s.encode("utf-8")).hexdigest()  # lm-eval's hash_string


def _sanitize_model(name: str) -> str:
    return re.sub(r"[\"<>:/|\\?*\[\]]+", "__", name)  # lm-eval's sanitize_model_name


def _file_task(name: str) -> str:
    """A task name fit for lm-eval's ``samples_<task>_<date>.jsonl`` (which it parses between the first and last
    ``_``; a ``/`` would make a folder)."""
    return name.replace("/", "__")


def export_lmeval(run_dir: Path, out: Path) -> list[Path]:
    """Write the run in lm-eval's layout under ``out``; returns the files written."""
    manifest = read_manifest(run_dir)
    records = read_records(run_dir)
    date_id = re.sub(r"(Z|[+-]\d\d:\d\d)$", "", manifest.created).replace(":", "-")  # lm-eval's naive isoformat
    written: list[Path] = []
    for model in sorted({s.model for s in manifest.scores}):
        rows = [s for s in manifest.scores if s.model == model and s.error is None]
        recs = [r for r in records if r.model == model]
        results, samples = _model_results(run_dir, manifest, model, rows, recs)
        folder = out / _sanitize_model(model)
        folder.mkdir(parents=True, exist_ok=True)
        results["task_hashes"] = {
            t: _hash("".join(s["doc_hash"] + s["prompt_hash"] + s["target_hash"] for s in lines))
            for t, lines in samples.items()
        }
        path = folder / f"results_{date_id}.json"
        path.write_text(json.dumps(results, indent=2, ensure_ascii=False, default=str))
        written.append(path)
        for task, lines in samples.items():
            p = folder / f"samples_{_file_task(task)}_{date_id}.jsonl"
            with open(p, "w", encoding="utf-8") as f:
                f.writelines(json.dumps(line, ensure_ascii=False, default=str) + "\n" for line in lines)
            written.append(p)
    return written


def _model_results(
    run_dir: Path, manifest: RunManifest, model: str, rows: list[ScoreRow], recs: list[Record]
) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    out: dict[str, Any] = {k: {} for k in _BLOCKS}
    samples: dict[str, list[dict[str, Any]]] = defaultdict(list)
    versions = {b.name: b.version for b in manifest.benchmarks}
    by_bench: dict[str, list[Record]] = defaultdict(list)
    for r in recs:
        by_bench[r.benchmark].append(r)
    engine = next((s.engine for s in rows if s.engine), "")
    # framework tasks in lm-eval's own layout: their results block as the framework wrote it
    harness_keys = sorted({s.benchmark.split("/", 1)[0] for s in rows if s.framework in HARNESS})
    for key in harness_keys:
        path = framework_result_path(run_dir, key, model)
        raw = json.loads(path.read_text()).get("raw", {}) if path.exists() else {}
        for name in _BLOCKS:
            out[name].update(raw.get(name, {}) or {})
        top = _top_task(raw)
        for bench, brecs in by_bench.items():
            if bench == key or bench.startswith(key + "/"):
                task = top if bench == key else bench.split("/", 1)[1]
                for r in sorted(brecs, key=lambda r: r.index):
                    samples[task].extend(_harness_samples(r))
    # every other benchmark: its score rows as one task
    for bench in sorted({s.benchmark for s in rows if s.framework not in HARNESS}):
        brows = [s for s in rows if s.benchmark == bench]
        block: dict[str, Any] = {"alias": bench}
        hib: dict[str, bool] = {}
        for s in brows:
            if s.value is None:
                continue
            block[f"{s.metric},none"] = round(s.value / s.scale, 10)  # the row's 4 decimals, not float noise
            block[f"{s.metric}_stderr,none"] = "N/A" if s.stderr is None else round(s.stderr / s.scale, 10)
            hib[s.metric] = _higher_is_better(s.metric)
        out["results"][bench] = block
        out["versions"][bench] = versions.get(bench.split("@", 1)[0], "")
        out["n-shot"][bench] = 0
        out["higher_is_better"][bench] = hib
        n = brows[0].num_samples
        out["n-samples"][bench] = {"original": n, "effective": n}
        out["configs"][bench] = {
            "task": bench, "output_type": "generate_until",
            "metric_list": [{"metric": m, "higher_is_better": h} for m, h in hib.items()],
            "metadata": {"version": out["versions"][bench], "framework": brows[0].framework,
                         "modality": brows[0].modality, "engine": brows[0].engine},
        }  # fmt: skip
        for r in sorted(by_bench.get(bench, []), key=lambda r: r.index):
            samples[bench].append(_sample(r, "none", dict(r.metrics)))
    if not out["groups"]:
        del out["groups"]
    out["config"] = {"model": "omnieval", "model_args": f"model={model},engine={engine}", "batch_size": None,
                     "device": None, "limit": None, "bootstrap_iters": None, "gen_kwargs": None}  # fmt: skip
    out["model_name"] = model
    out["model_name_sanitized"] = _sanitize_model(model)
    out["date"] = manifest.created
    out["omnieval"] = {"run_id": manifest.run_id, "suite": manifest.suite_name, "status": manifest.status,
                       "packages": manifest.packages}  # fmt: skip
    return out, samples


def _top_task(raw: dict[str, Any]) -> str:
    """The framework's name for the suite's task: the one result that is nobody's subtask."""
    subs = {c for kids in (raw.get("group_subtasks") or {}).values() for c in kids}
    tops = [t for t in raw.get("results", {}) if t not in subs]
    return tops[0] if tops else next(iter(raw.get("results", {})), "task")


def _higher_is_better(metric: str) -> bool:
    from omnieval.metrics import METRICS

    try:
        return bool(METRICS.get(metric).higher_is_better)
    except Exception:  # noqa: BLE001 - judged aggregates and verifier rows are not registered metrics
        return True


def _harness_samples(r: Record) -> list[dict[str, Any]]:
    """A framework Record's metrics are ``<metric>/<filter>``: one lm-eval sample line per filter."""
    by_filter: dict[str, dict[str, float]] = defaultdict(dict)
    for k, v in r.metrics.items():
        metric, _, filt = k.partition("/")
        by_filter[filt or "none"][metric] = v
    return [_sample(r, f, m) for f, m in sorted(by_filter.items())] or [_sample(r, "none", {})]


def _sample(r: Record, filt: str, metrics: dict[str, float]) -> dict[str, Any]:
    prompt = "\n\n".join(c.value for m in r.messages for c in m.content if c.type == "text")
    doc = {"sample_id": r.sample_id, "messages": [m.model_dump(mode="json") for m in r.messages], "options": r.options}
    target = str(r.label)
    filtered = (r.meta.get("filtered") or {}).get(filt, r.prediction_postprocessed)
    line: dict[str, Any] = {
        "doc_id": r.index,
        "doc": doc,
        "target": target,
        "arguments": {"gen_args_0": {"arg_0": prompt, "arg_1": r.generation_options.model_dump(mode="json")}},
        "resps": [[r.prediction]] if r.prediction is not None else [],
        "filtered_resps": [filtered] if r.prediction is not None else [],
        "filter": filt,
        "metrics": sorted(metrics),
        "doc_hash": _hash(json.dumps(doc, indent=2, ensure_ascii=False, default=str)),
        "prompt_hash": _hash(prompt),
        "target_hash": _hash(target),
        **metrics,
    }
    if r.error is not None:
        line["error"] = f"{r.error.kind}: {r.error.message}"
    return line
