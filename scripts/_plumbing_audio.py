"""Build a *plumbing* audio-language model for vLLM on CPU: its scores mean nothing.

No small audio-language model ships offline, so this assembles one in vLLM's Ultravox layout
(`vllm/model_executor/models/ultravox.py`, architecture ``UltravoxModel``): an untrained Whisper-shaped
encoder + a feed-forward projector (random, seed 0) in front of the real SmolLM2-135M-Instruct.
Text-only answers are coherent (the LM is real); answers about audio are noise (the tower never
trained). It exists only to prove that audio reaches a model through vLLM's own multimodal path
(OpenAI ``input_audio``/``audio_url`` → decode → Whisper log-mel features → encoder → placeholder
tokens whose count grows with audio length).

Why each choice:
- Ultravox, not Qwen2-Audio: vLLM's Ultravox wraps *any* vLLM-registered text model (Llama here),
  while its Qwen2-Audio hard-wires a Qwen2 LM and failed on SmolLM2's weights.
- Whisper encoder d_model 256, 2 layers, 4 heads: tiny (<3 M params, builds in seconds) but keeps
  Whisper's 80 mel bins and 1500 positions, i.e. the real 30 s / 3000-frame chunk vLLM expects.
- ``<|audio|>`` added as one special token (id = old vocab size) so vLLM's prompt replacement
  matches a single id; its embedding row is the mean row (never seen: vLLM swaps in audio embeds).
- Projector outputs are scaled to the LM embedding RMS so the LM is not swamped by huge inputs.
- Transformers has no Ultravox processor, and vLLM 0.32 ships none either, so a small processor
  (``ultravox_processing.py``, written into the model dir) is loaded as remote code: serve with
  ``--trust-remote-code``. It pads to the longest clip only (not to 30 s), so the number of audio
  tokens is ceil(mel_frames / 16) ≈ 6.25 per second; clips over 30 s are split into 30 s chunks.
- The chat template emits ``<|audio|>`` for audio parts (vLLM passes them as ``{"type": "audio"}``).
"""

from __future__ import annotations

import json
import math
import pathlib
import shutil

import torch
from _plumbing_common import chatml_template

AUDIO_TOKEN = "<|audio|>"
D_MODEL, LAYERS, HEADS, FFN = 256, 2, 4, 1024
STACK, PROJ_HIDDEN = 8, 1024  # swiglu halves PROJ_HIDDEN -> 512 before the output linear

CHAT_TEMPLATE = chatml_template({("audio", "input_audio", "audio_url"): AUDIO_TOKEN})

# Remote-code processor (no Ultravox processor in transformers 5.x or vLLM 0.32). It implements only
# what vLLM's Ultravox processing calls: ``__call__(text, audios, sampling_rate,
# include_audio_num_chunks)`` → audio_values / audio_lens / audio_token_len / audio_num_chunks.
PROCESSOR_PY = '''"""Minimal Ultravox-style processor for a plumbing model (see scripts/_plumbing_audio.py)."""
import json
import math
import pathlib

import numpy as np
import torch
import transformers


class UltravoxProcessor(transformers.ProcessorMixin):
    def __init__(self, audio_processor=None, tokenizer=None, stack_factor: int = 8,
                 encoder_ds_factor: int = 2, audio_context_size: int = 3000,
                 audio_placeholder: str = "<|audio|>"):
        self.stack_factor = stack_factor
        self.encoder_ds_factor = encoder_ds_factor
        self.audio_context_size = audio_context_size
        self.audio_placeholder = audio_placeholder
        self.audio_token_replacement = audio_placeholder  # vLLM overrides both of these
        self.audio_replacement_token_id = tokenizer.convert_tokens_to_ids(audio_placeholder)
        super().__init__(audio_processor=audio_processor, tokenizer=tokenizer)

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        cfg = {}
        p = pathlib.Path(path) / "processor_config.json"
        if p.exists():
            cfg = {k: v for k, v in json.loads(p.read_text()).items()
                   if k in ("stack_factor", "encoder_ds_factor", "audio_context_size", "audio_placeholder")}
        fe = transformers.WhisperFeatureExtractor.from_pretrained(path)
        tok = transformers.AutoTokenizer.from_pretrained(path)
        return cls(audio_processor=fe, tokenizer=tok, **cfg)

    def __call__(self, text=None, audio=None, audios=None, sampling_rate=None, return_tensors="pt",
                 include_audio_num_chunks: bool = False, **kwargs):
        audios = audios if audios is not None else audio
        if audios is None:
            audios = []
        elif not isinstance(audios, (list, tuple)):
            audios = [audios]
        fe = self.audio_processor
        hop = fe.hop_length
        data, per_audio_tokens = {}, []
        if len(audios):
            arrs = [np.asarray(a.numpy() if isinstance(a, torch.Tensor) else a, dtype=np.float32)
                    for a in audios]
            arrs = [np.pad(a, (0, 2 * hop - len(a))) if len(a) < 2 * hop else a for a in arrs]
            x = fe(arrs, sampling_rate=sampling_rate or fe.sampling_rate, padding="longest",
                   pad_to_multiple_of=hop, truncation=False, return_attention_mask=True,
                   return_tensors="np")
            feats = torch.as_tensor(x["input_features"])
            lens = torch.as_tensor(x["attention_mask"]).sum(-1)
            ctx = self.audio_context_size
            chunks, clens, nchunks = [], [], []
            for f, n in zip(feats, lens.tolist()):
                offs = list(range(0, int(n), ctx))
                nchunks.append(len(offs))
                for off in offs:
                    c = f[:, off:off + ctx]
                    if off > 0 and c.shape[-1] < ctx:
                        c = torch.nn.functional.pad(c, (0, ctx - c.shape[-1]))
                    chunks.append(c)
                    clens.append(min(int(n) - off, ctx))
            width = max(c.shape[-1] for c in chunks)
            data["audio_values"] = torch.stack(
                [torch.nn.functional.pad(c, (0, width - c.shape[-1])) for c in chunks])
            data["audio_lens"] = torch.tensor(clens)
            ds = self.encoder_ds_factor * self.stack_factor
            data["audio_token_len"] = torch.tensor([math.ceil(n / ds) for n in clens], dtype=torch.int)
            data["audio_batch_size"] = torch.tensor([len(chunks)])
            if include_audio_num_chunks:
                data["audio_num_chunks"] = torch.tensor(nchunks)
            tl = data["audio_token_len"].tolist()
            start = 0
            for k in nchunks:
                per_audio_tokens.append(sum(tl[start:start + k]))
                start += k
        if text is not None:
            if not isinstance(text, str):
                text = text[0]
            parts = text.split(self.audio_placeholder)
            if len(parts) - 1 != len(per_audio_tokens):
                raise ValueError(f"{len(parts) - 1} audio placeholders for {len(per_audio_tokens)} audios")
            ids = []
            for i, part in enumerate(parts):
                ids += self.tokenizer(part, add_special_tokens=False)["input_ids"]
                if i < len(per_audio_tokens):
                    ids += [self.audio_replacement_token_id] * per_audio_tokens[i]
            data["input_ids"] = [ids]
            data["attention_mask"] = [[1] * len(ids)]
        return transformers.BatchFeature(data=data, tensor_type=return_tensors)

    def batch_decode(self, *args, **kwargs):
        return self.tokenizer.batch_decode(*args, **kwargs)

    def decode(self, *args, **kwargs):
        return self.tokenizer.decode(*args, **kwargs)
'''


def _bf16(sd: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {prefix + k: v.detach().to(torch.bfloat16).contiguous() for k, v in sd.items()}


def build_audio_model(lm_dir: pathlib.Path, out: pathlib.Path) -> None:
    """Write an Ultravox-layout model dir (real SmolLM2 LM + untrained Whisper tower) into ``out``."""
    from safetensors.torch import load_file, save_file
    from transformers import AutoTokenizer, WhisperConfig, WhisperFeatureExtractor
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    torch.manual_seed(0)
    lm_dir, out = pathlib.Path(lm_dir), pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)

    tok = AutoTokenizer.from_pretrained(lm_dir)
    tok.add_tokens([AUDIO_TOKEN], special_tokens=True)
    audio_id, vocab = tok.convert_tokens_to_ids(AUDIO_TOKEN), len(tok)
    tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(out)

    text_cfg = json.loads((lm_dir / "config.json").read_text())
    for k in ("architectures", "_model_name_or_path", "transformers_version", "dtype"):
        text_cfg.pop(k, None)
    text_cfg["vocab_size"] = vocab

    # Language model: real weights, embedding grown by the <|audio|> row (mean of the others).
    lm = load_file(lm_dir / "model.safetensors")
    emb = lm["model.embed_tokens.weight"].float()
    lm["model.embed_tokens.weight"] = torch.cat([emb, emb.mean(0, keepdim=True).expand(vocab - emb.shape[0], -1)])
    lm.pop("lm_head.weight", None)  # tied
    tensors = _bf16(lm, "language_model.")

    # Audio tower: Whisper encoder shape, random init (HF init incl. sinusoidal positions).
    wcfg = WhisperConfig(
        d_model=D_MODEL,
        encoder_layers=LAYERS,
        encoder_attention_heads=HEADS,
        encoder_ffn_dim=FFN,
        decoder_layers=LAYERS,
        decoder_attention_heads=HEADS,
        decoder_ffn_dim=FFN,
        num_mel_bins=80,
        max_source_positions=1500,
    )
    tensors |= _bf16(WhisperEncoder(wcfg).state_dict(), "audio_tower.")

    # Projector (v0.5 layout: RMSNorm → linear → swiglu → RMSNorm → linear), output RMS ≈ embedding RMS.
    d_in, d_mid, d_lm = D_MODEL * STACK, PROJ_HIDDEN // 2, text_cfg["hidden_size"]
    proj = {
        "ln_pre.weight": torch.ones(d_in),
        "linear_1.weight": torch.randn(PROJ_HIDDEN, d_in) / math.sqrt(d_in),
        "ln_mid.weight": torch.ones(d_mid),
        "linear_2.weight": torch.randn(d_lm, d_mid) * emb.pow(2).mean().sqrt() / math.sqrt(d_mid),
    }
    tensors |= _bf16(proj, "multi_modal_projector.")
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})

    audio_cfg = {k: v for k, v in wcfg.to_dict().items() if k not in ("transformers_version", "architectures")}
    config = {
        "architectures": ["UltravoxModel"],
        "model_type": "ultravox",
        "dtype": "bfloat16",
        "audio_config": audio_cfg,
        "text_config": text_cfg,
        "audio_token_index": audio_id,
        "vocab_size": vocab,
        "hidden_size": PROJ_HIDDEN,
        "stack_factor": STACK,
        "projector_act": "swiglu",
        "projector_ln_mid": True,
        "num_projector_layers": 0,
        "norm_init": 0.4,
        "ignore_index": -100,
        "tie_word_embeddings": True,
        "bos_token_id": text_cfg.get("bos_token_id"),
        "eos_token_id": tok.eos_token_id,
        "pad_token_id": text_cfg.get("pad_token_id"),
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    if (lm_dir / "generation_config.json").exists():
        shutil.copy(lm_dir / "generation_config.json", out / "generation_config.json")

    WhisperFeatureExtractor(
        feature_size=80, sampling_rate=16000, hop_length=160, chunk_length=30, n_fft=400, return_attention_mask=True
    ).save_pretrained(out)
    (out / "ultravox_processing.py").write_text(PROCESSOR_PY)
    (out / "processor_config.json").write_text(
        json.dumps(
            {
                "processor_class": "UltravoxProcessor",
                "auto_map": {"AutoProcessor": "ultravox_processing.UltravoxProcessor"},
                "stack_factor": STACK,
                "encoder_ds_factor": 2,
                "audio_context_size": 3000,
                "audio_placeholder": AUDIO_TOKEN,
            },
            indent=2,
        )
        + "\n"
    )
    (out / "PLUMBING.md").write_text(
        "Plumbing model: real SmolLM2-135M-Instruct + UNTRAINED Whisper-shaped tower and projector "
        "(Ultravox layout). Audio answers are meaningless. Built by scripts/_plumbing_audio.py. "
        "Serve with --trust-remote-code (processor in ultravox_processing.py).\n"
    )


if __name__ == "__main__":
    import sys
    import time

    t = time.time()
    build_audio_model(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]))
    print(f"built {sys.argv[2]} in {time.time() - t:.1f}s")
