"""Exact match: normalisation steps, reference shapes, and the mean-×100 aggregate."""

from __future__ import annotations

import math
from typing import Any

import pytest

from omnieval.metrics import make_metric


@pytest.mark.parametrize(
    ("prediction", "reference", "expected"),
    [
        ("Paris", "Paris", 1.0),
        ("  paris. ", "Paris", 1.0),  # case, punctuation, outer whitespace
        ("New   York!", "new york", 1.0),  # inner whitespace collapsed
        ("Hello - world", "hello world", 1.0),  # punctuation removal must not leave a double space
        ("London", "Paris", 0.0),
        ("Paris France", "Paris", 0.0),  # no substring credit
        ("rome", ["Paris", "Rome"], 1.0),  # any acceptable answer
        ("Madrid", ["Paris", "Rome"], 0.0),
        ("15", 15, 1.0),  # numbers compare as text
        ("15", 15.0, 1.0),  # an integral float loses its ".0"
        ("15", [14, 15], 1.0),
        ("3.5", "35", 0.0),  # a decimal point between digits survives punctuation removal
        ("-5", "5", 0.0),  # so does a leading minus
        ("1,000", "1000", 1.0),  # thousands commas are dropped
        ("1,2", "12", 0.0),
        (None, "Paris", 0.0),  # extraction found nothing
        ("Paris", None, 0.0),
        ("Paris", [], 0.0),
        ("", "", 1.0),
    ],
)
def test_default_normalisation(prediction: str | None, reference: Any, expected: float) -> None:
    assert make_metric("exact_match").score(prediction, reference) == expected


def test_settings_switch_steps_off() -> None:
    assert make_metric("exact_match", ignore_case=False).score("paris", "Paris") == 0.0
    assert make_metric("exact_match", ignore_punctuation=False).score("Paris.", "Paris") == 0.0
    assert make_metric("exact_match", strip=False).score(" Paris", "Paris") == 0.0
    assert make_metric("exact_match", strip=False).score("Paris", "Paris") == 1.0


def test_regexes_run_before_lowercasing() -> None:
    # Step 2 precedes step 3, so a case-sensitive pattern sees the original case.
    assert make_metric("exact_match", regexes_to_ignore=["^the "]).score("The Beatles", "Beatles") == 0.0
    assert make_metric("exact_match", regexes_to_ignore=["(?i)^the "]).score("The Beatles", "Beatles") == 1.0
    m = make_metric("exact_match", regexes_to_ignore=[r"\$", "dollars"])
    assert m.score("$15 dollars", "15") == 1.0
    assert m.spec()["settings"]["regexes_to_ignore"] == [r"\$", "dollars"]


def test_aggregate_is_mean_times_100() -> None:
    m = make_metric("exact_match")
    preds = ["a", "b", None, "d"]
    refs = ["a", "x", "c", ["d", "e"]]
    assert math.isnan(m.aggregate([], [], []))  # an empty benchmark has no score
    assert m.aggregate([None] * 4, preds, refs) == pytest.approx(50.0)  # type: ignore[list-item]
