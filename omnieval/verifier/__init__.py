"""The built-in verifier (paper §4.2, App. C) and pool-model judges for rubric benchmarks.

* ``run_verifier`` judges every Record's (question, reference, raw prediction) with a GGUF judge on CPU
  ``VerifierWorker`` actors (one llama.cpp process per NUMA node, cgroup CPU quota respected) and stores the
  verdict in the Record; ``verifier_rows`` turns verdicts into one ``verifier`` ScoreRow on [0, 100] per benchmark.
* ``VerifierStream`` runs the same judge beside inference: the runner submits each finished chunk, so only the
  tail after the last chunk is added to the run (``verifier.mode: stream``, the default).
* ``make_pool_judge`` makes a pool model a ``JudgeFn`` (the judge is just another pool member).
* ``evaluate_labelled`` measures a judge's accuracy on the labelled set shipped in ``data/``.
"""

from __future__ import annotations

from omnieval.verifier._cpu import WorkerSlot, cgroup_cpu_limit, numa_nodes, parse_cpulist, plan_workers
from omnieval.verifier._judge import JudgeFn, PoolJudge, make_pool_judge
from omnieval.verifier._judges import ResolvedJudge, resolve_judge
from omnieval.verifier._labelled import LABELLED_PATH, baselines, confusion, evaluate_labelled, load_labelled
from omnieval.verifier._parse import ParsedVerdict, parse_rating
from omnieval.verifier._prompt import VERIFIER_PROMPT, Triple, build_prompt, record_triple, reference_text
from omnieval.verifier._stream import VerifierStream, judge_records, stream_slim
from omnieval.verifier._verify import (
    JudgeReply,
    Verdict,
    VerifierPool,
    apply_verdict,
    judge_prompt,
    judge_triples,
    judge_with_retries,
    run_verifier,
    verifier_rows,
)

__all__ = [
    "JudgeReply",
    "ResolvedJudge",
    "judge_prompt",
    "resolve_judge",
    "LABELLED_PATH",
    "VERIFIER_PROMPT",
    "JudgeFn",
    "ParsedVerdict",
    "PoolJudge",
    "Triple",
    "Verdict",
    "VerifierPool",
    "VerifierStream",
    "WorkerSlot",
    "apply_verdict",
    "baselines",
    "build_prompt",
    "cgroup_cpu_limit",
    "confusion",
    "evaluate_labelled",
    "judge_records",
    "judge_triples",
    "judge_with_retries",
    "load_labelled",
    "make_pool_judge",
    "numa_nodes",
    "parse_cpulist",
    "parse_rating",
    "plan_workers",
    "record_triple",
    "reference_text",
    "run_verifier",
    "stream_slim",
    "verifier_rows",
]
