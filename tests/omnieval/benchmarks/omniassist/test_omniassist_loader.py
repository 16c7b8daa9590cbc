"""OmniAssistBench loader on the shipped sample: taxonomy, media, history modes and input conditions."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from pydantic import ValidationError

from omnieval.benchmarks.omniassist import (
    KEEP_QUIET,
    MAJOR_TASKS,
    REAL_WORLD_CASES,
    SAMPLE_DIR,
    SUB_TASK_PARENT,
    Interaction,
    fill_history,
    load_records,
    read_interactions,
    run_interactions,
    turn_waves,
)
from omnieval.core import AudioContent, ImageContent, Output, Record, TextContent, TextOutput, VideoContent


def _types(r: Record, which: int = -1) -> list[str]:
    return [c.type for c in r.messages[which].content]


def _all(r: Record, cls: type) -> list:
    return [c for m in r.messages for c in m.content if isinstance(c, cls)]


def test_taxonomy() -> None:
    assert len(MAJOR_TASKS) == 7
    assert sum(len(s) for _, s in MAJOR_TASKS.values()) == 16
    assert Counter(t for t, _ in MAJOR_TASKS.values()) == {"basic": 4, "advanced": 3}
    assert REAL_WORLD_CASES == ("Ms", "Ht", "Ba")


def test_sample_covers_everything() -> None:
    its = read_interactions(SAMPLE_DIR)
    assert len(its) == 19 and {it.sub_task for it in its} == set(SUB_TASK_PARENT)
    rs = load_records(SAMPLE_DIR, model="m")
    assert len(rs) == 35 and [r.index for r in rs] == list(range(35))
    assert Counter(r.meta["tier"] for r in rs) == {"basic": 12, "advanced": 17, "real_world": 6}
    assert sum(r.meta["keep_quiet"] for r in rs) == 5 and all(
        (r.label == KEEP_QUIET) == r.meta["keep_quiet"] for r in rs
    )
    assert max(r.meta["n_turns"] for r in rs) == 4


def test_media_are_real_files() -> None:
    for it in read_interactions(SAMPLE_DIR):
        for t in it.turns:
            video = (SAMPLE_DIR / t.video).read_bytes()
            assert video[4:8] == b"ftyp" and len(video) > 500
            audio = (SAMPLE_DIR / t.audio).read_bytes()
            assert audio[0] == 0xFF and audio[1] & 0xE0 == 0xE0  # MPEG audio frame sync
        for ref in it.reference:
            assert (SAMPLE_DIR / ref.path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_original_condition_layout() -> None:
    rs = load_records(SAMPLE_DIR)
    for r in rs:
        assert r.messages[0].role == "system" and KEEP_QUIET in r.messages[0].text_value()
        assert [m.role for m in r.messages[1:]] == ["user", "assistant"] * r.meta["turn"] + ["user"]
        current = r.messages[-1].content
        assert (
            sum(isinstance(c, VideoContent) for c in current) == 1
            and sum(isinstance(c, AudioContent) for c in current) == 1
        )
        assert all(
            Path(c.value).is_file() for c in _all(r, VideoContent) + _all(r, AudioContent) + _all(r, ImageContent)
        )
    ct = [r for r in rs if r.meta["sub_task"] == "CT"]
    assert _types(ct[0], 1)[:2] == ["text", "image"] and _types(ct[1], 1)[:2] == ["text", "image"]  # turn-0 reference
    assert _types(ct[1], -1) == ["video", "audio"]  # spoken query stays in the audio
    ms = next(r for r in rs if r.meta["sub_task"] == "Ms")
    assert ms.messages[1].content[0] == TextContent(value="Prior knowledge: The desk has four legs.")


def test_visual_only_drops_audio_and_gives_spoken_query_as_text() -> None:
    rs = load_records(SAMPLE_DIR, condition="visual_only")
    assert not any(_all(r, AudioContent) for r in rs)
    assert all(_all(r, VideoContent) for r in rs)
    cr = next(r for r in rs if r.meta["sub_task"] == "CR")
    assert _types(cr) == ["video", "text"] and cr.messages[-1].content[-1].value.endswith(cr.meta["query"])
    gpf = [r for r in rs if r.meta["sub_task"] == "GPF"]
    assert all(_types(r) == ["video"] for r in gpf)  # gesture prompts are never turned into text
    ser = [r for r in rs if r.meta["sub_task"] == "SER"]
    assert [_types(r) for r in ser] == [["video", "text"], ["video"], ["video"]]  # query only in turn 0


def test_audio_only_drops_video_and_images() -> None:
    rs = load_records(SAMPLE_DIR, condition="audio_only")
    assert not any(_all(r, VideoContent) or _all(r, ImageContent) for r in rs)
    assert all([t for t in _types(r) if t != "text"] == ["audio"] for r in rs)
    texts = {c.value for r in rs for c in r.messages[-1].content if isinstance(c, TextContent)}
    assert texts and all(t.startswith("Prior knowledge:") for t in texts)  # no query text, no reference caption
    st = next(r for r in rs if r.meta["sub_task"] == "ST")
    assert _types(st, 1) == ["audio"]  # the reference image is gone too


def test_query_as_text_and_frames() -> None:
    rs = load_records(SAMPLE_DIR, query_as_text=True, num_frames=8)
    cr = next(r for r in rs if r.meta["sub_task"] == "CR")
    assert _types(cr) == ["video", "audio", "text"]
    v = _all(cr, VideoContent)[0]
    assert (v.num_frames, v.sampling_strategy) == (8, "uniform")
    v = _all(load_records(SAMPLE_DIR, fps=2.0, limit=1)[0], VideoContent)[0]
    assert (v.fps, v.sampling_strategy) == (2.0, "fps")


def test_teacher_forcing_uses_ground_truth_history() -> None:
    rs = load_records(SAMPLE_DIR, mode="teacher_forcing", sub_tasks=["MER"])
    assert len(rs) == 4 and not any(r.meta["history_pending"] for r in rs)
    last = rs[-1]
    assert [m.text_value() for m in last.messages if m.role == "assistant"] == [r.label for r in rs[:3]]
    assert fill_history(last, {}) is last


def test_common_mode_uses_model_history() -> None:
    rs = load_records(SAMPLE_DIR, mode="common", sub_tasks=["MER", "CR"])
    assert [r.meta["history_pending"] for r in rs] == [False, False, True, True, True]
    assert all(m.text_value() == "" for r in rs for m in r.messages if m.role == "assistant")
    with pytest.raises(KeyError, match="not run yet"):
        fill_history(rs[3], {})
    seen: list[list[int]] = []

    def infer(batch: list[Record]) -> list[Record]:
        seen.append([r.index for r in batch])
        assert not any(r.meta["history_pending"] for r in batch)
        return [
            r.model_copy(update={"output": Output(text=TextOutput(prediction=[f"model says {r.index}"]))})
            for r in batch
        ]

    out = run_interactions(rs, infer)
    assert seen == [[0, 1], [2], [3], [4]] and [r.index for r in out] == [0, 1, 2, 3, 4]
    last = out[-1]
    assert [m.text_value() for m in last.messages if m.role == "assistant"] == [
        "model says 1",
        "model says 2",
        "model says 3",
    ]
    assert last.meta["history_degraded"] is False
    assert [len(w) for w in turn_waves(rs)] == [2, 1, 1, 1]


def test_common_mode_failed_turn_gives_empty_history() -> None:
    rs = load_records(SAMPLE_DIR, sub_tasks=["GPF"])
    filled = fill_history(rs[1], {0: rs[0]})  # turn 0 never produced output
    assert filled.messages[2].text_value() == "" and filled.meta["history_degraded"] is True


def test_limit_counts_interactions_and_bad_args() -> None:
    assert len(load_records(SAMPLE_DIR, limit=2)) == 2
    assert len(load_records(SAMPLE_DIR, sub_tasks=["SER", "MER"], limit=1)) == 3
    with pytest.raises(ValueError):
        load_records(SAMPLE_DIR, split="dev")
    with pytest.raises(ValueError):
        load_records(SAMPLE_DIR, condition="muted")  # type: ignore[arg-type]


def test_schema_validation(tmp_path: Path) -> None:
    row = json.loads((SAMPLE_DIR / "annotations.jsonl").read_text().splitlines()[0])
    Interaction.model_validate(row)
    for patch in ({"tier": "advanced"}, {"major_task": "Temporal Perception"}, {"sub_task": "XX"}, {"extra": 1}):
        with pytest.raises(ValidationError):
            Interaction.model_validate({**row, **patch})
    turn = {**row["turns"][0], "query_source": None}
    with pytest.raises(ValidationError, match="together"):
        Interaction.model_validate({**row, "turns": [turn]})
    (tmp_path / "annotations.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(FileNotFoundError, match="missing media"):
        read_interactions(tmp_path)
