"""Calibrate the transformers engine (``omnieval bench calibrate --engine transformers``): the rates a federated
run's transformers replica is judged against (``_roofline``), measured on the replica's own engine class, in process.

Method (the engine has no server and does not stream, so every figure is a difference of walls):

1. **Decode step vs batch.** For each batch P, P concurrent requests (one batched ``generate``) at ``max_tokens`` 1
   and ``out_tokens``; ``step = (wall_N − wall_1) / (longest completion − 1)``: the batch decodes in lock-step until
   its longest row ends.
2. **Prefill.** Single text requests of growing unique prompts, ``max_tokens`` 1: wall against prompt tokens.
3. **Media items.** For a multimodal checkpoint, single requests with one synthetic item of each kind it takes (a
   5 s tone for audio, a 384×384 noise image), ``max_tokens`` 1: wall minus the fitted prefill of the request's
   prompt tokens is the item's processor + encoder cost (``media_item_s``).
4. **Fit.** ``_calibrate.fit_profile``, ``slots`` = the engine's ``max_batch_size``; ``threads`` is the cores the
   rates were measured on (the node roofline charges the replica that many).
"""

from __future__ import annotations

import asyncio
import base64
import io
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from omnieval.perf._calibrate import DecodePoint, PrefillPoint, _median_points, filler, fit_profile
from omnieval.perf._common import median
from serving import DEFAULT_PROFILE, ENGINES, GenerationRequest

COUNT_PROMPT = "Count from 1 to 500, separated by commas, without stopping: 1, 2, 3,"


def _req(i: str, content: Any, max_tokens: int) -> GenerationRequest:
    from omnieval.core import GenerationOptions

    return GenerationRequest(request_id=i, messages=[{"role": "user", "content": content}],
                             options=GenerationOptions(max_tokens=max_tokens, temperature=0.0))  # fmt: skip


def _tone_wav(seconds: float = 5.0, rate: int = 16000) -> str:
    import wave

    import numpy as np

    t = np.arange(int(seconds * rate)) / rate
    pcm = (0.3 * np.sin(2 * np.pi * 440 * t) * 32767).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())
    return base64.b64encode(buf.getvalue()).decode()


def _noise_png(seed: int, size: int = 384) -> str:
    import numpy as np
    from PIL import Image

    arr = np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def media_probe(kind: str, seed: int) -> list[dict[str, Any]]:
    """One synthetic item of ``kind`` and a short question, as OpenAI content parts (what the pool sends)."""
    if kind == "audio":
        part = {"type": "input_audio", "input_audio": {"data": _tone_wav(5.0 + seed * 0.01), "format": "wav"}}
    else:
        part = {"type": "image_url", "image_url": {"url": _noise_png(seed)}}
    return [part, {"type": "text", "text": f"[{seed}] Describe it."}]


async def _timed(eng: Any, reqs: list[GenerationRequest]) -> tuple[float, list[Any]]:
    t0 = time.monotonic()
    res = await asyncio.gather(*(eng.generate(r) for r in reqs))
    return time.monotonic() - t0, list(res)


async def _measure(ckpt: Path, *, threads: int, batches: list[int], out_tokens: int, prefill_words: tuple[int, ...],
                   repeats: int, log: Any) -> dict[str, Any]:  # fmt: skip
    from serving import engine_features

    slots = max(batches)
    engine_cls: Any = ENGINES.get("transformers")
    eng = engine_cls(replica_id="calibrate", model="calibrate", model_path=str(ckpt), threads=threads,
                     max_batch_size=slots)  # fmt: skip
    t0 = time.monotonic()
    await eng.start()
    startup_s = time.monotonic() - t0
    log(f"  {eng.version()} on {ckpt.name}, {threads} thread(s), ready in {startup_s:.0f} s")
    decode: list[DecodePoint] = []
    prefill: list[PrefillPoint] = []
    raw: list[dict[str, Any]] = []
    media_raw: list[dict[str, Any]] = []
    try:
        await _timed(eng, [_req("warm", "hi", 2)])
        for rep in range(repeats):
            for p in batches:
                prompts = [f"[{rep}-{p}-{i}] {COUNT_PROMPT}" for i in range(p)]
                w1, _ = await _timed(eng, [_req(f"d1-{i}", t, 1) for i, t in enumerate(prompts)])
                wn, rs = await _timed(eng, [_req(f"dn-{i}", t, out_tokens) for i, t in enumerate(prompts)])
                longest = max(r.completion_tokens for r in rs)
                if longest < 2:
                    log(f"  decode batch={p}: no request generated 2+ tokens; point skipped")
                    continue
                step = max(0.0, wn - w1) / (longest - 1)
                n_prompt = median([r.prompt_tokens for r in rs])
                decode.append(DecodePoint(p, p * (n_prompt + longest / 2), step))
                raw.append({"batch": p, "wall_1_s": w1, "wall_n_s": wn, "longest": longest, "step_s": step})
                log(f"  decode batch={p}: step {step * 1e3:.1f} ms ({longest} tokens, {p * longest / wn:.1f} tok/s)")
            for i, w in enumerate(prefill_words):
                wall, (r,) = await _timed(eng, [_req(f"p-{rep}-{i}", f"[p{rep}-{i}] " + filler(w, rep * 97 + i), 1)])
                prefill.append(PrefillPoint(r.prompt_tokens, wall))
                log(f"  prefill {r.prompt_tokens} tok: {wall * 1e3:.0f} ms")
        base = DEFAULT_PROFILE.with_(slots=slots)
        pre_med = [PrefillPoint(n, median([p.prefill_s for p in prefill if p.tokens == n]))
                   for n in sorted({p.tokens for p in prefill})]  # fmt: skip
        profile = fit_profile(_median_points(decode), pre_med, base=base,
                              source=f"bench calibrate {datetime.now(timezone.utc).date()}: {eng.version()}, "
                                     f"{ckpt.name}, {threads} thread(s), batches {batches}")  # fmt: skip
        media_item_s: dict[str, float] = {}
        for kind in sorted(engine_features("transformers", ckpt, {}).modalities - {"text", "video"}):
            costs = []
            for rep in range(max(1, repeats)):
                wall, (r,) = await _timed(eng, [_req(f"m-{kind}-{rep}", media_probe(kind, rep), 1)])
                text_part = profile.prefill_base_s + r.prompt_tokens * profile.prefill_per_token_s
                costs.append(max(0.0, wall - text_part))
                media_raw.append({"kind": kind, "wall_s": wall, "prompt_tokens": r.prompt_tokens})
            media_item_s[kind] = median(costs)
            log(f"  {kind} item: {media_item_s[kind] * 1e3:.0f} ms beyond its {r.prompt_tokens} prompt tokens' prefill")
        version = eng.version()
    finally:
        await eng.shutdown()
    return {
        "engine": "transformers",
        "engine_version": version,
        "checkpoint": str(ckpt),
        "threads": threads,
        "startup_s": startup_s,
        "profile": profile.to_dict(),
        "media_item_s": media_item_s,
        "decode_points": [p.__dict__ for p in decode],
        "prefill_points": [p.__dict__ for p in prefill],
        "decode_raw": raw,
        "media_raw": media_raw,
    }


def measure_transformers(model_dir: str | Path, *, threads: int = 1, batches: list[int] | None = None,
                         out_tokens: int = 32, prefill_words: tuple[int, ...] = (50, 150, 400),
                         repeats: int = 1, log: Any = print) -> dict[str, Any]:  # fmt: skip
    """The transformers engine on ``model_dir`` (an HF checkpoint), in process: measure, fit, media item costs."""
    from omnieval.perf._calibrate_vllm import resolve_model_dir

    return asyncio.run(_measure(resolve_model_dir(model_dir), threads=threads, batches=batches or [1, 2, 4, 8],
                                out_tokens=out_tokens, prefill_words=prefill_words, repeats=repeats, log=log))  # fmt: skip
