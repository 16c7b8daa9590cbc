"""Media preparation on the client side (PyAV): video as frames by the Record's sampling fields, audio at its rate."""

from __future__ import annotations

import base64
import io
import json
import wave
from pathlib import Path

import pytest
from testlib.tiers import need

from omnieval.core import AudioContent, Message, OmnievalUserError, TextContent, VideoContent
from serving._features import hf_features
from serving._managed import ManagedServer
from serving._media import pick_frames, resampled_wav, video_frames
from serving._messages import to_openai

need("av")

DATA = Path(__file__).resolve().parents[2] / "omnieval" / "benchmarks" / "data"
CLIP = DATA / "omniassist_sample" / "media" / "II_000" / "t0.mp4"
MP3 = DATA / "omniassist_sample" / "media" / "II_000" / "t0.mp3"


def test_pick_frames_uniform_centres_and_fps_step() -> None:
    assert pick_frames(100, 4.0, 4, "uniform", None) == [12, 37, 62, 87]
    assert pick_frames(3, 1.0, 8, None, None) == [0, 1, 2]  # never more frames than the clip has
    # 25 fps clip of 4 s sampled at 2 fps: every 12.5th frame, capped at num_frames
    assert pick_frames(100, 4.0, 32, "fps", 2.0) == [0, 12, 25, 37, 50, 62, 75, 87]
    assert pick_frames(100, 4.0, 3, "fps", 2.0) == [0, 12, 25]


def _counting_clip(path: Path, n: int = 30) -> Path:
    """An mp4 whose frame i is grey level 8*i, so a sampled frame says which one it was."""
    import av
    import numpy as np

    with av.open(str(path), "w") as c:
        s = c.add_stream("mpeg4", rate=10)
        s.width, s.height, s.pix_fmt = 64, 48, "yuv420p"
        for i in range(n):
            img = np.full((48, 64, 3), 8 * i, dtype=np.uint8)
            c.mux(s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")))
        c.mux(s.encode())
    return path


def test_video_becomes_num_frames_images_only_when_asked(tmp_path: Path) -> None:
    clip = _counting_clip(tmp_path / "count.mp4")
    msgs = [Message(role="user", content=[VideoContent(value=str(clip), num_frames=3, sampling_strategy="uniform"),
                                          TextContent(value="What happens?")])]  # fmt: skip
    native = to_openai(msgs)[0]["content"]
    assert [p["type"] for p in native] == ["video_url", "text"]
    assert native[0]["video_url"]["num_frames"] == 3 and native[0]["video_url"]["url"].startswith("data:video/mp4")
    frames = to_openai(msgs, video_input="frames")[0]["content"]
    assert [p["type"] for p in frames] == ["image_url"] * 3 + ["text"]
    from PIL import Image

    imgs = [Image.open(io.BytesIO(base64.b64decode(p["image_url"]["url"].split(",", 1)[1]))) for p in frames[:3]]
    levels = [round(im.convert("L").getpixel((32, 24)) / 8) for im in imgs]
    assert levels == [5, 15, 25]  # the centres of three equal segments of 30 frames
    fps = to_openai([Message(role="user", content=[VideoContent(value=str(clip), num_frames=8, sampling_strategy="fps",
                                                                fps=2.0)])], video_input="frames")  # fmt: skip
    assert len(fps[0]["content"]) == 6  # 3 s at 2 fps
    assert len(video_frames(str(CLIP), 6, "uniform", None)) == 6  # a real benchmark clip decodes too


def test_keyframe_and_remote_video_as_frames_are_user_errors() -> None:
    with pytest.raises(OmnievalUserError, match="keyframe"):
        video_frames(str(CLIP), 4, "keyframe", None)
    with pytest.raises(OmnievalUserError, match="local file"):
        video_frames("https://example.com/a.mp4", 4, "uniform", None)
    with pytest.raises(OmnievalUserError, match="not found"):
        video_frames("/nonexistent/clip.mp4", 4, "uniform", None)


def test_audio_is_resampled_to_the_records_rate() -> None:
    part = to_openai([Message(role="user", content=[AudioContent(value=str(MP3), sampling_rate=16000)])])[0]
    audio = part["content"][0]["input_audio"]
    assert audio["format"] == "wav"
    with wave.open(io.BytesIO(base64.b64decode(audio["data"]))) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (16000, 1, 2)
        seconds = w.getnframes() / 16000
    with wave.open(io.BytesIO(base64.b64decode(resampled_wav(str(MP3), 8000)))) as w:
        assert abs(w.getnframes() / 8000 - seconds) < 0.1  # same duration at either rate
    as_is = to_openai([Message(role="user", content=[AudioContent(value=str(MP3))])])[0]["content"][0]
    assert as_is["input_audio"]["format"] == "mp3"
    assert base64.b64decode(as_is["input_audio"]["data"]) == MP3.read_bytes()


def _config(tmp_path: Path, cfg: dict) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return tmp_path


def test_hf_features_from_config_json(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    vlm = hf_features(_config(tmp_path / "a", {"model_type": "idefics3", "vision_config": {}}))
    assert vlm.modalities == {"text", "image"} and not vlm.native_video
    (tmp_path / "b").mkdir()
    qwen = hf_features(_config(tmp_path / "b", {"model_type": "qwen2_5_vl", "vision_config": {}}))
    assert qwen.modalities == {"text", "image", "video"} and qwen.native_video
    (tmp_path / "c").mkdir()
    ultravox = hf_features(_config(tmp_path / "c", {"model_type": "ultravox", "audio_config": {}}))
    assert ultravox.modalities == {"text", "audio"}
    (tmp_path / "d").mkdir()
    omni = hf_features(_config(tmp_path / "d", {"model_type": "qwen2_5_omni",
                                                 "thinker_config": {"vision_config": {}, "audio_config": {}}}))  # fmt: skip
    assert omni.modalities == {"text", "image", "video", "audio"}
    assert hf_features(tmp_path / "m.gguf").modalities == {"text"}
    assert vlm.missing({"text", "video"}, "frames") == set() and vlm.missing({"video"}, None) == {"video"}


def test_server_command_keeps_json_arguments() -> None:
    s = ManagedServer("t", ["srv", "--host", "{host}", "--port", "{port}", "--limit-mm-per-prompt", '{"image": 8}'])
    s.port = 1234
    assert s.command() == ["srv", "--host", "127.0.0.1", "--port", "1234", "--limit-mm-per-prompt", '{"image": 8}']


def test_vllm_gets_the_records_clip_sampling_others_plain_video_url() -> None:
    from omnieval.core import GenerationOptions
    from serving._openai import chat_payload
    from serving._types import GenerationRequest

    msgs = to_openai([Message(role="user", content=[VideoContent(value="https://x/clip.mp4", num_frames=6,
                                                                 sampling_strategy="fps", fps=2.0)])])  # fmt: skip
    req = GenerationRequest(request_id="v", messages=msgs, options=GenerationOptions())
    v = chat_payload(req, "m", "vllm")
    assert v["media_io_kwargs"] == {"video": {"num_frames": 6, "fps": 2.0}}
    assert v["messages"][0]["content"][0] == {"type": "video_url", "video_url": {"url": "https://x/clip.mp4"}}
    plain = chat_payload(req, "m")
    assert "media_io_kwargs" not in plain and plain["messages"] == v["messages"]
    assert msgs[0]["content"][0]["video_url"]["num_frames"] == 6  # the request itself is not modified
