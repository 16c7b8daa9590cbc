"""Rating parsing: the last valid ``Rating: 0|1`` wins; anything else is None (retried, then a judge error)."""

from __future__ import annotations

import pytest

from omnieval.verifier import parse_rating

CASES = [
    ("Explanation: The reference is 9 and the model says 9.\nRating: 1", 1),
    ("Explanation: wrong option.\nRating: 0", 0),
    ("Rating: 1.", 1),
    ("**Rating:** 0", 0),
    ("**Rating: 1**", 1),
    ("rating: 1", 1),
    ("RATING:0", 0),
    ("Rating: [1]", 1),
    ("Rating: <0>", 0),
    ("Rating = 1", 1),
    ("Rating：1", 1),  # full-width colon
    ("Rating: 1 - the answer matches", 1),
    ("Explanation: ...\n\nRating: 1\n\n", 1),
    ("Rating: 0\nOn reflection the answer is right.\nRating: 1", 1),  # multiple conflicting -> last
    ("Rating: 1\nWait, 7 is not 9.\nRating: 0", 0),
    ("", None),
    (None, None),
    ("The answer looks correct to me.", None),  # missing
    ("Rating: 0.5", None),
    ("Rating: 10", None),
    ("Rating: 4/5", None),
    ("Rating: 0 or 1", None),  # template echo
    ("Rating: 0|1", None),
    ("Rating: <digit>\nwhere <digit> is 1 if the model's final answer is correct", None),
    ("Rating: 1 if correct, 0 if incorrect", None),
    ("Rating: 1\nRating: 0 or 1", 1),  # echo after a real verdict does not override it
    ("My rating of this answer is high", None),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_parse_rating(text: str | None, expected: int | None) -> None:
    assert parse_rating(text).rating == expected


def test_rationale_strips_label_and_precedes_the_last_rating() -> None:
    v = parse_rating("Explanation: The reference answer is B, the model chose B.\nRating: 1")
    assert v.rationale == "The reference answer is B, the model chose B."
    v = parse_rating("**Explanation:** close but not equal.\n**Rating:** 0")
    assert v.rationale == "close but not equal."


def test_unparsed_reply_is_kept_whole_as_rationale() -> None:
    assert parse_rating("  I cannot decide.  ").rationale == "I cannot decide."
