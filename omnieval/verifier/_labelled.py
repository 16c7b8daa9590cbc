"""Verifier accuracy on the labelled set shipped in ``data/labelled.jsonl`` (how it was built: ``data/README.md``).

Accuracy counts a judge failure (no rating after retries) as a wrong verdict, so a judge cannot look better by
refusing hard items; ``accuracy_on_rated`` is reported beside it for the rated items only.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from omnieval.core import VerifierConfig
from omnieval.verifier._prompt import Triple

LABELLED_PATH = Path(__file__).parent / "data" / "labelled.jsonl"
FIELDS = ("id", "benchmark", "question", "reference", "prediction", "label", "note")


def load_labelled(path: str | Path = LABELLED_PATH, limit: int | None = None) -> list[dict[str, Any]]:
    items = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        missing = [f for f in FIELDS if f not in row]
        if missing or row["label"] not in (0, 1):
            raise ValueError(f"{path}:{n}: bad labelled row (missing {missing} or label not 0/1)")
        items.append(row)
    return items[:limit] if limit is not None else items


def confusion(labels: list[int], ratings: list[int | None]) -> dict[str, Any]:
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


def evaluate_labelled(cfg: VerifierConfig, *, path: str | Path = LABELLED_PATH, limit: int | None = None,
                      pin: bool = True) -> dict[str, Any]:  # fmt: skip
    """Judge every labelled item with ``cfg``'s model; confusion counts, accuracy, time and per-item verdicts."""
    from omnieval.verifier._verify import judge_triples

    items = load_labelled(path, limit)
    triples = [Triple(it["question"], it["reference"], it["prediction"]) for it in items]
    t0 = time.monotonic()
    verdicts = judge_triples(triples, cfg, pin=pin)
    seconds = time.monotonic() - t0
    result = confusion([it["label"] for it in items], [v.rating for v in verdicts])
    result.update(
        model=cfg.model.model_dump(mode="json"), seconds=round(seconds, 1),
        attempts=sum(v.attempts for v in verdicts),
        items=[{"id": it["id"], "label": it["label"], **v.as_meta()} for it, v in zip(items, verdicts, strict=True)],
    )  # fmt: skip
    return result
