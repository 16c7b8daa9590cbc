"""mc_letter: table-driven extraction, including the cases that must return None."""

from __future__ import annotations

import pytest

from omnieval.core import Message, Record
from omnieval.postprocess import get_postprocessor

mc_letter = get_postprocessor("mc_letter")


def _record(options: list[str]) -> Record:
    return Record(benchmark="mmlu", index=0, messages=[Message.text("user", "q?")], options=options)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # 1. whole answer
        ("B", "B"),
        ("(B)", "B"),
        ("B.", "B"),
        ("B)", "B"),
        ("[C]", "C"),
        ("**B**", "B"),
        ("  d \n", "D"),  # lowercase accepted only when it is the whole answer
        # 2. explicit phrase, last one wins
        ("Answer: B", "B"),
        ("The answer is B", "B"),
        ("The answer is (C).", "C"),
        ("**Answer:** D", "D"),
        ("Answer:\nA", "A"),
        ("The correct option is (b)", "B"),
        ("The answer to this question is C because ...", "C"),
        ("The answer is option D.", "D"),
        ("\\boxed{C}", "C"),
        ("A seems plausible, but the answer is D.", "D"),  # explicit beats the first bare letter
        ("So the answer is A. Wait, the answer is C.", "C"),
        ("C is the correct answer.", "C"),
        ("the answer is b.", "B"),
        # 3. leading letter with delimiter
        ("B. Paris is the capital", "B"),
        ("(A) 42", "A"),
        ("D) none of the above", "D"),
        ("C: it doubles\nbecause ...", "C"),
        # 5. bare letter; an article-like "A" loses to a real candidate
        ("A cat is drawn in picture B", "B"),
        ("I think it's D", "D"),
        ("Between B and C I pick B", "B"),  # the first bare letter
        ("A cat is cute", "A"),  # no better candidate: falls back to the article-like letter
        # None: nothing extractable
        ("", None),
        ("   ", None),
        ("I don't know", None),
        ("The answer is E", None),  # E is not among A–D
        ("Based on the evidence, it depends", None),
        ("the answer is a dog", None),  # lowercase "a" followed by a word is the article
        ("42", None),
    ],
)
def test_without_options(text: str, expected: str | None) -> None:
    assert mc_letter(text, None) == expected


OPTIONS = ["Paris", "Rome", "New York", "New York City", "London"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("It is Rome.", "B"),  # 4. exactly one option's text
        ("the answer: new york", "C"),  # case-insensitive; ":" followed by a word is no letter
        ("I'd say New York City", "D"),  # "New York" found only inside "New York City" does not count
        ("Definitely E.", "E"),  # five options allow E
        ("The answer is E", "E"),
        ("Answer: B, Rome", "B"),  # explicit letter beats option text
        ("Paris or Rome", None),  # two options' texts: ambiguous
        ("Romeo and Juliet", None),  # word-bounded, so "Rome" is not in "Romeo"
        ("The answer is F", None),  # beyond len(options)
        ("nothing relevant", None),
    ],
)
def test_with_options(text: str, expected: str | None) -> None:
    assert mc_letter(text, _record(OPTIONS)) == expected


def test_option_count_limits_letters() -> None:
    two = _record(["yes", "no"])
    assert mc_letter("C", two) is None
    assert mc_letter("The answer is C", two) is None
    assert mc_letter("B", two) == "B"
    assert mc_letter("no", two) == "B"
    assert mc_letter("The answer is D", None) == "D"  # default A–D without options
