"""GGUF → Hugging Face safetensors checkpoint, for engines that cannot read a quantized GGUF (vLLM, SGLang).

vLLM does not load the SmolLM2 Q4_1 GGUF, so we de-quantize it once with transformers and cache the result under
``<cache>/models/<name>-hf/<sha256[:16]>/``: keyed by the GGUF's sha256 so a changed file is re-converted, and shared
by every replica on the node (a file lock makes concurrent replicas convert only once).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from omnieval.core import MissingDependencyError, OmnievalUserError, cache_dir, file_sha256

CONVERT_PIP = "pip install 'omnieval[transformers]'"
_STAMP = "omnieval-convert.json"


def converted_dir(gguf: Path, name: str | None = None) -> Path:
    """Where the checkpoint of ``gguf`` lives (whether or not it exists yet)."""
    stem = name or gguf.name.removesuffix(".gguf")
    return cache_dir() / "models" / f"{stem}-hf" / file_sha256(gguf)[:16]


def is_converted(dest: Path) -> bool:
    return (dest / _STAMP).is_file() and (dest / "config.json").is_file()


def _import_torch_transformers() -> tuple[object, object]:
    try:
        import gguf  # noqa: F401 - transformers needs it to read GGUF tensors
        import torch
        import transformers
    except ImportError:
        raise MissingDependencyError("GGUF → safetensors conversion", CONVERT_PIP) from None
    return torch, transformers


def _convert_into(gguf: Path, out: Path, dtype: str) -> None:
    torch, transformers = _import_torch_transformers()
    torch_dtype = getattr(torch, dtype)
    kw = {"gguf_file": gguf.name}
    tok = transformers.AutoTokenizer.from_pretrained(str(gguf.parent), **kw)  # type: ignore[attr-defined]
    loaded = transformers.AutoModelForCausalLM.from_pretrained(  # type: ignore[attr-defined]
        str(gguf.parent), dtype=torch_dtype, **kw
    )
    cfg = loaded.config
    # save_pretrained refuses a model that still carries the GGUF quantization config; the weights are already
    # de-quantized, so drop it and copy them into a fresh model built from the plain config.
    if hasattr(cfg, "quantization_config"):
        delattr(cfg, "quantization_config")
    fresh = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch_dtype)  # type: ignore[attr-defined]
    fresh.load_state_dict(loaded.state_dict(), strict=True)  # every tensor must carry over
    fresh.tie_weights()
    fresh.save_pretrained(str(out), safe_serialization=True)
    tok.save_pretrained(str(out))
    if getattr(loaded, "generation_config", None) is not None:
        loaded.generation_config.save_pretrained(str(out))


def gguf_to_hf(gguf: str | Path, *, name: str | None = None, dtype: str = "bfloat16") -> Path:
    """Return a local HF checkpoint directory for ``gguf``, converting it on first use (~30 s for 135M params)."""
    src = Path(gguf).expanduser()
    if not src.is_file():
        raise OmnievalUserError(f"GGUF file not found: {src}")
    if dtype not in ("bfloat16", "float16", "float32"):
        raise OmnievalUserError(f"conversion dtype must be bfloat16, float16 or float32, got {dtype!r}")
    dest = converted_dir(src, name)
    if is_converted(dest):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another replica may be converting the same file right now
        try:
            if is_converted(dest):
                return dest
            t0 = time.monotonic()
            tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=dest.parent))
            try:
                _convert_into(src, tmp, dtype)
                stamp = {"gguf": str(src), "sha256": file_sha256(src), "dtype": dtype, "seconds": time.monotonic() - t0}
                (tmp / _STAMP).write_text(json.dumps(stamp, indent=1))
                for f in tmp.iterdir():  # mkdtemp and safetensors create owner-only files; the cache is shared
                    f.chmod(0o644)
                tmp.chmod(0o755)
                if dest.exists():
                    shutil.rmtree(dest)  # a stale, unstamped leftover
                os.replace(tmp, dest)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return dest


def resolve_checkpoint(model_path: str, *, name: str | None = None, dtype: str = "bfloat16") -> str:
    """A GGUF file is converted; a directory (HF checkpoint) or a hub repo id is passed on unchanged."""
    p = Path(model_path).expanduser()
    if p.is_file() and p.suffix == ".gguf":
        return str(gguf_to_hf(p, name=name, dtype=dtype))
    if p.is_file():
        raise OmnievalUserError(f"{p}: expected a .gguf file or an HF checkpoint directory")
    return str(p) if p.exists() else model_path
