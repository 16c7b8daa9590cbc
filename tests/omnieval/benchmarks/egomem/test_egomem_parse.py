"""Table-driven parsing of the EgoMem judge's [fact_score, answer_score] JSON, malformed outputs included."""

from __future__ import annotations

import pytest

from omnieval.benchmarks.egomem import JudgeParseError, parse_session_scores

KEYS = ["1", "2"]

VALID = [
    ('思考……\n```json\n{"1": [1, 9], "2": [-1, 8]}\n```', {"1": (1, 9.0), "2": (-1, 8.0)}),
    ('{"1": [0, 7.5], "2": [1, 10]}', {"1": (0, 7.5), "2": (1, 10.0)}),
    ('草稿 ```json\n{"1": [1, 3]}``` 最终：\n```json\n{"1": [1, 9], "2": [0, 6]}\n```', {"1": (1, 9.0), "2": (0, 6.0)}),
    ('```\n{"第1轮": [1, 9], "第2轮": [-1, 8]}\n```', {"1": (1, 9.0), "2": (-1, 8.0)}),
    ('```json\n{"1": [1, 9], "2": [-1, 8],}\n```', {"1": (1, 9.0), "2": (-1, 8.0)}),  # trailing comma
    ("```json\n{'1': [1, 9], '2': [-1, 8]}\n```", {"1": (1, 9.0), "2": (-1, 8.0)}),  # single quotes
    ("```json\n{“1”：[1，9]，“2”：[-1，8]}\n```", {"1": (1, 9.0), "2": (-1, 8.0)}),  # full-width punctuation
    ('{"1": {"fact_score": 1, "answer_score": 9}, "2": ["-1", "8"]}', {"1": (1, 9.0), "2": (-1, 8.0)}),
    ('{"turn 1": [1, 9], "turn 2": [0, 2], "reason": "x {y}"}', {"1": (1, 9.0), "2": (0, 2.0)}),
    ('{"1": [1, 9], "2": [0, 8], "3": [1, 1]}', {"1": (1, 9.0), "2": (0, 8.0)}),  # extra turn ignored
]

MALFORMED = [
    ("", "empty"),
    ("   ", "empty"),
    ("我觉得都挺好，9分。", "no JSON"),
    ('```json\n{"1": [1, 9]}\n```', "missing"),  # a turn missing
    ('{"0": [1, 9], "1": [1, 9]}', "missing"),  # 0-based numbering
    ('{"1": [2, 9], "2": [1, 9]}', "fact_score"),  # fact not in {-1, 0, 1}
    ('{"1": [1, 11], "2": [1, 9]}', "answer_score"),  # over the 10-point scale
    ('{"1": [1, -1], "2": [1, 9]}', "answer_score"),  # -1 is only for fact_score
    ('{"1": [1], "2": [1, 9]}', "fact_score, answer_score"),
    ('{"1": [true, 9], "2": [1, 9]}', "boolean"),
    ('{"1": ["high", 9], "2": [1, 9]}', "not a number"),
    ('```json\n{"1": [1, 9], "2": \n```', "no JSON"),  # truncated
    ("[[1, 9], [0, 8]]", "no JSON"),
]


@pytest.mark.parametrize(("text", "want"), VALID)
def test_valid(text: str, want: dict[str, tuple[int, float]]) -> None:
    assert parse_session_scores(text, KEYS) == want


@pytest.mark.parametrize(("text", "reason"), MALFORMED)
def test_malformed(text: str, reason: str) -> None:
    with pytest.raises(JudgeParseError, match=reason):
        parse_session_scores(text, KEYS)


def test_non_string_output() -> None:
    with pytest.raises(JudgeParseError):
        parse_session_scores(None, KEYS)
