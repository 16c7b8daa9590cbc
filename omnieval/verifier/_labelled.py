"""Verifier accuracy on the labelled set shipped in ``data/labelled.jsonl`` (how it was built: ``data/README.md``).

Accuracy counts a judge failure (no rating after retries) as a wrong verdict, so a judge cannot look better by
refusing hard items; ``accuracy_on_rated`` is reported beside it for the rated items only.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omnieval.core import VerifierConfig
from omnieval.verifier._prompt import Triple

LABELLED_PATH = Path(__file__).parent / "data" / "labelled.jsonl"
FIELDS = ("id", "task_type", "modality", "benchmark", "source", "group", "question", "reference", "prediction",
          "label", "note", "split", "rule_verdict")  # fmt: skip
TASK_TYPES = ("mc", "math", "open_qa", "short_answer", "open_answer", "asr", "st")
MODALITIES = ("text", "image", "audio", "video")
SPLITS = ("train", "heldout")


def _row_problem(row: Any) -> str | None:
    """What is wrong with one labelled row, or None when it is valid."""
    if not isinstance(row, dict):
        return f"not a JSON object but {type(row).__name__}"
    missing = [f for f in FIELDS if f not in row]
    if missing:
        return f"missing field(s) {', '.join(missing)}"
    for key, allowed in (("task_type", TASK_TYPES), ("modality", MODALITIES), ("split", SPLITS)):
        if row[key] not in allowed:
            return f"{key} {row[key]!r} is not one of {', '.join(allowed)}"
    for key in ("label", "rule_verdict"):
        if row[key] not in (0, 1) or isinstance(row[key], bool):
            return f"{key} {row[key]!r} is not 0 or 1"
    if not str(row["source"]).startswith(("real:", "constructed:")):
        return f"source {row['source']!r} is not real:<model> or constructed:<transform>"
    for key in ("id", "group", "question", "reference", "note"):
        if not isinstance(row[key], str) or not row[key].strip():
            return f"{key} is empty or not a string"
    if not isinstance(row["prediction"], str):
        return "prediction is not a string"
    return None


def load_labelled(
    path: str | Path = LABELLED_PATH, limit: int | None = None, split: str | None = None
) -> list[dict[str, Any]]:
    """The labelled rows of ``path`` (``split`` = ``"train"`` or ``"heldout"`` keeps that split only; ``limit`` then
    keeps the first rows). A malformed row raises ValueError naming the file, the line and what is wrong."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"split {split!r} is not one of {', '.join(SPLITS)} (or None for all rows)")
    items = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{n}: not valid JSON ({e.msg})") from None
        problem = _row_problem(row)
        if problem:
            raise ValueError(f"{path}:{n}: bad labelled row {row.get('id', '?') if isinstance(row, dict) else ''}: "
                             f"{problem}")  # fmt: skip
        if split is None or row["split"] == split:
            items.append(row)
    return items[:limit] if limit is not None else items


def confusion(labels: Sequence[int], ratings: Sequence[int | None]) -> dict[str, Any]:
    """Counts with label as truth: tp = both 1, tn = both 0, fp = judged 1 on a wrong answer, fn the reverse."""
    c = {"tp": 0, "tn": 0, "fp": 0, "fn": 0, "errors": 0}
    for y, r in zip(labels, ratings, strict=True):
        if r is None:
            c["errors"] += 1
        elif r == y:
            c["tp" if y == 1 else "tn"] += 1
        else:
            c["fp" if r == 1 else "fn"] += 1
    n = len(labels)
    rated = n - c["errors"]
    correct = c["tp"] + c["tn"]
    pos, neg = sum(labels), n - sum(labels)
    return {
        "n": n, **c,
        "accuracy": round(100.0 * correct / n, 1) if n else None,
        "accuracy_on_rated": round(100.0 * correct / rated, 1) if rated else None,
        "balanced_accuracy": round(50.0 * (c["tp"] / pos + c["tn"] / neg), 1) if pos and neg else None,
        "always_1_baseline": round(100.0 * pos / n, 1) if n else None,
    }  # fmt: skip


def baselines(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Accuracy and balanced accuracy of two judges that need no model: ``always_correct`` (rates everything 1) and
    ``rule_verdict`` (the benchmark's own rule-based metric, stored per row), with ``items``' labels as truth."""
    labels = [it["label"] for it in items]
    out = {}
    for name, ratings in (("always_correct", [1] * len(items)), ("rule_verdict", [it["rule_verdict"] for it in items])):
        c = confusion(labels, ratings)
        out[name] = {k: c[k] for k in ("n", "accuracy", "balanced_accuracy", "tp", "tn", "fp", "fn")}
    return out


def evaluate_labelled(cfg: VerifierConfig, *, path: str | Path = LABELLED_PATH, limit: int | None = None,
                      pin: bool = True, split: str | None = "heldout") -> dict[str, Any]:  # fmt: skip
    """Judge every labelled item with ``cfg``'s model; confusion counts, accuracy, time and per-item verdicts."""
    from omnieval.verifier._verify import judge_triples

    items = load_labelled(path, limit, split)
    triples = [Triple(it["question"], it["reference"], it["prediction"]) for it in items]
    t0 = time.monotonic()
    verdicts = judge_triples(triples, cfg, pin=pin)
    seconds = time.monotonic() - t0
    result = confusion([it["label"] for it in items], [v.rating for v in verdicts])
    result.update(
        model=cfg.model.model_dump(mode="json"), seconds=round(seconds, 1), split=split,
        baselines=baselines(items),
        attempts=sum(v.attempts for v in verdicts),
        items=[{"id": it["id"], "label": it["label"], **v.as_meta()} for it, v in zip(items, verdicts, strict=True)],
    )  # fmt: skip
    return result
