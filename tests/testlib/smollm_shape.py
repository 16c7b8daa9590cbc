"""A randomly initialised SmolLM2-135M-shaped checkpoint from the config and tokenizer shipped in tests/data: what
the GPU tests load on a machine with torch and transformers but no network, no Ray and no model files."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

SHAPE = Path(__file__).resolve().parents[1] / "data" / "smollm2-135m-shape"


def build_random_smollm(dst: Path, *, layers: int | None = None, seed: int = 0) -> Path:
    """Write the checkpoint to ``dst`` (``layers``: fewer decoder layers for a CPU run) and return it."""
    import torch
    import transformers

    dst.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(SHAPE / name, dst / name)
    with gzip.open(SHAPE / "tokenizer.json.gz", "rb") as src, open(dst / "tokenizer.json", "wb") as out:
        shutil.copyfileobj(src, out)
    cfg = transformers.AutoConfig.from_pretrained(dst)
    if layers is not None:
        cfg.num_hidden_layers = layers
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    model.save_pretrained(dst)
    return dst
