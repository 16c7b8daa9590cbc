"""``omnieval bench verifier``: judges on the labelled set's heldout split, beside the baselines that need no model.

Every judge runs through the product's verifier path (``evaluate_labelled``: Ray workers, llama-server, grammar,
token log-probabilities), on the split that neither training nor threshold calibration read. Reported per judge:
accuracy, balanced accuracy (the mean of the true-positive and true-negative rates: the set is balanced, but a
judge that says "correct" to everything must not look good), agreement with the benchmark's own rule-based metric
(``rule_verdict``, exact match for MC/math/QA), the mean P(correct) on correct vs wrong answers, judge errors and
seconds; then always-correct and the rule-based metric; then the balanced accuracy per task type.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from omnieval.core import EMBEDDED_MODEL_SOURCE, VerifierConfig

JUDGES: dict[str, dict[str, Any]] = {
    "trained": {},
    "untrained": {"lora": "none", "prompt": "rubric", "max_tokens": 160},
}
"""Named judges: ``trained`` is the default offline verifier (SmolLM2 + omnieval's LoRA adapter, verdict prompt);
``untrained`` is the same base model prompted with the rubric (what prompting alone gets)."""


def judge_config(name: str, *, parallel: int = 4) -> VerifierConfig:
    if name not in JUDGES:
        raise ValueError(f"unknown judge {name!r}; choose from {sorted(JUDGES)}")
    return VerifierConfig(model=EMBEDDED_MODEL_SOURCE, parallel=parallel, max_retries=1, **JUDGES[name])


def _rates(items: list[dict[str, Any]], verdicts: list[dict[str, Any]]) -> dict[str, Any]:
    from omnieval.verifier import confusion

    labels = [it["label"] for it in items]
    ratings = [v["rating"] for v in verdicts]
    c = confusion(labels, ratings)
    rated = [(it, v) for it, v in zip(items, verdicts, strict=True) if v["rating"] is not None]
    agree = sum(1 for it, v in rated if v["rating"] == it["rule_verdict"])
    probs: dict[int, list[float]] = defaultdict(list)
    for it, v in zip(items, verdicts, strict=True):
        if v.get("probability") is not None:
            probs[it["label"]].append(v["probability"])
    return {
        "n": c["n"], "accuracy": c["accuracy"], "balanced_accuracy": c["balanced_accuracy"],
        "agreement_with_rule": round(100.0 * agree / len(items), 1) if items else None,
        "mean_p_correct_on_correct": round(sum(probs[1]) / len(probs[1]), 3) if probs[1] else None,
        "mean_p_correct_on_wrong": round(sum(probs[0]) / len(probs[0]), 3) if probs[0] else None,
        "errors": c["errors"], "tp": c["tp"], "tn": c["tn"], "fp": c["fp"], "fn": c["fn"],
    }  # fmt: skip


def bench_verifier_accuracy(
    judges: list[str], *, split: str = "heldout", limit: int | None = None, parallel: int = 4,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:  # fmt: skip
    from omnieval.verifier import confusion, evaluate_labelled, load_labelled

    items = load_labelled(split=split, limit=limit)
    by_task: dict[str, list[int]] = defaultdict(list)
    for i, it in enumerate(items):
        by_task[it["task_type"]].append(i)

    def per_task(ratings: list[int | None]) -> dict[str, Any]:
        return {t: confusion([items[i]["label"] for i in idx], [ratings[i] for i in idx])["balanced_accuracy"]
                for t, idx in sorted(by_task.items())}  # fmt: skip

    out: dict[str, Any] = {"split": split, "n": len(items), "judges": {}, "per_task": {}}
    for name in judges:
        cfg = judge_config(name, parallel=parallel)
        res = evaluate_labelled(cfg, split=split, limit=limit, pin=False)
        verdicts = res["items"]
        row = {**_rates(items, verdicts), "seconds": res["seconds"], "attempts": res["attempts"]}
        out["judges"][name] = {**row, "config": cfg.model_dump(mode="json"), "items": verdicts}
        out["per_task"][name] = per_task([v["rating"] for v in verdicts])
        log(f"{name}: balanced accuracy {row['balanced_accuracy']} % in {row['seconds']} s")
    rules: dict[str, list[int | None]] = {"always_correct": [1] * len(items),
                                          "rule_verdict": [it["rule_verdict"] for it in items]}  # fmt: skip
    for name, ratings in rules.items():  # the baselines that need no model
        out["judges"][name] = {**_rates(items, [{"rating": r} for r in ratings]), "seconds": 0.0, "attempts": 0}
    out["per_task"]["rule_verdict"] = per_task(rules["rule_verdict"])
    return out


def table(res: dict[str, Any]) -> str:
    head = ("| judge | accuracy % | balanced accuracy % | agreement with rule % | mean P(correct): correct / wrong "
            "| judge errors | seconds |")  # fmt: skip
    lines = [f"{res['split']} split, {res['n']} items", "", head, "|---|---|---|---|---|---|---|"]
    for name, r in res["judges"].items():
        p1, p0 = r["mean_p_correct_on_correct"], r["mean_p_correct_on_wrong"]
        probs = f"{p1} / {p0}" if p1 is not None else "-"
        lines.append(f"| {name} | {r['accuracy']} | {r['balanced_accuracy']} | {r['agreement_with_rule']} | {probs} "
                     f"| {r['errors']} | {r['seconds']} |")  # fmt: skip
    tasks = sorted({t for per in res["per_task"].values() for t in per})
    lines += ["", "balanced accuracy % per task type", "", "| judge | " + " | ".join(tasks) + " |",
              "|---|" + "---|" * len(tasks)]  # fmt: skip
    for name, per in res["per_task"].items():
        lines.append(f"| {name} | " + " | ".join(str(per.get(t, "-")) for t in tasks) + " |")
    return "\n".join(lines)
