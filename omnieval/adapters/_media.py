"""Media helpers shared by the vision framework adapters (lmms-eval, VLMEvalKit).

Frameworks hand images over as base64 data URIs or as files in their own scratch dirs; a Record must stay small and
outlive those dirs, so the exact bytes sent to the engine are written once, content-addressed, under the omnieval
cache (``$OMNIEVAL_CACHE/media/<sha256>.<ext>``) and the Record references that path.
"""

from __future__ import annotations

import base64
import hashlib
import json
import mimetypes
from pathlib import Path
from typing import Any

from omnieval.core import AudioContent, Content, ImageContent, Message, TextContent, VideoContent


def media_dir() -> Path:
    from omnieval.core import cache_dir

    d = cache_dir() / "media"
    d.mkdir(parents=True, exist_ok=True)
    return d


def store_bytes(data: bytes, ext: str) -> str:
    path = media_dir() / f"{hashlib.sha256(data).hexdigest()}{ext}"
    if not path.exists():
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)  # atomic: concurrent actors may store the same image
    return str(path)


def store_url(url: str) -> str:
    """A ``data:`` URI becomes a cached file path; http(s) URLs and paths are kept as they are."""
    if not url.startswith("data:"):
        return url
    header, _, payload = url.partition(",")
    mime = header[5:].split(";")[0] or "application/octet-stream"
    ext = mimetypes.guess_extension(mime) or ".bin"
    return store_bytes(base64.b64decode(payload), ext)


def file_data_uri(path: str) -> str:
    """An image file as the ``image_url`` data URI OpenAI-compatible servers take."""
    if path.startswith(("http://", "https://", "data:")):
        return path
    mime = mimetypes.guess_type(path)[0] or "image/png"
    return f"data:{mime};base64,{base64.b64encode(Path(path).read_bytes()).decode()}"


def _part(p: dict[str, Any]) -> Content:
    kind = p.get("type")
    if kind == "text":
        return TextContent(value=str(p.get("text", "")))
    if kind == "image_url":
        return ImageContent(value=store_url(p["image_url"]["url"]))
    if kind == "video_url":
        return VideoContent(value=store_url(p["video_url"]["url"]))
    if kind == "audio_url":
        return AudioContent(value=store_url(p["audio_url"]["url"]))
    return TextContent(value=json.dumps(p))  # unknown part: kept visible rather than dropped


def record_messages(openai_messages: list[dict[str, Any]]) -> list[Message]:
    """OpenAI chat messages (as sent to the pool) → Record messages with ImageContent entries pointing at files."""
    out = []
    for m in openai_messages:
        c = m.get("content")
        parts: list[Content] = [TextContent(value=c)] if isinstance(c, str) else [_part(p) for p in c or []]
        out.append(Message(role=m["role"], content=parts))
    return out


def modality(records: list[Any]) -> str:
    kinds = set().union(*(r.modalities() for r in records)) if records else set()
    return next((k for k in ("video", "audio", "image") if k in kinds), "text")
