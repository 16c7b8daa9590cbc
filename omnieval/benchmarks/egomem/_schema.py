"""The EgoMem evaluation data's own schema, exactly as its dataset card's ``dataset_info`` declares it.

The card is definitive here, so every model forbids extra fields and ``ARROW_SCHEMA`` mirrors the parquet columns
(HF ``datasets`` layout: ``data/original-*.parquet`` and ``data/with_noise-*.parquet``). The waveforms
(``user_wav``/``bot_wav``, float32 lists, tens of MB per sample) are kept out of pydantic and handled as numpy arrays.

Note the card's asymmetry, reproduced on purpose: ``profile_summary.person_fact`` is one string, while
``relation_graph[*].person_fact`` and ``support_dict[*].person_fact`` are lists of strings.

Stamp units (the card says only "timestamp", dtype int64): we read ``user_stamp``/``bot_stamp``/``bot_stamp_end``/
``bot_stamp_end_audio`` as absolute sample points into ``user_wav``/``bot_wav``, the unit of ``dialog_span``.
``DialogTurn`` checks the ordering and ``DialogRecord`` checks that the turns lie inside ``dialog_span``, so data in
another unit fails loudly instead of yielding silently wrong audio cuts.
"""

from __future__ import annotations

from typing import Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, model_validator

SPLITS: tuple[str, ...] = ("original", "with_noise")
Split = Literal["original", "with_noise"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RelatedPerson(_Strict):
    """One element of ``relation_graph`` (and of a turn's ``support_dict``, which has the same structure)."""

    person: str
    """Name of the related person."""
    person_fact: list[str]
    """Known facts about this person."""
    person_relation: str
    """Relationship of this person to the current user."""


class ProfileSummary(_Strict):
    person: str
    """Name of the current user; ``unknown_speaker`` while the name is not known."""
    person_fact: str
    """Facts about the current user (one string in the card, not a list)."""
    person_profile: str
    """General profile of the user."""
    person_summary: str
    """Summary of the user's previous dialogues."""


class DialogTurn(_Strict):
    bot_stamp: int
    """Start of the bot's response (sample points)."""
    bot_stamp_end: int
    """End of the bot's (text) response."""
    bot_stamp_end_audio: int
    """End of the bot's audio response."""
    bot_txt: str
    """Ground-truth text of the bot's response."""
    fact_kwd: list[str]
    """Ground-truth keywords for fact retrieval."""
    relation_kwd: list[str]
    """Ground-truth keywords for relation retrieval."""
    speaker: str
    """Speaker of the turn."""
    support_dict: list[RelatedPerson]
    """Supporting facts needed to answer; generally a subset of ``relation_graph``."""
    user_stamp: int
    """Start of the user's question (sample points)."""
    user_txt: str
    """Transcription of the user's question."""

    @model_validator(mode="after")
    def _ordered(self) -> DialogTurn:
        if not (0 <= self.user_stamp < self.bot_stamp <= self.bot_stamp_end <= self.bot_stamp_end_audio):
            raise ValueError(
                "expected 0 <= user_stamp < bot_stamp <= bot_stamp_end <= bot_stamp_end_audio (sample points), got "
                f"{self.user_stamp}, {self.bot_stamp}, {self.bot_stamp_end}, {self.bot_stamp_end_audio}"
            )
        return self


class DialogRecord(_Strict):
    """One dialogue session inside the sample's long recording."""

    dialog_span: list[int] = Field(min_length=2, max_length=2)
    """[start, end) of the session in ``user_wav``/``bot_wav``, in sample points."""
    dialog_span_in_seconds: list[float] = Field(min_length=2, max_length=2)
    """The same span in seconds."""
    dialog_turn_contents: list[DialogTurn] = Field(min_length=1)
    """Turns of the session, in order."""
    meta: str
    """Session identifier."""
    profile_summary: ProfileSummary
    """What the memory holds about the current user at session start."""
    relation_graph: list[RelatedPerson]
    """The user's relation graph."""

    @model_validator(mode="after")
    def _inside_span(self) -> DialogRecord:
        start, end = self.dialog_span
        prev = start
        for k, t in enumerate(self.dialog_turn_contents):
            if t.user_stamp < prev or t.bot_stamp_end_audio > end:
                raise ValueError(
                    f"turn {k} of session {self.meta!r} is not inside dialog_span {self.dialog_span} in order "
                    "(stamps are read as absolute sample points)"
                )
            prev = t.bot_stamp
        return self


class EgoMemSample(_Strict):
    """A row without its waveforms (those travel as numpy arrays next to it)."""

    meta: int
    """Unique sample identifier."""
    sampling_rate: int = Field(gt=0)
    """Sampling rate of both ``user_wav`` and ``bot_wav``."""
    dialog_records: list[DialogRecord] = Field(min_length=1)
    """Dialogue sessions within the recording."""


_PERSON = pa.struct([("person", pa.string()), ("person_fact", pa.list_(pa.string())), ("person_relation", pa.string())])
_TURN = pa.struct(
    [
        ("bot_stamp", pa.int64()),
        ("bot_stamp_end", pa.int64()),
        ("bot_stamp_end_audio", pa.int64()),
        ("bot_txt", pa.string()),
        ("fact_kwd", pa.list_(pa.string())),
        ("relation_kwd", pa.list_(pa.string())),
        ("speaker", pa.string()),
        ("support_dict", pa.list_(_PERSON)),
        ("user_stamp", pa.int64()),
        ("user_txt", pa.string()),
    ]
)
_SESSION = pa.struct(
    [
        ("dialog_span", pa.list_(pa.int64())),
        ("dialog_span_in_seconds", pa.list_(pa.float64())),
        ("dialog_turn_contents", pa.list_(_TURN)),
        ("meta", pa.string()),
        (
            "profile_summary",
            pa.struct(
                [
                    ("person", pa.string()),
                    ("person_fact", pa.string()),
                    ("person_profile", pa.string()),
                    ("person_summary", pa.string()),
                ]
            ),
        ),
        ("relation_graph", pa.list_(_PERSON)),
    ]
)
ARROW_SCHEMA = pa.schema(
    [
        ("meta", pa.int64()),
        ("user_wav", pa.list_(pa.float32())),
        ("bot_wav", pa.list_(pa.float32())),
        ("sampling_rate", pa.int64()),
        ("dialog_records", pa.list_(_SESSION)),
    ]
)
"""Parquet schema of one split, field for field from the card's ``dataset_info.features``."""


def _same_type(a: pa.DataType, b: pa.DataType) -> bool:
    """Structural equality that ignores list child names (``item`` vs ``element``) and struct field order."""
    if pa.types.is_list(a) or pa.types.is_large_list(a):
        return (pa.types.is_list(b) or pa.types.is_large_list(b)) and _same_type(a.value_type, b.value_type)
    if pa.types.is_struct(a):
        if not pa.types.is_struct(b):
            return False
        fa = {a.field(i).name: a.field(i).type for i in range(a.num_fields)}
        fb = {b.field(i).name: b.field(i).type for i in range(b.num_fields)}
        return fa.keys() == fb.keys() and all(_same_type(fa[k], fb[k]) for k in fa)
    if pa.types.is_string(a) or pa.types.is_large_string(a):
        return pa.types.is_string(b) or pa.types.is_large_string(b)
    return a.equals(b)


def check_arrow_schema(schema: pa.Schema, *, where: str = "") -> None:
    """Raise ValueError unless ``schema`` has exactly the card's columns and types."""
    got = {f.name: f.type for f in schema}
    want = {f.name: f.type for f in ARROW_SCHEMA}
    if got.keys() != want.keys():
        raise ValueError(f"{where}: columns {sorted(got)} differ from the EgoMem card's {sorted(want)}")
    bad = [k for k in want if not _same_type(got[k], want[k])]
    if bad:
        raise ValueError(f"{where}: column(s) {bad} do not have the EgoMem card's types")
