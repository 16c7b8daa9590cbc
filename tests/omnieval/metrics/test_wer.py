"""WER: hand-counted edit operations, normalisation, and corpus-level (not mean) aggregation."""

from __future__ import annotations

import math

import pytest

from omnieval.metrics import make_metric
from omnieval.postprocess import get_postprocessor


def test_known_pair() -> None:
    # ref: the cat sat on the mat (6 words); hyp: the cat sit on mat → 1 substitution (sat→sit) + 1 deletion (the).
    assert make_metric("wer").score("the cat sit on mat", "the cat sat on the mat") == pytest.approx(2 / 6)


def test_insertions_can_exceed_one() -> None:
    assert make_metric("wer").score("a b c", "a") == pytest.approx(2.0)


def test_normalisation_default_and_off() -> None:
    assert make_metric("wer").score("hello,   WORLD!", "Hello world.") == 0.0
    assert make_metric("wer").score("a b c", "a\tb\nc") == 0.0  # tabs and newlines separate words too
    raw = make_metric("wer", normalize=False)
    assert raw.score("hello world", "Hello world") == pytest.approx(0.5)
    assert raw.score("  hello   world ", "hello world") == 0.0  # spaces are still collapsed and stripped


@pytest.mark.parametrize("prediction", [None, "", "   ", "?!"])
def test_empty_prediction_is_all_deletions(prediction: str | None) -> None:
    assert make_metric("wer").score(prediction, "one two three") == pytest.approx(1.0)


def test_corpus_wer_differs_from_mean_per_sample() -> None:
    m = make_metric("wer")
    preds = ["a", "a b c d e f g h"]
    refs = ["a b", "a b c d e f g h"]  # 1 error / 2 words, 0 errors / 8 words
    per_sample = [m.score(p, r) for p, r in zip(preds, refs, strict=True)]
    assert per_sample == [pytest.approx(0.5), 0.0]
    assert m.aggregate([], preds, refs) == pytest.approx(100 * 1 / 10)  # corpus: 1 error over 10 words
    assert 100 * sum(per_sample) / 2 == pytest.approx(25.0)  # what a mean would have said


def test_corpus_counts_none_and_list_references() -> None:
    m = make_metric("wer")
    # None → 2 deletions of "x y"; the list reference uses its first entry ("b c" vs "b d": 1 substitution).
    assert m.aggregate([], [None, "b d"], ["x y", ["b c", "b d"]]) == pytest.approx(100 * 3 / 4)
    assert math.isnan(m.aggregate([], [], []))


def test_lower_is_better_and_shares_asr_normalize() -> None:
    m = make_metric("wer")
    assert m.higher_is_better is False and m.spec()["higher_is_better"] is False
    normalize = get_postprocessor("asr_normalize")
    for text in ["It's  a Well-known, “quoted” FACT!", "  Hello\tthere...  ", "naïve café"]:
        # The postprocessor's output is a fixed point of the metric's normalisation.
        assert m.score(normalize(text, None), text) == 0.0
        if normalize(text, None).split() != text.split():
            assert make_metric("wer", normalize=False).score(normalize(text, None), text) > 0.0
    assert normalize("It's  a Well-known, “quoted” FACT!", None) == "its a wellknown quoted fact"
