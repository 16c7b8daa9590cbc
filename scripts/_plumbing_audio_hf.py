"""A Qwen2-Audio-shaped audio-language *plumbing* model for transformers, around the real SmolLM2-135M-Instruct.

Its scores mean nothing: the Whisper-style audio encoder and the projector are untrained (seeded random). vLLM gets
the Ultravox shape (``_plumbing_audio.py``) because vLLM's Qwen2-Audio builds a Qwen2 language model; transformers
has no Ultravox class but builds Qwen2-Audio's language model from any text config, so this is the shape it serves.
The processor is transformers' own ``Qwen2AudioProcessor`` (Whisper log-mel features at 16 kHz; one ``<|AUDIO|>``
placeholder expands to one token per 40 ms of real audio, so prompts grow with clip length).
"""

from __future__ import annotations

from pathlib import Path

from _plumbing_common import chatml_template, language_model, load_language_weights, save

AUDIO_TOKENS = ["<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>"]
CHAT_TEMPLATE = chatml_template({("audio", "input_audio", "audio_url"): "<|audio_bos|><|AUDIO|><|audio_eos|>"})


def build_audio_hf_model(lm_dir: Path, out: Path) -> None:
    """Write the plumbing Qwen2-Audio model (weights, tokenizer, processor, chat template) into ``out``."""
    import torch
    from transformers import Qwen2AudioConfig, Qwen2AudioForConditionalGeneration, WhisperFeatureExtractor
    from transformers.models.qwen2_audio import Qwen2AudioProcessor

    tok, text_cfg, weights = language_model(lm_dir, AUDIO_TOKENS, CHAT_TEMPLATE)
    cfg = Qwen2AudioConfig(
        audio_config={"d_model": 256, "encoder_layers": 2, "encoder_attention_heads": 4, "encoder_ffn_dim": 1024,
                      "num_mel_bins": 128, "max_source_positions": 1500},
        text_config=text_cfg,
        audio_token_index=tok.convert_tokens_to_ids("<|AUDIO|>"),
    )  # fmt: skip
    model = Qwen2AudioForConditionalGeneration(cfg)
    target = model.model.language_model
    load_language_weights(target, weights)
    # an untied copy: transformers 5 refuses to save a tie this class does not declare
    model.lm_head.weight = torch.nn.Parameter(target.embed_tokens.weight.detach().clone())
    model = model.to(torch.bfloat16)
    model.generation_config.eos_token_id = tok.convert_tokens_to_ids("<|im_end|>")
    processor = Qwen2AudioProcessor(
        feature_extractor=WhisperFeatureExtractor(feature_size=128), tokenizer=tok, chat_template=CHAT_TEMPLATE
    )
    save(out, model, processor, tok, kind="audio-hf", note=(
        "# omnieval plumbing audio LM (transformers): scores mean nothing\n\n"
        "SmolLM2-135M-Instruct (Apache-2.0) language weights in a Qwen2-Audio shape with an untrained, seeded audio\n"
        "encoder. Built by scripts/make_plumbing_models.py to test that audio reaches the transformers engine.\n"
    ))  # fmt: skip
