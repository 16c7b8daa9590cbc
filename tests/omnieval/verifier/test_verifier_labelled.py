"""The shipped labelled set is well formed and balanced; the confusion counts treat judge failures as wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnieval.verifier import LABELLED_PATH, confusion, load_labelled
from omnieval.verifier._prompt import Triple, build_prompt


def test_labelled_set_is_balanced_and_complete() -> None:
    items = load_labelled()
    assert 50 <= len(items) <= 80
    assert len({it["id"] for it in items}) == len(items)
    pos = sum(it["label"] for it in items)
    assert abs(pos - (len(items) - pos)) <= 2
    for it in items:
        assert it["question"].strip() and it["reference"].strip() and it["note"].strip()
        assert isinstance(it["prediction"], str)
        assert build_prompt(Triple(it["question"], it["reference"], it["prediction"]))
    # Both benchmarks and both prompt styles are represented, and some items disagree with exact match on purpose.
    assert {it["benchmark"] for it in items} == {"asdiv_tiny", "mmlu_tiny"}
    assert {it["prompt"] for it in items} == {"native", "uniform"}
    assert any((it["exact_match"] == 1.0) != (it["label"] == 1) for it in items)
    assert (LABELLED_PATH.parent / "README.md").is_file()


def test_load_labelled_rejects_bad_rows(tmp_path: Path) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps({"id": "x", "benchmark": "b", "question": "q", "reference": "r", "prediction": "p",
                             "label": 2, "note": ""}) + "\n")  # fmt: skip
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        load_labelled(p)


def test_confusion_counts_errors_as_wrong() -> None:
    c = confusion([1, 1, 0, 0, 1, 0], [1, 0, 0, 1, None, 0])
    assert (c["tp"], c["fn"], c["tn"], c["fp"], c["errors"]) == (1, 1, 2, 1, 1)
    assert c["accuracy"] == 50.0 and c["accuracy_on_rated"] == 60.0 and c["always_1_baseline"] == 50.0
    assert c["balanced_accuracy"] == pytest.approx(50.0 * (1 / 3 + 2 / 3))
