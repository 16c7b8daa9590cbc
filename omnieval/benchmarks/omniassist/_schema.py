"""OmniAssistBench taxonomy (paper Fig. 2, Tables 1–6) and the on-disk annotation schema we read.

Taxonomy: two tiers, 7 major tasks, 16 sub-tasks, plus 3 real-world cases reported beside the tiers (Table 3).
Full sub-task names come from Tables 5–6 and Fig. 5; the paper's text never expands AR, LR (Referential Perception)
or the real-world cases Ms, Ht, Ba (they are defined only in Fig. 2), so those keep their abbreviation as name.

On-disk schema: the paper publishes no file format, so this one is ours, shaped by what the paper describes —
one interaction (an edited source video) per line of ``annotations.jsonl``; its ``turns`` are consecutive clips,
each with a demuxed video stream and audio stream (so the visual-only / audio-only conditions drop exactly one
content entry), the user's query and where it comes from, the ground truth (``"[KEEP QUIET]"`` when the assistant
must stay silent) and optional key points; ``prior`` is the predefined prior knowledge derived from the source
video, and ``reference`` the manual images / checklist image / demonstration video given at the start.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

KEEP_QUIET = "[KEEP QUIET]"
"""The exact silence token (Table 4)."""

TIERS: dict[str, str] = {
    "basic": "Basic Interactive Understanding",
    "advanced": "Advanced Interactive Understanding",
    "real_world": "Real World Cases",
}
"""Tier key -> paper name; ``real_world`` is not a tier in the paper but is reported and averaged like one."""

MAJOR_TASKS: dict[str, tuple[str, tuple[str, ...]]] = {
    "Social Perception": ("basic", ("II", "AI", "CE")),
    "Temporal Perception": ("basic", ("ER", "AO", "DC")),
    "Referential Perception": ("basic", ("AR", "LR")),
    "Non-audio Prompt Following": ("basic", ("GPF", "OPF")),
    "Context-aware Response": ("advanced", ("CR",)),
    "Proactive Response": ("advanced", ("SER", "MER")),
    "Process Tracking": ("advanced", ("ST", "CT", "MT")),
}
"""The 7 major tasks (names as in Table 1 plus Table 3's Process Tracking): tier and sub-tasks."""

REAL_WORLD = "Real World Cases"
REAL_WORLD_CASES: tuple[str, ...] = ("Ms", "Ht", "Ba")

SUB_TASK_NAMES: dict[str, str] = {
    "II": "Identity Identification",
    "AI": "Addressee Identification",
    "CE": "Complex Emotion Understanding",
    "ER": "Event Retrieval",
    "AO": "Appearance Order Perception",
    "DC": "Dynamic Counting",
    "AR": "AR",
    "LR": "LR",
    "GPF": "Gesture-based Prompt Following",
    "OPF": "OCR-based Prompt Following",
    "CR": "Context-Aware Response",
    "SER": "Single Event-triggered Response",
    "MER": "Multi Event-triggered Response",
    "ST": "Step Tracking",
    "CT": "Checklist Tracking",
    "MT": "Multitask Tracking",
    "Ms": "Ms",
    "Ht": "Ht",
    "Ba": "Ba",
}

SUB_TASK_PARENT: dict[str, tuple[str, str]] = {
    **{s: (tier, major) for major, (tier, subs) in MAJOR_TASKS.items() for s in subs},
    **{c: ("real_world", REAL_WORLD) for c in REAL_WORLD_CASES},
}
"""Sub-task (or real-world case) -> (tier key, major task)."""

assert len(MAJOR_TASKS) == 7 and sum(len(s) for _, s in MAJOR_TASKS.values()) == 16


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Reference(_Strict):
    """Material shown once at the start: manual images, a checklist rendered as an image, a demonstration video."""

    type: Literal["image", "video"]
    path: str
    """Path relative to the dataset directory."""


class Turn(_Strict):
    video: str
    """The turn's clip, video stream (relative path)."""
    audio: str | None = None
    """The clip's audio stream (relative path); None when the clip is silent."""
    query: str | None = None
    """The user's request this turn (transcript or description); None for clip-only turns."""
    query_source: Literal["speech", "text", "visual"] | None = None
    """speech: spoken in ``audio``; text: typed; visual: a gesture or written prompt inside ``video``."""
    answer: str
    """Ground truth; exactly ``"[KEEP QUIET]"`` when the assistant must not respond yet."""
    key_points: list[str] = Field(default_factory=list)
    """Key points a full answer covers (rubric levels 5/4 vs 3)."""
    span: tuple[float, float] | None = None
    """Where the clip sits in the edited source video, in seconds."""

    @model_validator(mode="after")
    def _query_has_source(self) -> Turn:
        if (self.query is None) != (self.query_source is None):
            raise ValueError("query and query_source must be given together")
        if self.query_source == "speech" and self.audio is None:
            raise ValueError("a spoken query needs the turn's audio")
        return self

    @property
    def keep_quiet(self) -> bool:
        return self.answer.strip() == KEEP_QUIET


class Interaction(_Strict):
    """One edited video: a multi-turn interaction of a single sub-task."""

    id: str
    tier: Literal["basic", "advanced", "real_world"]
    major_task: str
    sub_task: str
    """Sub-task abbreviation (Fig. 2), or the real-world case."""
    topic: str = ""
    """Video topic (Fig. 3)."""
    prior: str | None = None
    """Predefined prior knowledge that fixes the interaction path."""
    reference: list[Reference] = Field(default_factory=list)
    turns: list[Turn] = Field(min_length=1)

    @model_validator(mode="after")
    def _in_taxonomy(self) -> Interaction:
        if self.sub_task not in SUB_TASK_PARENT:
            raise ValueError(f"unknown sub_task {self.sub_task!r}")
        want = SUB_TASK_PARENT[self.sub_task]
        if (self.tier, self.major_task) != want:
            raise ValueError(
                f"{self.id}: sub_task {self.sub_task} belongs to {want}, not {(self.tier, self.major_task)}"
            )
        return self

    @property
    def instruction(self) -> str | None:
        """The standing request: the first query of the interaction (proactive tasks give it only once)."""
        return next((t.query for t in self.turns if t.query is not None), None)
