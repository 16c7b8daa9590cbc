"""A Qwen2-Audio-shaped audio-language *plumbing* model for transformers, around the real SmolLM2-135M-Instruct.

Its scores mean nothing: the Whisper-style audio encoder and the projector are untrained (seeded random). vLLM gets
the Ultravox shape (``_plumbing_audio.py``) because vLLM's Qwen2-Audio builds a Qwen2 language model; transformers
has no Ultravox class but builds Qwen2-Audio's language model from any text config, so this is the shape it serves.
The processor is transformers' own ``Qwen2AudioProcessor`` (Whisper log-mel features at 16 kHz; one ``<|AUDIO|>``
placeholder expands to one token per 40 ms of real audio, so prompts grow with clip length).
"""

from __future__ import annotations

import json
from pathlib import Path

AUDIO_TOKENS = ["<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}"
    "{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}"
    "{% elif part['type'] in ['audio', 'input_audio', 'audio_url'] %}{{ '<|audio_bos|><|AUDIO|><|audio_eos|>' }}"
    "{% endif %}{% endfor %}{% endif %}"
    "{{ '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def build_audio_hf_model(lm_dir: Path, out: Path) -> None:
    """Write the plumbing Qwen2-Audio model (weights, tokenizer, processor, chat template) into ``out``."""
    import torch
    from transformers import (
        AutoModelForCausalLM,
        AutoTokenizer,
        Qwen2AudioConfig,
        Qwen2AudioForConditionalGeneration,
        WhisperFeatureExtractor,
    )
    from transformers.models.qwen2_audio import Qwen2AudioProcessor

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(lm_dir)
    tok.add_special_tokens({"additional_special_tokens": AUDIO_TOKENS})
    tok.chat_template = CHAT_TEMPLATE
    lm = AutoModelForCausalLM.from_pretrained(lm_dir, dtype=torch.float32)
    text_cfg = lm.config.to_dict()
    text_cfg.pop("quantization_config", None)
    text_cfg["vocab_size"] = len(tok)
    cfg = Qwen2AudioConfig(
        audio_config={"d_model": 256, "encoder_layers": 2, "encoder_attention_heads": 4, "encoder_ffn_dim": 1024,
                      "num_mel_bins": 128, "max_source_positions": 1500},
        text_config=text_cfg,
        audio_token_index=tok.convert_tokens_to_ids("<|AUDIO|>"),
    )  # fmt: skip
    model = Qwen2AudioForConditionalGeneration(cfg)
    src = lm.model.state_dict()
    emb = src["embed_tokens.weight"]
    src["embed_tokens.weight"] = torch.cat([emb, emb.mean(0, keepdim=True).expand(len(tok) - emb.shape[0], -1)], 0)
    target = model.model.language_model
    missing, unexpected = target.load_state_dict(src, strict=False)
    if unexpected or [k for k in missing if "rotary" not in k]:
        raise RuntimeError(f"language weights did not map: missing={missing} unexpected={unexpected}")
    # an untied copy: transformers 5 refuses to save a tie this class does not declare
    model.lm_head.weight = torch.nn.Parameter(target.embed_tokens.weight.detach().clone())
    model = model.to(torch.bfloat16)
    model.generation_config.eos_token_id = tok.convert_tokens_to_ids("<|im_end|>")
    processor = Qwen2AudioProcessor(
        feature_extractor=WhisperFeatureExtractor(feature_size=128), tokenizer=tok, chat_template=CHAT_TEMPLATE
    )
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    tok.save_pretrained(out)
    (out / "PLUMBING.md").write_text(
        "# omnieval plumbing audio LM (transformers): scores mean nothing\n\n"
        "SmolLM2-135M-Instruct (Apache-2.0) language weights in a Qwen2-Audio shape with an untrained, seeded audio\n"
        "encoder. Built by scripts/make_plumbing_models.py to test that audio reaches the transformers engine.\n"
    )
    (out / "omnieval-plumbing.json").write_text(json.dumps({"kind": "audio-hf"}))
