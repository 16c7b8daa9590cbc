"""Table-driven parsing of the 0-5 rubric level, malformed outputs included."""

from __future__ import annotations

import pytest

from omnieval.benchmarks.omniassist import JudgeParseError, parse_rubric_score

VALID = [
    ('Reasoning...\n{"score": 4}', 4),
    ('```json\n{"score": 0}\n```', 0),
    ('{"score": 2} then on reflection\n{"score": 3}', 3),  # last object wins
    ('{"Score": "5"}', 5),
    ('{"final_score": 1, "reason": "loosely related {topic}"}', 1),
    ('{"score": 4.0}', 4),
    ("Accuracy score: 5. Redundancy score: 2. Final score: 2", 2),
    ("**Score:** 3", 3),
    ("score = 5", 5),
    ("I would rate this 4/5.", 4),
    ("  3  ", 3),
    ("最终 score：2", 2),  # full-width colon
]

MALFORMED = [
    ("", "empty"),
    ("The answer is good.", "no rubric score"),
    ('{"score": 7}', "0-5"),
    ('{"score": -1}', "0-5"),
    ('{"score": 4.5}', "0-5"),
    ('{"score": "high"}', "not a number"),
    ('{"score": true}', "boolean"),
    ("Score: 6", "0-5"),
    ("Score: 3.5", "0-5"),
    ('{"score": <integer from 0 to 5>}', "no rubric score"),  # the template echoed back
]


@pytest.mark.parametrize(("text", "want"), VALID)
def test_valid(text: str, want: int) -> None:
    assert parse_rubric_score(text) == want


@pytest.mark.parametrize(("text", "reason"), MALFORMED)
def test_malformed(text: str, reason: str) -> None:
    with pytest.raises(JudgeParseError, match=reason):
        parse_rubric_score(text)


def test_non_string() -> None:
    with pytest.raises(JudgeParseError):
        parse_rubric_score(None)
