"""EgoMem parquet split -> one Record per dialogue turn, with the user's audio, memory and in-session history.

What a turn's record holds (the card gives the data, not the model-side protocol, so these are our choices):

* system message: ``SYSTEM_PROMPT`` plus the memory block — the session's ``profile_summary`` and, with
  ``memory="profile"`` (default), the whole ``relation_graph`` (the model must pick what matters);
  ``memory="support"`` gives the turn's ``support_dict`` instead (oracle retrieval); ``memory="none"`` omits memory;
* the earlier turns of the same session as history: the user's audio, then the ground-truth ``bot_txt`` as the
  assistant turn (in a full-duplex recording the bot channel *is* the ground truth, so history is teacher-forced);
* the current user turn: ``user_wav[user_stamp:bot_stamp]`` written once to a 16-bit PCM WAV at the card's
  ``sampling_rate`` (``user_input="text"`` sends the transcript instead, ``"audio+text"`` both).

Earlier sessions reach later ones only through ``profile_summary.person_summary``, as the card describes it.
``limit`` counts dialogue sessions, never splitting one, so every kept turn keeps its full history.
WAVs go to ``cache_dir`` (default ``$OMNIEVAL_CACHE`` or ``~/.cache/omnieval``, under ``egomem/<split>-<id>``),
keyed by the shards' paths, sizes and mtimes, and are rewritten only when missing.
"""

from __future__ import annotations

import hashlib
import os
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow.parquet as pq

from omnieval.benchmarks.egomem._prompt import SYSTEM_PROMPT, memory_block
from omnieval.benchmarks.egomem._schema import SPLITS, DialogRecord, DialogTurn, EgoMemSample, check_arrow_schema
from omnieval.core import AudioContent, Content, GenerationOptions, Message, Record, TextContent

Memory = Literal["profile", "support", "none"]
UserInput = Literal["audio", "text", "audio+text"]


def split_files(data_dir: Path, split: str) -> list[Path]:
    """The split's parquet shards, ``data/<split>-*.parquet`` as the card's ``configs`` declares."""
    if split not in SPLITS:
        raise ValueError(f"unknown EgoMem split {split!r}; expected one of {SPLITS}")
    files = sorted((Path(data_dir) / "data").glob(f"{split}-*.parquet"))
    if not files:
        raise FileNotFoundError(f"no {split}-*.parquet under {Path(data_dir) / 'data'}")
    return files


def iter_samples(data_dir: Path, split: str) -> Iterator[tuple[EgoMemSample, np.ndarray, np.ndarray]]:
    """(annotation, user_wav, bot_wav) per row, one row at a time (real rows are tens of MB)."""
    for path in split_files(data_dir, split):
        pf = pq.ParquetFile(path)
        check_arrow_schema(pf.schema_arrow, where=str(path))
        for batch in pf.iter_batches(batch_size=1):
            for i in range(batch.num_rows):
                row = batch.slice(i, 1)
                sample = EgoMemSample.model_validate(
                    {k: row.column(k)[0].as_py() for k in ("meta", "sampling_rate", "dialog_records")}
                )
                user = row.column("user_wav")[0].values.to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
                bot = row.column("bot_wav")[0].values.to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
                if len(user) != len(bot):
                    raise ValueError(f"{path}: sample {sample.meta}: user_wav and bot_wav lengths differ")
                for s in sample.dialog_records:
                    if s.dialog_span[1] > len(user):
                        raise ValueError(f"{path}: session {s.meta!r} span {s.dialog_span} exceeds the recording")
                yield sample, user, bot


def write_wav(path: Path, audio: np.ndarray, sampling_rate: int) -> None:
    """Mono 16-bit PCM WAV, the format every audio engine reads."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pcm = (np.clip(audio, -1.0, 1.0) * 32767.0).round().astype("<i2")
    tmp = path.with_suffix(".tmp")
    with wave.open(str(tmp), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sampling_rate)
        w.writeframes(pcm.tobytes())
    tmp.replace(path)


def default_cache_dir(data_dir: Path, split: str) -> Path:
    root = Path(os.environ.get("OMNIEVAL_CACHE", Path.home() / ".cache" / "omnieval"))
    key = "|".join(f"{p.resolve()}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in split_files(data_dir, split))
    return root / "egomem" / f"{split}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def _user_content(turn: DialogTurn, wav: Path, sr: int, user_input: UserInput) -> list[Content]:
    out: list[Content] = []
    if user_input in ("audio", "audio+text"):
        out.append(AudioContent(value=str(wav), sampling_rate=sr))
    if user_input in ("text", "audio+text"):
        out.append(TextContent(value=turn.user_txt))
    return out


def _system(session: DialogRecord, turn: DialogTurn, memory: Memory) -> Message:
    if memory == "none":
        return Message.text("system", SYSTEM_PROMPT)
    people, title = (session.relation_graph, "关系图谱") if memory == "profile" else (turn.support_dict, "相关记忆")
    return Message.text(
        "system", SYSTEM_PROMPT + "\n\n" + memory_block(session.profile_summary, people, people_title=title)
    )


def load_records(
    data_dir: Path,
    *,
    split: str,
    model: str = "",
    benchmark: str | None = None,
    memory: Memory = "profile",
    user_input: UserInput = "audio",
    sampling_rate: int | None = 16000,
    cache_dir: Path | None = None,
    generation: GenerationOptions | None = None,
    limit: int | None = None,
) -> list[Record]:
    """One Record per turn of ``split`` (``original`` or ``with_noise``); ``limit`` counts sessions.

    ``sampling_rate``: the rate audio reaches the model at (the 8 kHz turns are resampled: Whisper-family audio
    encoders take 16 kHz); None keeps the dataset's own rate."""
    data_dir = Path(data_dir)
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir(data_dir, split)
    bench = benchmark or f"egomem_{split}"
    gen = generation or GenerationOptions()
    records: list[Record] = []
    n_sessions = 0
    for sample, user_wav, _bot in iter_samples(data_dir, split):
        sr = sample.sampling_rate
        for si, session in enumerate(sample.dialog_records):
            if limit is not None and n_sessions >= limit:
                return records
            n_sessions += 1
            history: list[Message] = []
            n_turns = len(session.dialog_turn_contents)
            for ti, turn in enumerate(session.dialog_turn_contents):
                wav = cache / str(sample.meta) / f"s{si}_t{ti}_user.wav"
                segment = user_wav[turn.user_stamp : turn.bot_stamp]
                if not wav.exists() or wav.stat().st_size != 44 + 2 * len(segment):
                    write_wav(wav, segment, sr)
                user_msg = Message(role="user", content=_user_content(turn, wav, sampling_rate or sr, user_input))
                records.append(
                    Record(
                        benchmark=bench,
                        index=len(records),
                        model=model,
                        sample_id=f"{sample.meta}/{si}/{ti + 1}",
                        messages=[_system(session, turn, memory), *history, user_msg],
                        generation_options=gen,
                        label=turn.bot_txt,
                        meta={
                            "split": split,
                            "sample_meta": sample.meta,
                            "session": si,
                            "session_meta": session.meta,
                            "session_key": f"{sample.meta}/{si}",
                            "turn": ti,
                            "turn_key": str(ti + 1),
                            "n_turns": n_turns,
                            "speaker": turn.speaker,
                            "person": session.profile_summary.person,
                            "person_summary": session.profile_summary.person_summary,
                            "user_txt": turn.user_txt,
                            "fact_kwd": turn.fact_kwd,
                            "relation_kwd": turn.relation_kwd,
                            "support_dict": [p.model_dump() for p in turn.support_dict],
                            "user_span": [turn.user_stamp, turn.bot_stamp],
                            "bot_span": [turn.bot_stamp, turn.bot_stamp_end_audio],
                            "sampling_rate": sr,
                            "memory": memory,
                            "user_input": user_input,
                        },
                    )
                )
                history += [user_msg, Message.text("assistant", turn.bot_txt)]
    return records
