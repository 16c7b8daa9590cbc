"""Row loaders for the shipped speech (ASR, speech translation) and open-QA benchmarks.

Speech rows name a WAV file relative to the data dir plus its sha256. The manifest records only the JSONL's sha256,
so checking each clip against the sha256 written in its row makes that one hash cover the audio too: a replaced or
truncated clip fails loudly instead of silently changing the score.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from omnieval.benchmarks._loaders import read_jsonl
from omnieval.benchmarks._spec import BenchmarkSpec
from omnieval.core import AudioContent, OmnievalUserError

_LANG = {"en": "English", "fr": "French", "de": "German", "es": "Spanish"}


def _audio(spec: BenchmarkSpec, row: dict[str, Any]) -> AudioContent:
    path = (spec.data_path.parent / row["audio"]).resolve()
    if not path.is_file():
        raise OmnievalUserError(f"benchmark {spec.name}: audio file not found: {path} (row {row.get('id')})")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if row.get("sha256") and digest != row["sha256"]:
        raise OmnievalUserError(
            f"benchmark {spec.name}: {path} has sha256 {digest[:12]}…, the data file expects {row['sha256'][:12]}…; "
            "regenerate with scripts/make_audio_samples.py"
        )
    return AudioContent(value=str(path), sampling_rate=row.get("sampling_rate"))


def _speech_meta(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "audio": row["audio"],
        "duration_s": row.get("duration_s"),
        "speakers": row.get("speakers"),
        "source": row.get("source"),
    }


def speech_recognition(spec: BenchmarkSpec) -> Iterator[dict[str, Any]]:
    """One sample per clip: the audio entry, then the instruction; the label is the reference transcript."""
    return (
        {"id": r["id"], "media": [_audio(spec, r)], "fields": {}, "label": r["text"], "meta": _speech_meta(r)}
        for r in read_jsonl(spec)
    )


def speech_translation(spec: BenchmarkSpec) -> Iterator[dict[str, Any]]:
    """One sample per clip; the label is the reference translation, the source transcript stays in ``meta``."""
    return (
        {
            "id": r["id"],
            "media": [_audio(spec, r)],
            "fields": {"source_lang": _LANG[r["source_lang"]], "target_lang": _LANG[r["target_lang"]]},
            "label": r["translation"],
            "meta": {**_speech_meta(r), "source_text": r["source_text"], "target_lang": r["target_lang"]},
        }
        for r in read_jsonl(spec)
    )


def open_qa(spec: BenchmarkSpec) -> Iterator[dict[str, Any]]:
    """Question (with the "?" lm-eval's nq_open prompt also appends) → every accepted answer as the label; exact
    match and ANLS take the best alias."""
    for r in read_jsonl(spec):
        q = r["question"].strip()
        yield {"id": r.get("id"), "fields": {"question": q if q.endswith("?") else q + "?"},
               "label": list(r["answers"]), "meta": {}}  # fmt: skip


def clip_paths(spec: BenchmarkSpec) -> list[Path]:
    """Every audio file a speech benchmark ships, in row order."""
    return [(spec.data_path.parent / r["audio"]).resolve() for r in read_jsonl(spec)]
