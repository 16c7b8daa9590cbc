"""Record messages → OpenAI chat messages; media become content parts the engine reads (images as data URIs)."""

from __future__ import annotations

import base64
import mimetypes
from pathlib import Path
from typing import Any

from omnieval._schema import AudioContent, ImageContent, Message, TextContent, VideoContent


def _data_uri(value: str, default_mime: str) -> str:
    if value.startswith(("http://", "https://", "data:")):
        return value
    p = Path(value)
    mime = mimetypes.guess_type(p.name)[0] or default_mime
    return f"data:{mime};base64,{base64.b64encode(p.read_bytes()).decode()}"


def to_openai(messages: list[Message]) -> list[dict[str, Any]]:
    """Text-only messages stay plain strings (every server takes those); media use typed parts."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if all(isinstance(c, TextContent) for c in m.content):
            out.append({"role": m.role, "content": m.text_value()})
            continue
        parts: list[dict[str, Any]] = []
        for c in m.content:
            if isinstance(c, TextContent):
                parts.append({"type": "text", "text": c.value})
            elif isinstance(c, ImageContent):
                parts.append({"type": "image_url", "image_url": {"url": _data_uri(c.value, "image/png")}})
            elif isinstance(c, AudioContent):
                fmt = Path(c.value).suffix.lstrip(".") or "wav"
                data = c.value if c.value.startswith("data:") else base64.b64encode(Path(c.value).read_bytes()).decode()
                parts.append({"type": "input_audio", "input_audio": {"data": data, "format": fmt}})
            elif isinstance(c, VideoContent):
                video: dict[str, Any] = {"url": _data_uri(c.value, "video/mp4")}
                if c.num_frames:
                    video["num_frames"] = c.num_frames
                parts.append({"type": "video_url", "video_url": video})
        out.append({"role": m.role, "content": parts})
    return out


def prompt_text(messages: list[dict[str, Any]]) -> str:
    """Concatenated text of OpenAI messages, for prefix-aware routing keys."""
    chunks = []
    for m in messages:
        c = m["content"]
        if isinstance(c, str):
            chunks.append(c)
        else:
            chunks.extend(p.get("text", "") for p in c if p.get("type") == "text")
    return "\n".join(chunks)
