"""Standard errors of benchmark scores: the mean's, a clustered one, and the bootstrap.

Why here and not per benchmark: one implementation, checked against lm-eval's and a textbook's, so every score row
of every framework carries an error computed the same way.

- ``mean_stderr``: sample standard deviation (n − 1) over √n, as lm-eval's ``mean_stderr``.
- ``clustered_stderr``: samples that share a unit (the turns of one conversation, the choices of one document) are
  not independent, and the plain formula understates the error. This is the cluster-robust (sandwich) error of a
  mean with the usual small-sample factor G/(G − 1) over G clusters, as Stata's ``mean x, vce(cluster c)`` and
  Miller, "Adding Error Bars to Evals" (2024), eq. 4: Var = G/(G − 1) · Σ_g (Σ_{i∈g} (x_i − x̄))² / n². With every
  sample its own cluster it equals ``mean_stderr``.
- ``bootstrap_stderr``: corpus metrics (BLEU, chrF, WER) are not means of per-sample values. lm-eval's algorithm
  exactly (chunks of ≤ 1000 resamples, chunk i drawn by ``random.Random(i)``, sample standard deviation of the
  replicates), so the same items and iterations give lm-eval's number.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

T = TypeVar("T")

CORPUS_BOOTSTRAP_ITERS = 100
"""Resamples for a corpus metric's error: lm-eval caps BLEU/chrF/TER at ``min(bootstrap_iters, 100)``."""


def mean_stderr(total: float, squares: float, n: int) -> float | None:
    """Standard error of a mean from the running sum and sum of squares of ``n`` values; None below two."""
    if n < 2:
        return None
    var = max(0.0, (squares - total * total / n) / (n - 1))
    return math.sqrt(var / n)


def clustered_stderr(values: Sequence[float], clusters: Sequence[Hashable]) -> float | None:
    """Cluster-robust standard error of ``mean(values)``, ``clusters[i]`` naming sample i's unit; None below two
    clusters (one unit says nothing about the spread between units)."""
    if len(values) != len(clusters):
        raise ValueError(f"{len(values)} values but {len(clusters)} cluster labels")
    sums: dict[Hashable, tuple[float, int]] = {}
    for v, c in zip(values, clusters, strict=True):
        s, k = sums.get(c, (0.0, 0))
        sums[c] = (s + v, k + 1)
    return clustered_stderr_from_sums(list(sums.values()))


def clustered_stderr_from_sums(per_cluster: Sequence[tuple[float, int]]) -> float | None:
    """``clustered_stderr`` from each cluster's (sum, count): what a streaming scorer keeps."""
    g = len(per_cluster)
    n = sum(k for _, k in per_cluster)
    if g < 2 or n == 0:
        return None
    mean = sum(s for s, _ in per_cluster) / n
    meat = sum((s - k * mean) ** 2 for s, k in per_cluster)
    return math.sqrt(g / (g - 1) * meat / (n * n))


def sample_stddev(xs: Sequence[float]) -> float:
    mu = sum(xs) / len(xs)
    return math.sqrt(sum((x - mu) ** 2 for x in xs) / (len(xs) - 1))


def bootstrap_replicates(f: Callable[[list[T]], float], xs: Sequence[T], iters: int) -> list[float]:
    """``f`` over ``iters`` resamples of ``xs`` (with replacement, same size), drawn as lm-eval draws them."""
    chunk = min(1000, iters)
    out: list[float] = []
    for i in range(iters // chunk):
        rnd = random.Random(i)
        out.extend(f(rnd.choices(xs, k=len(xs))) for _ in range(chunk))
    return out


def bootstrap_stderr(f: Callable[[list[T]], float], xs: Sequence[T], iters: int = CORPUS_BOOTSTRAP_ITERS) -> float | None:
    """Bootstrap standard error of the statistic ``f(xs)``; None below two items or two resamples."""
    if len(xs) < 2 or iters < 2:
        return None
    reps = [r for r in bootstrap_replicates(f, xs, iters) if not math.isnan(r)]
    return sample_stddev(reps) if len(reps) >= 2 else None
