"""identity / strip / first_line / asr_normalize and the postprocessor registry."""

from __future__ import annotations

import pytest

import omnieval.postprocess as postprocess
from omnieval.core import UnknownNameError
from omnieval.postprocess import POSTPROCESSORS, get_postprocessor


def test_public_api() -> None:
    assert set(postprocess.__all__) == {"Postprocessor", "POSTPROCESSORS", "get_postprocessor"}
    assert POSTPROCESSORS.kind == "postprocessor"
    assert POSTPROCESSORS.names() == ["asr_normalize", "first_line", "identity", "mc_letter", "number", "strip"]
    for name in POSTPROCESSORS.names():
        assert callable(get_postprocessor(name))


def test_unknown_name_suggests() -> None:
    with pytest.raises(UnknownNameError, match="Did you mean: mc_letter"):
        get_postprocessor("mc_leter")


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("identity", "  Raw\ntext ", "  Raw\ntext "),
        ("strip", "  Raw\ntext \n", "Raw\ntext"),
        ("strip", "   ", ""),
        ("first_line", "\n\n  Paris  \nBecause it is the capital.", "Paris"),
        ("first_line", "one line", "one line"),
        ("first_line", " \n \n", ""),
        ("asr_normalize", "  Hello,   WORLD!  It's  me. ", "hello world its me"),
        ("asr_normalize", "well-known “quotes”\tand\n\nlines", "wellknown quotes and lines"),
        ("asr_normalize", "?!", ""),
    ],
)
def test_transforms(name: str, text: str, expected: str) -> None:
    assert get_postprocessor(name)(text, None) == expected
