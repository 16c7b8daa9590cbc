"""Engine feature flags: which input modalities a model served by an engine accepts, decided before any deploy.

The runner checks every benchmark's content against these at preflight, so a suite that sends video to a text-only
replica fails in one clear error instead of once per sample. What a checkpoint accepts is read from its own
``config.json`` (a ``vision_config`` means images, an ``audio_config`` audio; video when the architecture samples
clips itself), for llama.cpp from the ``--mmproj`` projector's GGUF metadata; ``ModelConfig.modalities`` overrides
it for weights these rules do not know (and says what an external server takes).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from serving._media import MODALITIES

# Architectures whose engines sample a clip themselves (vLLM / SGLang / transformers video processors).
NATIVE_VIDEO_MODEL_TYPES = frozenset(
    {"qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen2_5_omni", "qwen3_omni_moe", "llava_onevision",
     "llava_next_video", "internvl_chat", "internvl", "glm4v", "keye_vl", "minicpmv", "video_llava"}
)  # fmt: skip
AUDIO_MODEL_TYPES = frozenset({"ultravox", "qwen2_audio", "qwen2_5_omni", "qwen3_omni_moe", "phi4mm", "granite_speech"})


@dataclass(frozen=True)
class EngineFeatures:
    """What a model on an engine accepts; ``source`` says how that was decided (shown in preflight errors)."""

    modalities: frozenset[str]
    native_video: bool
    source: str

    def missing(self, wanted: set[str], video_input: str | None) -> set[str]:
        """Modalities in ``wanted`` this model cannot take (video counts as taken when sent as frames)."""
        have = set(self.modalities)
        if video_input == "frames" and "image" in have:
            have.add("video")
        return set(wanted) - have


ALL = EngineFeatures(frozenset(MODALITIES), True, "any (no model behind it)")
TEXT = EngineFeatures(frozenset({"text"}), False, "text-only engine")


def _find_config(model_dir: Path) -> dict[str, Any] | None:
    cfg = model_dir / "config.json" if model_dir.is_dir() else None
    return json.loads(cfg.read_text()) if cfg is not None and cfg.is_file() else None


def hf_features(model_dir: Path | None) -> EngineFeatures:
    """From a Hugging Face checkpoint's config.json; a GGUF file (converted to a text LM) or an unknown path: text."""
    if model_dir is None:
        return TEXT
    cfg = _find_config(model_dir)
    if cfg is None:
        why = "a GGUF file holds a text LM" if model_dir.suffix == ".gguf" else f"no config.json in {model_dir}"
        return EngineFeatures(frozenset({"text"}), False, why)
    inner = cfg.get("thinker_config") or cfg  # Qwen2.5-Omni nests the multimodal model as its thinker
    mt = str(cfg.get("model_type", ""))
    mods = {"text"}
    if "vision_config" in inner or "vision_tower" in inner or "mm_vision_tower" in inner:
        mods.add("image")
    if "audio_config" in inner or mt in AUDIO_MODEL_TYPES:
        mods.add("audio")
    native_video = mt in NATIVE_VIDEO_MODEL_TYPES and "image" in mods
    if native_video:
        mods.add("video")
    return EngineFeatures(frozenset(mods), native_video, f"{model_dir.name}/config.json (model_type {mt!r})")


def mmproj_features(mmproj: str | None) -> EngineFeatures:
    """llama.cpp: text, plus what the ``--mmproj`` projector encodes (its ``clip.has_*_encoder`` GGUF keys)."""
    if not mmproj:
        return EngineFeatures(frozenset({"text"}), False, "llama.cpp without mmproj")
    try:
        from gguf import GGUFReader
    except ImportError:
        from omnieval.core import MissingDependencyError

        raise MissingDependencyError("reading an mmproj's capabilities", "pip install gguf") from None
    fields = GGUFReader(Path(mmproj).expanduser()).fields

    def flag(key: str) -> bool:
        f = fields.get(key)
        return bool(f is not None and f.parts[f.data[0]][0])

    mods = {"text"} | ({"image"} if flag("clip.has_vision_encoder") else set())
    mods |= {"audio"} if flag("clip.has_audio_encoder") else set()
    return EngineFeatures(frozenset(mods), False, f"mmproj {Path(mmproj).name}")


def declared(modalities: Sequence[str], video_input: str | None) -> EngineFeatures:
    """``ModelConfig.modalities`` as given by the user."""
    return EngineFeatures(frozenset(modalities), video_input != "frames", "models[].modalities")
