"""OmniAssistBench: assistant-style, multi-turn video interaction for omni-modal models.

Two tiers, 7 major tasks, 16 sub-tasks and 3 real-world cases; each turn is scored 0–5 with the paper's Table 4
rubric (incl. ``[KEEP QUIET]`` turns), normalised to 0–100 and averaged up the hierarchy. ``load_records`` is the
registration hook (``mode``: common / teacher_forcing, ``condition``: original / visual_only / audio_only);
``SAMPLE_DIR`` is the tiny generated sample shipped with us.
"""

from __future__ import annotations

from omnieval.benchmarks._spec import DATA_DIR
from omnieval.benchmarks.omniassist._aggregate import aggregate
from omnieval.benchmarks.omniassist._loader import (
    fill_history,
    load_records,
    read_interactions,
    run_interactions,
    turn_waves,
)
from omnieval.benchmarks.omniassist._parse import JudgeFn, JudgeParseError, parse_rubric_score
from omnieval.benchmarks.omniassist._prompt import JUDGE_PROMPT, RUBRIC_TABLE, SYSTEM_PROMPT, build_judge_prompt
from omnieval.benchmarks.omniassist._schema import (
    KEEP_QUIET,
    MAJOR_TASKS,
    REAL_WORLD_CASES,
    SUB_TASK_NAMES,
    SUB_TASK_PARENT,
    TIERS,
    Interaction,
    Reference,
    Turn,
)
from omnieval.benchmarks.omniassist._score import normalise, score_records

SAMPLE_DIR = DATA_DIR / "omniassist_sample"
"""The generated sample (``scripts/make_media_samples.py``)."""

__all__ = [
    "JUDGE_PROMPT",
    "KEEP_QUIET",
    "MAJOR_TASKS",
    "REAL_WORLD_CASES",
    "RUBRIC_TABLE",
    "SAMPLE_DIR",
    "SUB_TASK_NAMES",
    "SUB_TASK_PARENT",
    "SYSTEM_PROMPT",
    "TIERS",
    "Interaction",
    "JudgeFn",
    "JudgeParseError",
    "Reference",
    "Turn",
    "aggregate",
    "build_judge_prompt",
    "fill_history",
    "load_records",
    "normalise",
    "parse_rubric_score",
    "read_interactions",
    "run_interactions",
    "score_records",
    "turn_waves",
]
