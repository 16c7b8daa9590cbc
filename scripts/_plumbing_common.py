"""What the plumbing model builders share: SmolLM2's own ChatML template, extended with media placeholders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def chatml_template(media: dict[tuple[str, ...], str]) -> str:
    """SmolLM2's chat template (so text prompts are templated exactly as for the text-only model) where a content
    part of one of the given types becomes its placeholder, e.g. ``{("image", "image_url"): "<image>"}``."""
    branches = "".join(f"{{% elif part['type'] in {list(types)!r} %}}{{{{ {tok!r} }}}}" for types, tok in media.items())
    return (
        "{% for message in messages %}"
        "{% if loop.first and messages[0]['role'] != 'system' %}"
        f"{{{{ '<|im_start|>system\\n{SYSTEM}<|im_end|>\\n' }}}}"
        "{% endif %}"
        "{{ '<|im_start|>' + message['role'] + '\\n' }}"
        "{% if message['content'] is string %}{{ message['content'] }}"
        "{% else %}{% for part in message['content'] %}"
        "{% if part['type'] == 'text' %}{{ part['text'] }}" + branches + "{% endif %}{% endfor %}{% endif %}"
        "{{ '<|im_end|>\\n' }}"
        "{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
    )


def language_model(lm_dir: Path, specials: list[str], template: str) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """(tokenizer with ``specials`` added and ``template`` set, the LM's text config sized to it, the LM's weights
    with the new tokens' embedding rows set to the mean row: the model replaces them with media embeddings)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(lm_dir)
    tok.add_special_tokens({"additional_special_tokens": specials})
    tok.chat_template = template
    lm = AutoModelForCausalLM.from_pretrained(lm_dir, dtype=torch.float32)
    text_cfg = lm.config.to_dict()
    text_cfg.pop("quantization_config", None)
    text_cfg["vocab_size"] = len(tok)
    src = lm.model.state_dict()
    emb = src["embed_tokens.weight"]
    src["embed_tokens.weight"] = torch.cat([emb, emb.mean(0, keepdim=True).expand(len(tok) - emb.shape[0], -1)], 0)
    return tok, text_cfg, src


def load_language_weights(target: Any, weights: dict[str, Any]) -> None:
    missing, unexpected = target.load_state_dict(weights, strict=False)
    if unexpected or [k for k in missing if "rotary" not in k]:
        raise RuntimeError(f"language weights did not map: missing={missing} unexpected={unexpected}")


def save(out: Path, model: Any, processor: Any, tok: Any, note: str, kind: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    tok.save_pretrained(out)
    (out / "PLUMBING.md").write_text(note)
    (out / "omnieval-plumbing.json").write_text(json.dumps({"kind": kind}))
