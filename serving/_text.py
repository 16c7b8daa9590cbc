"""Helpers shared by the in-process engines (transformers, vLLM, SGLang): chat templating and output trimming."""

from __future__ import annotations

from typing import Any

from omnieval.core import RequestFailed


def text_messages(messages: list[dict[str, Any]], engine: str) -> list[dict[str, Any]]:
    """OpenAI messages with string content; these engines take text only, so a media part fails the request."""
    out: list[dict[str, Any]] = []
    for m in messages:
        c = m.get("content")
        if isinstance(c, list):
            kinds = {p.get("type") for p in c} - {"text"}
            if kinds:
                raise RequestFailed(f"engine {engine!r} is text-only; message has {sorted(map(str, kinds))} parts")
            c = "".join(p.get("text", "") for p in c)
        out.append({**m, "content": c or ""})
    return out


def has_media(messages: list[dict[str, Any]]) -> bool:
    return any(isinstance(m.get("content"), list) and any(p.get("type") != "text" for p in m["content"])
               for m in messages)  # fmt: skip


def hf_chat(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str], list[dict[str, str]]]:
    """OpenAI chat messages as transformers processors take them: media parts become ``{"type": "image"}`` /
    ``{"type": "audio"}`` placeholders the model's chat template expands, returned beside the image URLs (data URIs,
    paths, URLs: ``load_image`` reads them) and the ``input_audio`` payloads, in order."""
    out: list[dict[str, Any]] = []
    images: list[str] = []
    audios: list[dict[str, str]] = []
    for m in messages:
        c = m.get("content")
        if isinstance(c, str):
            out.append({"role": m["role"], "content": [{"type": "text", "text": c}]})
            continue
        parts: list[dict[str, Any]] = []
        for p in c or []:
            if p.get("type") == "text":
                parts.append({"type": "text", "text": p.get("text", "")})
            elif p.get("type") == "image_url":
                parts.append({"type": "image"})
                images.append(p["image_url"]["url"])
            elif p.get("type") == "input_audio":
                parts.append({"type": "audio"})
                audios.append(p["input_audio"])
            else:
                raise RequestFailed(
                    f"engine 'transformers' takes text, images and audio; a {p.get('type')!r} part needs vLLM or "
                    "SGLang (video: set video_input: frames)"
                )
        out.append({"role": m["role"], "content": parts})
    return out, images, audios


def chat_token_ids(tokenizer: Any, messages: list[dict[str, Any]], engine: str) -> list[int]:
    """Token ids of the chat-templated prompt; tokenizing in the template avoids a doubled BOS."""
    msgs = text_messages(messages, engine)
    if getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template(msgs, tokenize=True, add_generation_prompt=True)
        if hasattr(ids, "keys"):  # transformers 5 may return a BatchEncoding
            ids = ids["input_ids"]
        return [int(i) for i in ids]
    prompt = "\n".join(f"{m['role']}: {m['content']}" for m in msgs) + "\nassistant:"
    return [int(i) for i in tokenizer.encode(prompt)]


def cut_at_stop(text: str, stop: list[str]) -> tuple[str, bool]:
    """Text up to the first stop string (excluded, as in the OpenAI API) and whether one was found."""
    cut = min((i for i in (text.find(s) for s in stop if s) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)
