"""OmniAssistBench annotations -> one Record per turn, with the interaction's history before the current clip.

Message layout of the record for turn k (content per turn, so the three input conditions are exact):

    system: SYSTEM_PROMPT
    user:   [prior knowledge + reference material, turn 0 only] clip 0 (video, audio, query text if any)
    assistant: answer to turn 0          ... up to turn k-1
    user:   clip k

Modes (paper Fig. 10): ``teacher_forcing`` puts the ground-truth answers in the history; ``common`` (the default
setting) puts the model's own earlier responses there. Those exist only after inference, so in ``common`` mode the
records of turns k > 0 come with empty assistant placeholders and ``meta["history_pending"] = True``;
``fill_history`` (or ``run_interactions``, which runs turn waves in order) replaces them with the predictions of
the records listed in ``meta["history_indices"]``. A failed earlier turn contributes an empty response and sets
``meta["history_degraded"]``.

Conditions (paper Fig. 8): ``visual_only`` drops every audio entry, ``audio_only`` every video and image entry
(reference material included). A spoken query lives in the audio, so in ``visual_only`` its transcript is given as
text — without it the model would get no request at all, and the paper's observation that visual-only inputs help
Proactive Response presumes the model still receives the query. ``query_as_text`` does the same in every
condition (for models without audio input). Visual prompts (gestures, written notes) are never given as text.
``limit`` counts interactions, never splitting one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from omnieval.benchmarks.omniassist._prompt import SYSTEM_PROMPT
from omnieval.benchmarks.omniassist._schema import SUB_TASK_NAMES, Interaction, Turn
from omnieval.core import (
    AudioContent,
    Content,
    GenerationOptions,
    ImageContent,
    Message,
    Record,
    TextContent,
    VideoContent,
)

Mode = Literal["common", "teacher_forcing"]
Condition = Literal["original", "visual_only", "audio_only"]
SPLITS: tuple[str, ...] = ("test",)
ANNOTATIONS = "annotations.jsonl"


def read_interactions(data_dir: Path) -> list[Interaction]:
    """Validated interactions of ``annotations.jsonl``; every referenced media file must exist."""
    data_dir = Path(data_dir)
    out = []
    for n, line in enumerate((data_dir / ANNOTATIONS).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        it = Interaction.model_validate(json.loads(line))
        paths = [r.path for r in it.reference] + [p for t in it.turns for p in (t.video, t.audio) if p]
        missing = [p for p in paths if not (data_dir / p).is_file()]
        if missing:
            raise FileNotFoundError(f"{ANNOTATIONS}:{n} ({it.id}): missing media {missing}")
        out.append(it)
    return out


class _Builder:
    def __init__(
        self, data_dir: Path, condition: Condition, query_as_text: bool, num_frames: int | None, fps: float | None,
        sampling_rate: int | None = None,
    ):  # fmt: skip
        self.dir, self.condition, self.query_as_text = data_dir, condition, query_as_text
        self.sampling_rate = sampling_rate
        strategy = "fps" if fps else ("uniform" if num_frames else None)
        self.video_opts: dict[str, Any] = {"num_frames": num_frames, "fps": fps, "sampling_strategy": strategy}

    def _path(self, rel: str) -> str:
        return str(self.dir / rel)

    def preface(self, it: Interaction) -> list[Content]:
        out: list[Content] = []
        if it.prior:
            out.append(TextContent(value=f"Prior knowledge: {it.prior}"))
        refs: list[Content] = []
        if self.condition != "audio_only":
            for r in it.reference:
                if r.type == "image":
                    refs.append(ImageContent(value=self._path(r.path)))
                else:
                    refs.append(VideoContent(value=self._path(r.path), **self.video_opts))
        if refs:
            out += [TextContent(value="Reference material:"), *refs]
        return out

    def clip(self, t: Turn) -> list[Content]:
        out: list[Content] = []
        if self.condition != "audio_only":
            out.append(VideoContent(value=self._path(t.video), **self.video_opts))
        if self.condition != "visual_only" and t.audio:
            out.append(AudioContent(value=self._path(t.audio), sampling_rate=self.sampling_rate))
        spoken_as_text = t.query_source == "speech" and (self.condition == "visual_only" or self.query_as_text)
        if t.query and (t.query_source == "text" or spoken_as_text):
            out.append(TextContent(value=f"User: {t.query}"))
        if not out:
            out.append(TextContent(value="[This clip has no audio.]"))
        return out


def load_records(
    data_dir: Path,
    *,
    split: str = "test",
    model: str = "",
    benchmark: str = "omniassist",
    mode: Mode = "common",
    condition: Condition = "original",
    query_as_text: bool = False,
    num_frames: int | None = None,
    fps: float | None = None,
    sampling_rate: int | None = 16000,
    sub_tasks: list[str] | None = None,
    generation: GenerationOptions | None = None,
    limit: int | None = None,
) -> list[Record]:
    """One Record per turn; ``limit`` counts interactions; ``sub_tasks`` keeps only those abbreviations.

    ``sampling_rate``: the rate audio reaches the model at (the 8 kHz clips are resampled: Whisper-family audio
    encoders take 16 kHz); None sends the files as they are."""
    if split not in SPLITS:
        raise ValueError(f"OmniAssistBench has split(s) {SPLITS}, not {split!r}")
    if mode not in ("common", "teacher_forcing") or condition not in ("original", "visual_only", "audio_only"):
        raise ValueError(f"bad mode/condition {mode!r}/{condition!r}")
    data_dir = Path(data_dir)
    interactions = [it for it in read_interactions(data_dir) if sub_tasks is None or it.sub_task in sub_tasks]
    if limit is not None:
        interactions = interactions[:limit]
    build = _Builder(data_dir, condition, query_as_text, num_frames, fps, sampling_rate)
    gen = generation or GenerationOptions()
    records: list[Record] = []
    for it in interactions:
        history: list[Message] = [Message.text("system", SYSTEM_PROMPT)]
        indices: list[int] = []
        for k, t in enumerate(it.turns):
            user = Message(role="user", content=(build.preface(it) if k == 0 else []) + build.clip(t))
            records.append(
                Record(
                    benchmark=benchmark,
                    index=len(records),
                    model=model,
                    sample_id=f"{it.id}/{k}",
                    messages=[*history, user],
                    generation_options=gen,
                    label=t.answer,
                    meta={
                        "interaction_id": it.id,
                        "turn": k,
                        "n_turns": len(it.turns),
                        "tier": it.tier,
                        "major_task": it.major_task,
                        "sub_task": it.sub_task,
                        "sub_task_name": SUB_TASK_NAMES[it.sub_task],
                        "topic": it.topic,
                        "query": t.query,
                        "query_source": t.query_source,
                        "instruction": it.instruction,
                        "key_points": list(t.key_points),
                        "keep_quiet": t.keep_quiet,
                        "mode": mode,
                        "condition": condition,
                        "history_indices": list(indices),
                        "history_pending": mode == "common" and k > 0,
                    },
                )
            )
            indices.append(len(records) - 1)
            answer = t.answer if mode == "teacher_forcing" else ""
            history += [user, Message.text("assistant", answer)]
    return records


def _response(r: Record) -> str | None:
    post = r.prediction_postprocessed
    return post if post is not None else r.prediction


def fill_history(record: Record, done: Mapping[int, Record]) -> Record:
    """``record`` with its pending assistant history replaced by the model's responses from ``done`` (by index)."""
    if not record.meta.get("history_pending"):
        return record
    hist = record.meta["history_indices"]
    missing = [i for i in hist if i not in done]
    if missing:
        raise KeyError(f"record {record.index}: earlier turn record(s) {missing} have not run yet")
    responses = [_response(done[i]) for i in hist]
    it = iter(responses)
    messages = [Message.text("assistant", next(it) or "") if m.role == "assistant" else m for m in record.messages]
    degraded = any(r is None for r in responses)
    meta = {**record.meta, "history_pending": False, "history_degraded": degraded}
    return record.model_copy(update={"messages": messages, "meta": meta})


def turn_waves(records: list[Record]) -> list[list[Record]]:
    """Records grouped by turn number: wave k may run once every wave before it has predictions."""
    waves: dict[int, list[Record]] = {}
    for r in records:
        waves.setdefault(int(r.meta["turn"]), []).append(r)
    return [waves[k] for k in sorted(waves)]


def run_interactions(records: list[Record], infer: Callable[[list[Record]], list[Record]]) -> list[Record]:
    """Run ``infer`` wave by wave, filling each wave's history from the previous waves' outputs."""
    done: dict[int, Record] = {}
    for wave in turn_waves(records):
        for r in infer([fill_history(r, done) for r in wave]):
            done[r.index] = r
    return [done[r.index] for r in records]
