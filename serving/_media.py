"""Media the engines cannot sample themselves: video as frames, audio at the Record's sampling rate (PyAV decodes).

Engines with native video (vLLM's Qwen2-VL / LLaVA-OneVision, SGLang) get the file and ``num_frames``; image-only
engines take a clip as ``num_frames`` still images, picked here by the Record's ``sampling_strategy``. Decoding uses
PyAV (FFmpeg's own demuxers and decoders) rather than anything hand-written; results are cached per (file, request)
so a benchmark that asks about one clip many times decodes it once.
"""

from __future__ import annotations

import base64
import io
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from omnieval.core import MissingDependencyError, OmnievalUserError

MEDIA_PIP = "pip install av pillow"
DEFAULT_NUM_FRAMES = 8
"""Frames taken from a clip whose Record leaves ``num_frames`` unset (Qwen2-VL and LLaVA-Video sample similarly)."""

Modality = Literal["text", "image", "video", "audio"]
MODALITIES: tuple[Modality, ...] = ("text", "image", "video", "audio")
VideoInput = Literal["native", "frames"]


def _av() -> Any:
    try:
        import av
    except ImportError as e:
        raise MissingDependencyError("decoding video/audio (PyAV)", MEDIA_PIP) from e
    return av


def _local(value: str, what: str) -> Path:
    if value.startswith(("http://", "https://", "data:")):
        raise OmnievalUserError(
            f"{what} {value[:80]!r} must be a local file to be sampled here; download it or send it to an engine "
            "that samples media itself (video_input: native)"
        )
    p = Path(value)
    if not p.is_file():
        raise OmnievalUserError(f"{what} not found: {p}")
    return p


def pick_frames(n_total: int, duration_s: float, num_frames: int, strategy: str | None, fps: float | None) -> list[int]:
    """Indices of the frames to keep. ``uniform``: ``num_frames`` evenly spaced (centre of each segment, as
    lmms-eval and Qwen-VL do); ``fps``: one frame every 1/fps seconds, capped at ``num_frames``."""
    if n_total <= 0:
        return []
    if strategy == "fps" and fps:
        native = n_total / duration_s if duration_s > 0 else fps
        step = max(native / fps, 1.0)
        idx = [int(i * step) for i in range(int(n_total / step))]
        return idx[:num_frames] if num_frames else idx
    n = min(num_frames, n_total)
    seg = n_total / n
    return [min(int(seg * i + seg / 2), n_total - 1) for i in range(n)]


@lru_cache(maxsize=64)
def video_frames(path: str, num_frames: int, strategy: str | None, fps: float | None) -> tuple[str, ...]:
    """JPEG data URIs of the sampled frames of a local video file."""
    av = _av()
    p = _local(path, "video")
    if strategy == "keyframe":
        raise OmnievalUserError(
            f"video {p.name}: sampling_strategy 'keyframe' needs an engine that samples video itself "
            "(video_input: native); use 'uniform' or 'fps' for frames"
        )
    with av.open(str(p)) as c:
        stream = c.streams.video[0]
        frames = [f.to_image() for f in c.decode(stream)]
        duration = float(stream.duration * stream.time_base) if stream.duration else float(c.duration or 0) / 1e6
    keep = pick_frames(len(frames), duration, num_frames, strategy, fps)
    out = []
    for i in keep:
        buf = io.BytesIO()
        frames[i].convert("RGB").save(buf, format="JPEG", quality=90)
        out.append("data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode())
    if not out:
        raise OmnievalUserError(f"video {p}: no decodable frames")
    return tuple(out)


def _mono(source: Any, rate: int, fmt: str) -> Any:
    """Mono samples of the first audio stream of ``source`` (a path or a file object) at ``rate`` Hz, as PyAV's
    resampler makes them in ``fmt`` (``s16``: int16, ``flt``: float32)."""
    import numpy as np

    av = _av()
    chunks = []
    with av.open(source) as c:
        rs = av.AudioResampler(format=fmt, layout="mono", rate=rate)
        for frame in c.decode(audio=0):
            chunks += [f.to_ndarray().reshape(-1) for f in rs.resample(frame)]
        chunks += [f.to_ndarray().reshape(-1) for f in rs.resample(None)]
    dtype = np.int16 if fmt == "s16" else np.float32
    return np.concatenate(chunks).astype(dtype) if chunks else np.zeros(0, dtype)


@lru_cache(maxsize=64)
def resampled_wav(path: str, rate: int) -> str:
    """Base64 16-bit mono WAV of a local audio file at ``rate`` Hz (the Record's ``sampling_rate``)."""
    import wave

    pcm = _mono(str(_local(path, "audio")), rate, "s16")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())
    return base64.b64encode(buf.getvalue()).decode()


def decode_audio(data_b64: str, rate: int) -> Any:
    """An ``input_audio`` payload (any container FFmpeg reads) as float32 mono samples at ``rate`` Hz, what a
    transformers feature extractor takes."""
    return _mono(io.BytesIO(base64.b64decode(data_b64)), rate, "flt")
