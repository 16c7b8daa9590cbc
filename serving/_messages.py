"""Record messages → OpenAI chat messages; media become content parts the engine reads (images as data URIs)."""

from __future__ import annotations

import base64
import mimetypes
from pathlib import Path
from typing import Any

from omnieval.core import AudioContent, ImageContent, Message, TextContent, VideoContent
from serving._media import DEFAULT_NUM_FRAMES, VideoInput, resampled_wav, video_frames


def _data_uri(value: str, default_mime: str) -> str:
    if value.startswith(("http://", "https://", "data:")):
        return value
    p = Path(value)
    mime = mimetypes.guess_type(p.name)[0] or default_mime
    return f"data:{mime};base64,{base64.b64encode(p.read_bytes()).decode()}"


def to_openai(messages: list[Message], *, video_input: VideoInput = "native") -> list[dict[str, Any]]:
    """Text-only messages stay plain strings (every server takes those); media use typed parts.

    ``video_input="frames"`` sends a clip as ``num_frames`` image parts sampled by its ``sampling_strategy`` (for
    image-only models); audio with a ``sampling_rate`` is resampled to it, otherwise sent as the file is."""
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
                if c.sampling_rate and not c.value.startswith("data:"):
                    data, fmt = resampled_wav(c.value, c.sampling_rate), "wav"
                else:
                    fmt = Path(c.value).suffix.lstrip(".") or "wav"
                    data = (
                        c.value
                        if c.value.startswith("data:")
                        else base64.b64encode(Path(c.value).read_bytes()).decode()
                    )
                parts.append({"type": "input_audio", "input_audio": {"data": data, "format": fmt}})
            elif isinstance(c, VideoContent) and video_input == "frames":
                n = c.num_frames or DEFAULT_NUM_FRAMES
                for uri in video_frames(c.value, n, c.sampling_strategy, c.fps):
                    parts.append({"type": "image_url", "image_url": {"url": uri}})
            elif isinstance(c, VideoContent):
                video: dict[str, Any] = {"url": _data_uri(c.value, "video/mp4")}
                for k in ("num_frames", "sampling_strategy", "fps"):
                    if getattr(c, k) is not None:
                        video[k] = getattr(c, k)
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
