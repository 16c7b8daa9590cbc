"""EgoMem (Yao et al., 2025): personalised full-duplex spoken dialogue with long-term memory.

Built from the dataset card alone: the parquet schema of both splits (``original``, ``with_noise``), turn-by-turn
audio records with memory context, the card's exact scoring prompt and the per-turn ``[fact_score, answer_score]``
judgement. ``load_records`` is the registration hook; ``SAMPLE_DIR`` is the tiny generated sample shipped with us.
"""

from __future__ import annotations

from omnieval.benchmarks._spec import DATA_DIR
from omnieval.benchmarks.egomem._aggregate import aggregate
from omnieval.benchmarks.egomem._loader import iter_samples, load_records, split_files, write_wav
from omnieval.benchmarks.egomem._parse import JudgeFn, JudgeParseError, judge_with_retries, parse_session_scores
from omnieval.benchmarks.egomem._prompt import SCORING_PROMPT, SYSTEM_PROMPT, build_scoring_prompt
from omnieval.benchmarks.egomem._schema import (
    ARROW_SCHEMA,
    SPLITS,
    DialogRecord,
    DialogTurn,
    EgoMemSample,
    ProfileSummary,
    RelatedPerson,
)
from omnieval.benchmarks.egomem._score import score_records

SAMPLE_DIR = DATA_DIR / "egomem_sample"
"""The generated sample in the card's exact layout (``scripts/make_media_samples.py``)."""

__all__ = [
    "ARROW_SCHEMA",
    "SAMPLE_DIR",
    "SCORING_PROMPT",
    "SPLITS",
    "SYSTEM_PROMPT",
    "DialogRecord",
    "DialogTurn",
    "EgoMemSample",
    "JudgeFn",
    "JudgeParseError",
    "ProfileSummary",
    "RelatedPerson",
    "aggregate",
    "build_scoring_prompt",
    "iter_samples",
    "judge_with_retries",
    "load_records",
    "parse_session_scores",
    "score_records",
    "split_files",
    "write_wav",
]
