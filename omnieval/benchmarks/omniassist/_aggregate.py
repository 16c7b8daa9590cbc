"""OmniAssistBench aggregation: turn scores (0–100) averaged up sub-task -> major task -> tier -> overall.

The paper reports every level (Tables 2–3) but never states the averaging rule, so we read it off its numbers.
Each level is the mean over all scored turns (QA pairs) below it, i.e. each parent is its children's average
weighted by their turn counts — not the plain mean of the children:

* Non-audio Prompt Following: GPF 55.0 and OPF 66.6 give 57.4 (plain mean 60.8); all three models in Table 2
  put ~80% of the weight on GPF (57.4, 56.8, 35.0 from 55.0/66.6, 54.8/65.4, 29.5/57.3).
* Basic Avg. of Gemini-3-Pro: its four major averages weighted by Table 1's QA counts (67, 47, 49, 76) give 63.7
  (reported 63.6); their plain mean is 64.2.
* Overall Avg. includes the Real World Cases and is turn-weighted too: Gemini-2.5-Pro's 64.6 lies below both of
  its tier averages (basic 65.4, advanced 66.4), so its Real World average (44.8) must be in it, and the plain
  mean of the three (58.9) is far off.

``weighting="macro"`` gives the plain mean of the children at every level instead, for reference. Records without
a score (judge errors, failed inference) are left out of every average and counted in ``n_unscored`` /
``n_judge_errors`` — an error is never a score.
"""

from __future__ import annotations

import math
import re
from typing import Literal

from omnieval.benchmarks.omniassist._schema import MAJOR_TASKS, REAL_WORLD_CASES, SUB_TASK_PARENT
from omnieval.core import Record


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def aggregate(records: list[Record], *, weighting: Literal["turn", "macro"] = "turn") -> dict[str, float]:
    """``overall``, ``tier/<basic|advanced|real_world>``, ``major/<task>``, ``sub/<abbr>`` (0–100) and counts."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for r in records:
        if "score" in r.metrics:
            s = str(r.meta["sub_task"])
            sums[s] = sums.get(s, 0.0) + r.metrics["score"]
            counts[s] = counts.get(s, 0) + 1

    def avg(children: list[tuple[float, int]]) -> tuple[float, int]:
        kids = [(v, n) for v, n in children if n]
        n = sum(k[1] for k in kids)
        if not n:
            return math.nan, 0
        if weighting == "macro":
            return sum(v for v, _ in kids) / len(kids), n
        return sum(v * k for v, k in kids) / n, n

    out: dict[str, float] = {}
    level: dict[str, tuple[float, int]] = {s: (sums[s] / counts[s], counts[s]) for s in counts}
    tiers: dict[str, list[tuple[float, int]]] = {"basic": [], "advanced": [], "real_world": []}
    for major, (tier, subs) in MAJOR_TASKS.items():
        m = avg([level.get(s, (math.nan, 0)) for s in subs])
        out[f"major/{slug(major)}"] = m[0]
        tiers[tier].append(m)
    tiers["real_world"] = [level.get(c, (math.nan, 0)) for c in REAL_WORLD_CASES]
    tier_avgs = {t: avg(children) for t, children in tiers.items()}
    out = {"overall": avg(list(tier_avgs.values()))[0], **{f"tier/{t}": v[0] for t, v in tier_avgs.items()}, **out}
    for s in SUB_TASK_PARENT:
        out[f"sub/{s}"] = level.get(s, (math.nan, 0))[0]
    scored = sum(counts.values())
    out["n_records"] = float(len(records))
    out["n_scored"] = float(scored)
    out["n_unscored"] = float(len(records) - scored)
    out["n_judge_errors"] = float(sum(1 for r in records if r.error is not None and r.error.kind == "judge"))
    return out
