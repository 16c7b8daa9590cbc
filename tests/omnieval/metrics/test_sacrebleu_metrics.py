"""BLEU and chrF must equal sacrebleu's own corpus/sentence scores on the same data."""

from __future__ import annotations

import pickle

import pytest
import sacrebleu
from sacrebleu.metrics import CHRF

from omnieval.metrics import make_metric

HYPS = ["the cat sat on the mat", "a quick brown fox jumps", "hello there general kenobi", "nothing matches here"]
SINGLE = ["the cat sat on a mat", "the quick brown fox jumped", "hello there general kenobi", "completely different"]
MULTI: list[str | list[str]] = [
    ["the cat sat on a mat", "a cat was sitting on the mat"],
    "the quick brown fox jumped",
    ["hello there general kenobi", "hi there", "hello general"],
    [],
]
# MULTI transposed by hand into sacrebleu's streams; None marks a missing reference, "" an empty one.
MULTI_STREAMS = [
    ["the cat sat on a mat", "the quick brown fox jumped", "hello there general kenobi", ""],
    ["a cat was sitting on the mat", None, "hi there", None],
    [None, None, "hello general", None],
]


def test_bleu_single_reference_matches_sacrebleu() -> None:
    m = make_metric("bleu")
    expected = sacrebleu.corpus_bleu(HYPS, [SINGLE]).score
    assert m.aggregate([], HYPS, SINGLE) == pytest.approx(expected)  # type: ignore[arg-type]
    for h, r in zip(HYPS, SINGLE, strict=True):
        assert m.score(h, r) == pytest.approx(sacrebleu.sentence_bleu(h, [r]).score / 100)
    assert m.score(HYPS[2], SINGLE[2]) == pytest.approx(1.0)


def test_bleu_is_corpus_level_not_mean() -> None:
    m = make_metric("bleu")
    mean = 100 * sum(m.score(h, r) for h, r in zip(HYPS, SINGLE, strict=True)) / len(HYPS)
    assert m.aggregate([], HYPS, SINGLE) != pytest.approx(mean)  # type: ignore[arg-type]


def test_bleu_multi_reference_transposed_with_none_padding() -> None:
    m = make_metric("bleu")
    expected = sacrebleu.corpus_bleu(HYPS, MULTI_STREAMS).score
    assert m.aggregate([], HYPS, MULTI) == pytest.approx(expected)  # type: ignore[arg-type]
    assert m.score(HYPS[0], MULTI[0]) == pytest.approx(sacrebleu.sentence_bleu(HYPS[0], MULTI[0]).score / 100)  # type: ignore[arg-type]


def test_bleu_padding_is_none_not_empty_reference() -> None:
    # A "" pad would be the closest reference length for the short first hypothesis (|3-0| ties |3-6| and sacrebleu
    # takes the shorter), removing the brevity penalty; a None pad is dropped and the penalty stays.
    hyps = ["the cat sat", "a dog ran fast"]
    refs: list[str | list[str]] = ["the cat sat on the mat", ["a dog ran fast", "a dog"]]
    value = make_metric("bleu").aggregate([], hyps, refs)  # type: ignore[arg-type]
    with_none = sacrebleu.corpus_bleu(hyps, [["the cat sat on the mat", "a dog ran fast"], [None, "a dog"]])
    with_empty = sacrebleu.corpus_bleu(hyps, [["the cat sat on the mat", "a dog ran fast"], ["", "a dog"]])
    assert value == pytest.approx(with_none.score)
    assert with_none.bp < 1.0 and with_empty.bp == 1.0
    assert value < with_empty.score


def test_bleu_settings_and_none_prediction() -> None:
    lower = make_metric("bleu", lowercase=True)
    assert lower.score("THE CAT SAT ON THE MAT", "the cat sat on the mat") == pytest.approx(1.0)
    assert make_metric("bleu").score("THE CAT SAT ON THE MAT", "the cat sat on the mat") == 0.0
    preds = [None, "hello there general kenobi"]
    expected = sacrebleu.corpus_bleu(["", preds[1]], [["x y z", "hello there general kenobi"]]).score  # type: ignore[list-item]
    assert make_metric("bleu").aggregate([], preds, ["x y z", "hello there general kenobi"]) == pytest.approx(expected)
    zh = make_metric("bleu", tokenize="char")
    assert zh.aggregate([], ["猫坐在垫子上"], ["猫坐在垫子上"]) == pytest.approx(100.0)
    with pytest.raises(ValueError, match="tokenizer"):
        make_metric("bleu", tokenize="nope")


def test_chrf_matches_sacrebleu() -> None:
    m = make_metric("chrf")
    assert m.aggregate([], HYPS, SINGLE) == pytest.approx(sacrebleu.corpus_chrf(HYPS, [SINGLE]).score)  # type: ignore[arg-type]
    assert m.aggregate([], HYPS, MULTI) == pytest.approx(sacrebleu.corpus_chrf(HYPS, MULTI_STREAMS).score)  # type: ignore[arg-type]
    for h, r in zip(HYPS, SINGLE, strict=True):
        assert m.score(h, r) == pytest.approx(sacrebleu.sentence_chrf(h, [r]).score / 100)
    plus = make_metric("chrf", word_order=2)
    assert plus.aggregate([], HYPS, SINGLE) == pytest.approx(CHRF(word_order=2).corpus_score(HYPS, [SINGLE]).score)  # type: ignore[arg-type]
    assert plus.aggregate([], HYPS, SINGLE) != pytest.approx(m.aggregate([], HYPS, SINGLE))  # type: ignore[arg-type]


def test_metrics_pickle_for_ray() -> None:
    for name in ["exact_match", "anls", "wer", "bleu", "chrf"]:
        m = make_metric(name)
        clone = pickle.loads(pickle.dumps(m))
        assert clone.spec() == m.spec()
        assert clone.score("a b c", "a b c") == m.score("a b c", "a b c")
