"""ANLS values checked against hand-computed Levenshtein distances."""

from __future__ import annotations

import pytest

from omnieval.metrics import make_metric


def test_similarity_is_one_minus_normalised_distance() -> None:
    m = make_metric("anls")
    assert m.score("hallo", "hello") == pytest.approx(0.8)  # 1 edit / 5 chars
    assert m.score("abcx", "abcd") == pytest.approx(0.75)  # 1 edit / 4 chars
    assert m.score("abcd", "abcdefg") == pytest.approx(1 - 3 / 7)  # 3 insertions / 7 chars
    assert m.score("  HELLO  World ", "hello world") == 1.0  # lowercased, stripped, spaces collapsed


def test_threshold_at_tau() -> None:
    m = make_metric("anls")  # tau = 0.5
    # "abxy" vs "abcd": 2 edits / 4 = NL 0.5, which is not < 0.5, so it scores 0 instead of 0.5.
    assert m.score("abxy", "abcd") == 0.0
    assert m.score("abc", "abcdef") == 0.0  # 3 / 6 = 0.5 as well
    looser = make_metric("anls", tau=0.6)
    assert looser.score("abxy", "abcd") == pytest.approx(0.5)
    assert looser.score("abc", "abcdef") == pytest.approx(0.5)
    assert looser.spec()["settings"] == {"tau": 0.6}


def test_max_over_references_and_edge_cases() -> None:
    m = make_metric("anls")
    assert m.score("hallo", ["xyz", "hello"]) == pytest.approx(0.8)
    assert m.score("hallo", ["hello", "hallo"]) == 1.0
    assert m.score("zzzzz", ["hello", "world"]) == 0.0
    assert m.score(None, "hello") == 0.0
    assert m.score("hello", []) == 0.0
    assert m.score("", "") == 1.0
    assert m.score("42", 42) == 1.0


def test_aggregate_mean_times_100() -> None:
    m = make_metric("anls")
    value = m.aggregate([None, None, None], ["hallo", "abxy", "x"], ["hello", "abcd", "x"])  # type: ignore[list-item]
    assert value == pytest.approx(100 * (0.8 + 0.0 + 1.0) / 3)


@pytest.mark.parametrize("tau", [0.0, -0.1, 1.5])
def test_tau_must_be_a_fraction(tau: float) -> None:
    with pytest.raises(ValueError, match="tau"):
        make_metric("anls", tau=tau)
