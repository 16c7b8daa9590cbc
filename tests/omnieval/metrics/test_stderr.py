"""Standard errors against independent implementations: statsmodels' cluster-robust OLS, a hand textbook formula,
and lm-eval's own bootstrap."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from omnieval.metrics import bootstrap_stderr, clustered_stderr, make_metric, mean_stderr

# 0/1 outcomes of 6 conversations with 1-5 turns each; conversations differ a lot, turns within one alike
VALUES = [1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0, 1, 0, 0, 0]
UNITS = ["a", "a", "a", "b", "b", "c", "c", "c", "c", "c", "d", "d", "d", "e", "e", "e", "f", "f", "f", "f"]


def test_clustered_error_is_statsmodels_cluster_robust_ols_of_the_mean() -> None:
    """Regressing the values on a constant with cluster-robust covariance (statsmodels' default small-sample
    correction G/(G-1)·(N-1)/(N-K), K = 1) is the textbook clustered error of a mean."""
    import numpy as np
    import statsmodels.api as sm

    codes = {u: i for i, u in enumerate(dict.fromkeys(UNITS))}
    fit = sm.OLS(np.array(VALUES, float), np.ones(len(VALUES))).fit(
        cov_type="cluster", cov_kwds={"groups": np.array([codes[u] for u in UNITS])}
    )
    ours = clustered_stderr(VALUES, UNITS)
    assert ours == pytest.approx(float(fit.bse[0]), rel=1e-9)
    # by hand, Miller (2024) eq. 4 with the G/(G-1) factor
    n, g, mu = len(VALUES), len(set(UNITS)), statistics.mean(VALUES)
    meat = sum(sum(v - mu for v, u in zip(VALUES, UNITS, strict=True) if u == c) ** 2 for c in set(UNITS))
    assert ours == pytest.approx(math.sqrt(g / (g - 1) * meat) / n, rel=1e-12)
    # correlated units: the clustered error is larger than the one that assumes independent samples
    iid = mean_stderr(sum(VALUES), sum(v * v for v in VALUES), n)
    assert iid is not None and ours > 1.2 * iid


def test_clustered_error_with_every_sample_its_own_unit_is_the_plain_one() -> None:
    n = len(VALUES)
    assert clustered_stderr(VALUES, list(range(n))) == pytest.approx(statistics.stdev(VALUES) / math.sqrt(n))
    assert mean_stderr(sum(VALUES), sum(v * v for v in VALUES), n) == pytest.approx(statistics.stdev(VALUES) / n**0.5)


def test_one_unit_or_one_sample_has_no_error() -> None:
    assert clustered_stderr([1, 0, 1], ["x", "x", "x"]) is None
    assert mean_stderr(1.0, 1.0, 1) is None
    with pytest.raises(ValueError, match="3 values but 2"):
        clustered_stderr([1, 0, 1], ["x", "y"])


@pytest.mark.parametrize("metric", ["bleu", "chrf"])
def test_corpus_bootstrap_equals_lm_evals_own(metric: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Same items, same resamples: lm-eval's ``bootstrap_stderr`` over its corpus BLEU/chrF and ours over our
    sacrebleu metric agree (the issue asks within 1 %)."""
    from lm_eval.api import metrics as lm

    monkeypatch.setenv("DISABLE_MULTIPROC", "1")  # lm-eval's single-process path draws the same resamples
    rnd = random.Random(7)
    words = "the cat sat on a mat while dogs ran over green hills under grey skies".split()
    refs = [" ".join(rnd.choices(words, k=8)) for _ in range(30)]
    preds = [" ".join(w if rnd.random() < 0.7 else rnd.choice(words) for w in r.split()) for r in refs]
    items = list(zip(refs, preds, strict=True))  # lm-eval's items are (reference, prediction)
    theirs = lm.bootstrap_stderr(getattr(lm, metric), items, iters=100)
    m = make_metric(metric)
    ours = bootstrap_stderr(lambda xs: m.aggregate([], [p for _, p in xs], [r for r, _ in xs]), items, iters=100)
    assert ours is not None and theirs > 0
    assert ours == pytest.approx(theirs, rel=0.01)
